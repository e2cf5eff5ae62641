package shardclient

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"

	json "github.com/goccy/go-json"

	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/shardproto"
)

// shardClient calls one shard's internal API.
type shardClient struct {
	base  string // http://host:port
	token string
	http  *http.Client
}

// call posts (or gets, when in is nil) and decodes a success into out; an error answer becomes
// the shard error its code names. The bodies go through goccy/go-json, as the shard's own
// (internal/kit/httpkit) and the feed's stream (follower.go) do: encoding/json's reflection was a
// tenth of a front's CPU under load.
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
	req.Header.Set(shardproto.ProtocolHeader, strconv.Itoa(shardproto.ProtocolVersion))
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
	peer := "the shard at " + strings.TrimPrefix(c.base, "http://")
	dec := json.NewDecoder(resp.Body)
	var e shardproto.ErrorV1
	if resp.StatusCode >= 300 {
		_ = dec.Decode(&e)
		// A refusal of the request's version is an error answer of every version, whatever
		// version the shard marks it with.
		if e.Code == shardproto.CodeUnsupportedProtocol {
			return &shardproto.VersionError{Peer: peer, PeerSpeak: e.Speaks, Speaks: shardproto.Speaks}
		}
	}
	if err := answerVersion(resp, peer); err != nil {
		if in != nil && resp.StatusCode < 300 {
			// A shard that carried the write out and answered in another version: never sent
			// again (it cannot happen between releases that follow the protocol's rules).
			return errors.Join(exchange.ErrOutcomeUnknown, err)
		}
		return err
	}
	switch {
	case resp.StatusCode < 300 && out == nil:
		return nil
	case resp.StatusCode < 300:
		return dec.Decode(out)
	case e.Code == "" && resp.StatusCode == http.StatusNotFound:
		// Every path this build sends to is served by a shard of this build, which answers its
		// own 404s in ErrorV1: this is a shard of an older release, without the call.
		return fmt.Errorf("%s answered 404 to %s %s: %w", peer, method, path, shardproto.ErrOlderPeer)
	}
	return e.Err(resp.StatusCode)
}

// answerVersion checks that an answer is in a version this build speaks: one without the header
// is from a build before the protocol had a version, which speaks version 1.
func answerVersion(resp *http.Response, peer string) error {
	v, ok := shardproto.VersionOf(resp.Header)
	switch {
	case !ok:
		return &shardproto.VersionError{Peer: peer, Speaks: shardproto.Speaks, Header: resp.Header.Get(shardproto.ProtocolHeader)}
	case !shardproto.SpeaksVersion(v):
		return &shardproto.VersionError{Peer: peer, PeerSpeak: []int{v}, Speaks: shardproto.Speaks}
	}
	return nil
}
