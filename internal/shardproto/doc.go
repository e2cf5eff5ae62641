// Package shardproto is the internal protocol between the front API, the operator and the shards
// in distributed mode, what both its ends share: its vocabulary, version 1, and the conversions to
// and from the processes' types (v1.go, with the calls added to version 1 in books.go, convert.go,
// eventtransition.go, handoff.go and feed.go), how the version travels and a mismatch is refused
// (protocol.go), the one table of error codes (protocolerrors.go), and the checks a shard makes of
// every request (validate.go). Its golden files (testdata/v1) hold version 1 to its bytes. The
// shard's HTTP server is package shardserver; the client that calls it, the front's Router and
// the feed's follower are package shardclient.
//
// The protocol is a shard's Exchange methods over HTTP, guarded by a token the processes share.
// Its messages are types of its own with JSON names of their own, so that renaming a field of
// exchange.PlaceRequest or records.Order changes nothing on the wire: orders travel whole, with their
// sequence numbers and accounts, so that side, outcome and status are decoded once, by the front;
// refusals travel whole as the *domain.Error the shard decided, other errors as codes that come
// back as the shard package's own errors, so the front answers exactly as pmx dev does. Fronts,
// shards and the operator of adjacent releases run together during a rolling upgrade: every
// request and answer carries its version, and an end refuses one it does not speak
// (docs/architecture.md §9).
package shardproto
