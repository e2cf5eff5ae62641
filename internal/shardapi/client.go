package shardapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"

	"github.com/pmx-dev/pmx/internal/exchange"
)

// shardClient calls one shard's internal API.
type shardClient struct {
	base  string // http://host:port
	token string
	http  *http.Client
}

// call posts (or gets, when in is nil) and decodes a success into out; an error answer becomes
// the shard error its code names.
func (c *shardClient) call(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		raw, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		// A shard that could not be reached (it may have just died) never saw the request, and a
		// read can always be sent again: the caller re-routes. A write that failed any other way
		// (a reset connection, a timeout) may have been carried out before the answer was lost,
		// and sending it again could place an order twice.
		if op := (*net.OpError)(nil); in == nil || errors.As(err, &op) && op.Op == "dial" {
			return errors.Join(exchange.ErrNotOwner, err)
		}
		return errors.Join(exchange.ErrOutcomeUnknown, err)
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	if resp.StatusCode < 300 {
		return dec.Decode(out)
	}
	var e errorWire
	_ = dec.Decode(&e)
	return e.err(resp.StatusCode)
}

type internalCallError struct {
	status int
	code   string
}

func (e *internalCallError) Error() string {
	return "shard answered " + http.StatusText(e.status) + " (" + e.code + ")"
}
