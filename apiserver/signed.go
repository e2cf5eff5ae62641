package apiserver

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/pmx-dev/pmx/internal/kit/auth"
	"github.com/pmx-dev/pmx/internal/kit/httpkit"
	"github.com/pmx-dev/pmx/internal/store/accounts"
)

// Signed requests (package auth's signing.go has the rule): a key registered with an Ed25519
// public key must sign every request, sent either with its secret (Authorization: Bearer <key>)
// or, for a firm that will not send a secret, with only its public prefix
// (Authorization: PMX-Ed25519 <prefix>), the signature being the proof. Each accepted signed
// request is recorded in Postgres (store.FirstSignedRequest) for ReplayHold, so that a request
// sent again to this front or any other is refused: one insert per signed request, the price of
// refusing replays across every replica rather than only the one a replay reaches.

var errNoSignature = &httpkit.Error{Status: http.StatusUnauthorized, Code: "invalid_signature",
	Message: "this API key has no public key, so its requests are not signed and " + auth.TimestampHeader + " and " +
		auth.SignatureHeader + " must not be sent: send it without them, or make a key with a public key on the developer settings page (/settings)"}

var errUnsignedKey = &httpkit.Error{Status: http.StatusUnauthorized, Code: "invalid_api_key",
	Message: "only a key with a public key may send Authorization: " + auth.SignedScheme + " <prefix>; " +
		"send this one as Authorization: Bearer <key>, or make a key with a public key on the developer settings page (/settings)"}

// signedPrefix reads Authorization: PMX-Ed25519 <prefix>.
func signedPrefix(r *http.Request) (prefix string, present, ok bool) {
	scheme, rest, found := strings.Cut(r.Header.Get("Authorization"), " ")
	if !found || !strings.EqualFold(scheme, auth.SignedScheme) {
		return "", false, false
	}
	prefix, ok = auth.ParsePrefix(strings.TrimSpace(rest))
	return prefix, true, ok
}

// verifySigned checks the signature a key's request must carry, or must not: it answers and
// reports false when the request is refused. A key without a public key signs nothing, so a
// request that sends signature headers with it is refused rather than let in unverified, since
// its client believes its requests are signed when they are not.
func (s *Server) verifySigned(c *gin.Context, rec accounts.KeyRecord) bool {
	r := c.Request
	if len(rec.PublicKey) == 0 {
		if r.Header.Get(auth.TimestampHeader) != "" || r.Header.Get(auth.SignatureHeader) != "" {
			httpkit.AbortUnread(c, errNoSignature)
			return false
		}
		return true
	}
	body, err := readBody(r)
	if err != nil {
		writeError(c, err)
		return false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	// RequestURI is the request line's target as sent: path and query, not decoded.
	msg, err := auth.VerifyRequest(rec.PublicKey, r.Header.Get(auth.TimestampHeader), r.Header.Get(auth.SignatureHeader),
		r.Method, r.RequestURI, body, s.cfg.Now())
	var bad *auth.SignatureError
	switch {
	case errors.Is(err, auth.ErrSignatureStale):
		// A clock to fix, not a guess: not counted as a failed authentication.
		httpkit.Abort(c, &httpkit.Error{Status: http.StatusUnauthorized, Code: "stale_request", Message: err.Error()})
		return false
	case errors.As(err, &bad):
		// Not counted against the address either (authFailureRate): checking a signature costs
		// no Postgres work, which is what the limit bounds, and an Ed25519 signature cannot be
		// guessed; counting would let anyone sharing the holder's address lock it out.
		s.authFailed.WithLabelValues("signature", "invalid").Inc()
		httpkit.AbortUnread(c, &httpkit.Error{Status: http.StatusUnauthorized, Code: "invalid_signature", Message: bad.Message})
		return false
	}
	first, err := s.cfg.Store.FirstSignedRequest(r.Context(), rec.ID, msg)
	if err != nil {
		writeError(c, err)
		return false
	}
	if !first { // counted: each replay costs an insert
		s.refuse(c, "signature", &httpkit.Error{Status: http.StatusUnauthorized, Code: "replayed_request",
			Message: "this signed request was already received: a signed request is accepted once; sign each request afresh, " +
				"and do not send two identical requests in the same millisecond (their signatures are the same)"})
		return false
	}
	return true
}

// sweepSigned forgets signed requests too old to be accepted again, until ctx ends. Every front
// sweeps; the deletes of two fronts at once cost each other nothing but a row lock.
func (s *Server) sweepSigned(ctx context.Context) {
	every(ctx, 10*time.Second, func() {
		if err := s.cfg.Store.SweepSignedRequests(ctx, auth.ReplayHold); err != nil && ctx.Err() == nil {
			s.log.Warn("could not forget old signed requests; trying again in 10 s", "err", err)
		}
	})
}
