// Package client is the Go SDK of pmx's public API (/api/v1) and its live feed (/api/v1/ws).
//
// Two layers:
//
//   - api.gen.go is generated from apiserver/openapi.yaml by oapi-codegen (pinned in go.mod's tool
//     block; `go generate ./client`): every shape of the API as a Go type, and RawClient and
//     ClientWithResponses, which can call every operation. oapi-codegen was chosen because it is
//     the maintained generator of idiomatic Go for OpenAPI 3.0 (pmx's document is 3.0.3): plain
//     net/http, structs with json tags, enums as typed constants, and a small runtime for
//     parameters, with nothing else to learn. A test fails when the committed file is stale.
//   - Client (client.go) is written by hand, for what a generator cannot know: it signs every
//     request with the API key; returns each operation's answer as (value, error) with the API's
//     error body as *APIError; gives every placement a clientOrderId so that a placement whose answer
//     was lost can be sent again and is answered by the order it made, not placed twice (and every
//     conversion a clientRequestId, likewise); retries only what is safe to retry (reads;
//     placements with a clientOrderId; conversions with a clientRequestId; heartbeats) after a
//     broken connection or a 502, 503 or 504, backing off; and waits out a 429 for the
//     Retry-After the server names (nothing changed, so every request may be retried).
//   - Feed (feed.go) follows the WebSocket feed: it tracks each subscription's sequence number
//     (on orders and fills, the account feed's cursor and each stream's seq), detects a gap, and
//     reconnects and resumes (resumeFrom) after a disconnect or a gap, so that
//     what it delivers is every event once, in order; Ready says when every subscription is
//     confirmed, from which point nothing is missed.
package client

//go:generate go tool oapi-codegen -config oapi-codegen.yaml -o api.gen.go ../apiserver/openapi.yaml
