package client

import (
	"bytes"
	"crypto/ed25519"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/pmx-dev/pmx/internal/kit/auth"
)

// WithEd25519Signer makes the Client sign every request with priv, as a key registered with its
// public key must (the API documentation's Signed requests): PMX-Timestamp and PMX-Signature over
// the request's time, method, path and query as sent, and body. Each attempt of a retried request
// is signed afresh, since the server accepts a signed request once. With apiKey the key's prefix
// alone (pmx_ and 16 hex digits) rather than the whole key, the Client never sends the secret:
// it authenticates as Authorization: PMX-Ed25519 <prefix> and by the signature.
func WithEd25519Signer(priv ed25519.PrivateKey) Option {
	return func(c *Client) { c.signer = &signer{priv: priv} }
}

// signer signs a Client's requests. Two identical requests signed in the same millisecond would
// carry the same signature, and the server would refuse the second as a replay, so each is
// signed at a millisecond after the last: the Client's timestamps run ahead of its clock only
// while it signs more than 1000 requests a second, and the server allows 5 s.
type signer struct {
	priv ed25519.PrivateKey
	mu   sync.Mutex
	last int64 // the last timestamp signed, Unix milliseconds
}

func (s *signer) at(now time.Time) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last = max(s.last+1, now.UnixMilli())
	return time.UnixMilli(s.last)
}

// sign sets the signature headers of req, reading its body and leaving it to be sent.
func (s *signer) sign(req *http.Request) error {
	var body []byte
	if req.Body != nil && req.Body != http.NoBody {
		var err error
		body, err = io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return err
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		if req.GetBody == nil {
			req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		}
	}
	ts, sig := auth.SignRequest(s.priv, s.at(time.Now()), req.Method, req.URL.RequestURI(), body)
	req.Header.Set(auth.TimestampHeader, ts)
	req.Header.Set(auth.SignatureHeader, sig)
	return nil
}

// authorization is the Authorization header's value: the bearer key, or a signing key's prefix.
func (c *Client) authorization() string {
	if c.signer != nil {
		if prefix, ok := auth.ParsePrefix(c.key); ok {
			return auth.SignedScheme + " " + prefix
		}
	}
	return "Bearer " + c.key
}
