package loadgen

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"syscall"
	"time"
	"unicode/utf8"

	json "github.com/goccy/go-json"

	sdk "github.com/pmx-dev/pmx/client"
)

// maxBody bounds how much of a response body is read.
const maxBody = 4 << 20

// client talks to one pmx server: one shared transport with keep-alive and an idle connection
// per bot, no proxy and no redirects, so that it only ever reaches the configured address. Every
// request of the public API is built and sent by the SDK's generated client (package client), so
// that pmx has one client of its API; the bots build their request bodies by appending and read
// the answers into the few fields they use (state.go), which costs the load generator less CPU,
// taken from the exchange it measures on a shared machine, than the SDK's typed shapes would.
type client struct {
	hc   *http.Client
	base string // scheme://host[:port][/prefix]
	api  *sdk.RawClient
}

func newClient(base string, bots int, timeout time.Duration) (*client, error) {
	hc := NewHTTPClient(bots, timeout)
	api, err := sdk.NewClient(base+apiPrefix, sdk.WithHTTPClient(hc))
	if err != nil {
		return nil, fmt.Errorf("pmx at %s: %w", base, err)
	}
	return &client{base: base, hc: hc, api: api}, nil
}

// authorization returns the SDK request editor that signs a request with an API key.
func authorization(key string) sdk.RequestEditorFn {
	header := []string{"Bearer " + key}
	return func(_ context.Context, req *http.Request) error {
		req.Header["Authorization"] = header
		return nil
	}
}

// jsonType is the content type of every request body.
const jsonType = "application/json"

// NewHTTPClient returns the HTTP client the bots share, for other measurements to use the same
// one: keep-alive with an idle connection per bot, no proxy, no compression, no redirects.
func NewHTTPClient(bots int, timeout time.Duration) *http.Client {
	tr := &http.Transport{
		Proxy: nil,
		DialContext: (&net.Dialer{
			Timeout:   5 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		MaxIdleConns:          2*bots + 16,
		MaxIdleConnsPerHost:   bots + 8,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   5 * time.Second,
		ResponseHeaderTimeout: timeout,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true,
	}
	return &http.Client{
		Transport: tr,
		Timeout:   timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

func (c *client) close() { c.hc.CloseIdleConnections() }

// result is the outcome of one request.
type result struct {
	status    int    // HTTP status; 0 when no response arrived
	code      string // details.code of an error response, or a transport error's class
	end       time.Time
	err       error
	transport bool // no (complete) response: err says why
}

func (r *result) ok() bool       { return !r.transport && r.status >= 200 && r.status < 300 }
func (r *result) rejected() bool { return !r.transport && r.status >= 400 && r.status < 500 }

// apiError is the error body of the API: {"error": "...", "details": {"code": "..."}}.
type apiError struct {
	Error   string `json:"error"`
	Details struct {
		Code string `json:"code"`
	} `json:"details"`
}

// do sends one request the SDK does not know (the admin API's) and reads the whole response body
// into buf. auth is the full Authorization header value.
func (c *client) do(ctx context.Context, method, path, auth string, body []byte, buf *bytes.Buffer) result {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return result{err: err, transport: true, code: "bad_request", end: time.Now()}
	}
	req.Header["Authorization"] = []string{auth}
	if body != nil {
		req.Header["Content-Type"] = []string{jsonType}
	}
	resp, err := c.hc.Do(req)
	return read(resp, err, buf)
}

// read reads the whole answer to a request into buf. The result's end time is taken once the body
// has been read.
func read(resp *http.Response, err error, buf *bytes.Buffer) result {
	if err != nil {
		return result{err: err, transport: true, code: transportCode(err), end: time.Now()}
	}
	buf.Reset()
	_, err = buf.ReadFrom(io.LimitReader(resp.Body, maxBody))
	resp.Body.Close()
	end := time.Now()
	if err != nil {
		return result{status: resp.StatusCode, err: err, transport: true, code: transportCode(err), end: end}
	}
	r := result{status: resp.StatusCode, end: end}
	if resp.StatusCode >= 300 {
		var e apiError
		if json.Unmarshal(buf.Bytes(), &e) == nil {
			r.code = e.Details.Code
			if e.Error != "" {
				r.err = errors.New(e.Error)
			}
		}
	}
	return r
}

// transportCode classifies a transport error for the report.
func transportCode(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection_refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection_reset"
	}
	return "transport"
}

// describe turns a failed setup request into an error message.
func (r *result) describe(what string) error {
	switch {
	case r.transport:
		return fmt.Errorf("%s: %w", what, r.err)
	case r.err != nil && r.code != "":
		return fmt.Errorf("%s: HTTP %d %s: %v", what, r.status, r.code, r.err)
	case r.err != nil:
		return fmt.Errorf("%s: HTTP %d: %v", what, r.status, r.err)
	}
	return fmt.Errorf("%s: HTTP %d", what, r.status)
}

// Request bodies are built by appending, without reflection.

// appendOrderBody appends the POST /order body of o.
func appendOrderBody(b []byte, marketID string, o order) []byte {
	b = append(b, `{"marketId":`...)
	b = appendJSONString(b, marketID)
	if o.sell {
		b = append(b, `,"side":"SELL","outcome":"`...)
	} else {
		b = append(b, `,"side":"BUY","outcome":"`...)
	}
	b = append(b, outcomeName(o.outcome)...)
	b = append(b, `","price":`...)
	b = strconv.AppendInt(b, int64(o.price), 10)
	b = append(b, `,"quantity":`...)
	b = strconv.AppendInt(b, int64(o.qty), 10)
	return append(b, '}')
}

// appendBatchBody appends the POST /orders/batch body of the placements os, all in one market.
func appendBatchBody(b []byte, marketID string, os []order) []byte {
	b = append(b, `{"orders":[`...)
	for i, o := range os {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendOrderBody(b, marketID, o)
	}
	return append(b, ']', '}')
}

// appendAmendBody appends the POST /order/amend body of the order id: its new price and new
// remaining quantity, each left out when zero (unchanged).
func appendAmendBody(b []byte, id string, price, qty int) []byte {
	b = append(b, `{"orderId":`...)
	b = appendJSONString(b, id)
	if price != 0 {
		b = append(b, `,"price":`...)
		b = strconv.AppendInt(b, int64(price), 10)
	}
	if qty != 0 {
		b = append(b, `,"quantity":`...)
		b = strconv.AppendInt(b, int64(qty), 10)
	}
	return append(b, '}')
}

// appendCancelIDsBody appends the POST /orders/cancel body that names the orders os.
func appendCancelIDsBody(b []byte, os []openOrder) []byte {
	b = append(b, `{"orderIds":[`...)
	for i := range os {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, os[i].id)
	}
	return append(b, ']', '}')
}

// appendObject1 appends {"key": value} with one string value.
func appendObject1(b []byte, key, value string) []byte {
	b = append(b, '{')
	b = appendJSONString(b, key)
	b = append(b, ':')
	b = appendJSONString(b, value)
	return append(b, '}')
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string, escaping what JSON requires (and <, >, & as
// encoding/json does); invalid UTF-8 becomes U+FFFD.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20 || c == '<' || c == '>' || c == '&':
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}
