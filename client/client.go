package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Client calls pmx's public API with one account's API key. Its methods return each operation's
// answer as a value, or an error: *APIError for the API's refusals, a Go error when no answer came.
// The generated ClientWithResponses it embeds reaches every operation with the whole response
// (headers and every status's body) where that is wanted; both go through the same retries.
type Client struct {
	*ClientWithResponses
	server string
	key    string
	hc     *http.Client
	retry  Retry
	signer *signer // nil: requests are not signed (WithEd25519Signer)
}

// Retry says how a Client retries. A request is sent again after a 429 (the server changed nothing
// and names the wait in Retry-After) and, where sending it twice is safe, after a broken
// connection or a 502, 503 or 504 (waiting Backoff, then twice as long each time). Safe means: a
// read; a placement (single or batch) whose every order carries a clientOrderId, which Client's
// placements always do; a heartbeat.
type Retry struct {
	// Attempts is how many times a request is sent at most (1: never retried).
	Attempts int
	// Backoff is the first wait after a failure without Retry-After.
	Backoff time.Duration
	// MaxWait caps a single wait, a Retry-After included: a longer one is not waited for, and the
	// 429 is returned.
	MaxWait time.Duration
}

// DefaultRetry is a Client's retry policy unless WithRetry gives another.
var DefaultRetry = Retry{Attempts: 5, Backoff: 50 * time.Millisecond, MaxWait: 5 * time.Second}

// Option configures a Client.
type Option func(*Client)

// WithHTTP makes the Client send its requests through hc (default: http.DefaultTransport with a
// 30 s timeout).
func WithHTTP(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithRetries replaces DefaultRetry.
func WithRetries(r Retry) Option { return func(c *Client) { c.retry = r } }

// New returns a Client of the API at server, the URL that ends in the version prefix
// (http://127.0.0.1:8080/api/v1), authenticating with apiKey (or, with WithEd25519Signer, the
// key's prefix alone).
func New(server, apiKey string, opts ...Option) (*Client, error) {
	u, err := url.Parse(server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("server %q is not an http(s) URL: give the API's address with its prefix, like http://127.0.0.1:8080/api/v1", server)
	}
	if apiKey == "" {
		return nil, errors.New("no API key: create one on the settings page (/settings) or with the admin API")
	}
	c := &Client{server: strings.TrimSuffix(server, "/"), key: apiKey, retry: DefaultRetry,
		hc: &http.Client{Timeout: 30 * time.Second}}
	for _, o := range opts {
		o(c)
	}
	if c.retry.Attempts < 1 {
		c.retry.Attempts = 1
	}
	c.ClientWithResponses, err = NewClientWithResponses(c.server,
		WithHTTPClient(retrying{c}), WithRequestEditorFn(c.authorize))
	if err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Client) authorize(_ context.Context, req *http.Request) error {
	req.Header.Set("Authorization", c.authorization())
	return nil
}

// Server is the API's URL the Client was made with.
func (c *Client) Server() string { return c.server }

// APIKey is the key the Client authenticates with (or its prefix, for a signing key that sends no
// secret).
func (c *Client) APIKey() string { return c.key }

// APIError is the API's answer to a request it refused: {"error": "...", "details": {"code": "...",
// "field": "..."}}, with the HTTP status and, for a 429, how long to wait.
type APIError struct {
	Status     int
	Code       string // stable, e.g. "insufficient_funds", "rate_limited"
	Field      string // the request field at fault, where one is
	Message    string // what was wrong and what to do
	RetryAfter time.Duration
}

func (e *APIError) Error() string {
	s := fmt.Sprintf("pmx: %d %s: %s", e.Status, e.Code, e.Message)
	if e.Field != "" {
		s += " (field " + e.Field + ")"
	}
	return s
}

// IsCode reports whether err is an *APIError with the given code.
func IsCode(err error, code string) bool {
	var e *APIError
	return errors.As(err, &e) && e.Code == code
}

// value returns v, the decoded body of a successful answer, or the answer as an *Error.
func value[T any](resp *http.Response, body []byte, v *T) (*T, error) {
	if resp.StatusCode >= 200 && resp.StatusCode < 300 && v != nil {
		return v, nil
	}
	return nil, errorOf(resp.StatusCode, body, resp.Header)
}

// errorOf decodes an error body; a body that is not one still gives an APIError saying so.
func errorOf(status int, body []byte, h http.Header) *APIError {
	var b struct {
		Error   string `json:"error"`
		Details struct {
			Code  string `json:"code"`
			Field string `json:"field"`
		} `json:"details"`
	}
	e := &APIError{Status: status}
	if json.Unmarshal(body, &b) == nil && b.Error != "" {
		e.Code, e.Field, e.Message = b.Details.Code, b.Details.Field, b.Error
	} else {
		e.Code = "unexpected_answer"
		e.Message = fmt.Sprintf("the server answered %d with %q, not an API answer: is the server URL right?", status, truncate(body, 200))
	}
	e.RetryAfter = retryAfter(h)
	return e
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

// NewClientOrderID returns a fresh client order id, as Client's placements use when none is given.
func NewClientOrderID() string { return uuid.NewString() }

// withClientOrderID returns o with a client order id, a fresh one when it had none, so that
// sending it again is safe.
func withClientOrderID(o PlaceOrderRequest) PlaceOrderRequest {
	if o.ClientOrderID == nil || *o.ClientOrderID == "" {
		id := NewClientOrderID()
		o.ClientOrderID = &id
	}
	return o
}

// retrying is the generated client's sender: Client's HTTP client, with Client's retries.
type retrying struct{ c *Client }

func (r retrying) Do(req *http.Request) (*http.Response, error) {
	safe := retrySafe(req)
	wait := r.c.retry.Backoff
	for attempt := 1; ; attempt++ {
		if r.c.signer != nil {
			if err := r.c.signer.sign(req); err != nil {
				return nil, err
			}
		}
		resp, err := r.c.hc.Do(req)
		var pause time.Duration
		switch {
		case err == nil && resp.StatusCode == http.StatusTooManyRequests:
			pause = max(wait, retryAfter(resp.Header))
		case safe && err != nil && req.Context().Err() == nil: // no answer: it may not have arrived
			pause = wait
		case safe && err == nil && (resp.StatusCode == http.StatusBadGateway ||
			resp.StatusCode == http.StatusServiceUnavailable || resp.StatusCode == http.StatusGatewayTimeout):
			pause = max(wait, retryAfter(resp.Header))
		default:
			return resp, err
		}
		if attempt >= r.c.retry.Attempts || pause > r.c.retry.MaxWait || req.GetBody == nil && req.Body != nil {
			return resp, err
		}
		if deadline, ok := req.Context().Deadline(); ok && time.Until(deadline) < pause {
			return resp, err
		}
		if resp != nil {
			resp.Body.Close()
		}
		t := time.NewTimer(pause)
		select {
		case <-req.Context().Done():
			t.Stop()
			return nil, req.Context().Err()
		case <-t.C:
		}
		if pause == wait {
			wait *= 2
		}
		if req.GetBody != nil {
			body, err := req.GetBody()
			if err != nil {
				return nil, err
			}
			req.Body = body
		}
	}
}

// retryAfter is the wait a Retry-After header names in seconds (0 when none).
func retryAfter(h http.Header) time.Duration {
	var s int
	if _, err := fmt.Sscanf(h.Get("Retry-After"), "%d", &s); err != nil || s < 0 {
		return 0
	}
	return time.Duration(s) * time.Second
}

// retrySafe reports whether sending req twice has the effect and the answer of sending it once.
func retrySafe(req *http.Request) bool {
	if req.Method == http.MethodGet {
		return true
	}
	if req.Method != http.MethodPost || req.GetBody == nil {
		return false
	}
	switch {
	case strings.HasSuffix(req.URL.Path, "/heartbeat"):
		return true
	case strings.HasSuffix(req.URL.Path, "/order"):
		var o struct {
			ClientOrderID string `json:"clientOrderId"`
		}
		return decodeBody(req, &o) && o.ClientOrderID != ""
	case strings.HasSuffix(req.URL.Path, "/event/convert"):
		var c struct {
			ClientRequestID string `json:"clientRequestId"`
		}
		return decodeBody(req, &c) && c.ClientRequestID != ""
	case strings.HasSuffix(req.URL.Path, "/orders/batch"):
		var b struct {
			Orders []struct {
				ClientOrderID string `json:"clientOrderId"`
			} `json:"orders"`
		}
		if !decodeBody(req, &b) || len(b.Orders) == 0 {
			return false
		}
		for _, o := range b.Orders {
			if o.ClientOrderID == "" {
				return false
			}
		}
		return true
	}
	return false
}

func decodeBody(req *http.Request, v any) bool {
	body, err := req.GetBody()
	if err != nil {
		return false
	}
	defer body.Close()
	return json.NewDecoder(body).Decode(v) == nil
}
