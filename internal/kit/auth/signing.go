package auth

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Signed requests: a key registered with an Ed25519 public key must sign every request it makes,
// over the request's time, method, target (path and query as sent) and body. The front checks
// the signature (apiserver's authenticate), every SDK makes it (client's WithEd25519Signer, the
// Python SDK's signing_key), and both build the string signed here or by the same rule, which
// README and openapi.yaml spell out byte by byte.

// The request headers a signing key sends.
const (
	TimestampHeader = "PMX-Timestamp" // the request's time: Unix milliseconds, decimal
	SignatureHeader = "PMX-Signature" // standard base64, padded, of the 64-byte Ed25519 signature
)

// SignedScheme is the Authorization scheme of a signing key that sends no secret:
// "Authorization: PMX-Ed25519 <key prefix>", the prefix (pmx_ and 16 hex digits) naming the key.
const SignedScheme = "PMX-Ed25519"

// SignatureWindow is how far a signed request's timestamp may be from the server's clock, either
// way: far enough for a client's clock kept by NTP and a request's time on the wire, near enough
// that the signatures a server must remember to refuse replays are few (ReplayHold).
const SignatureWindow = 5 * time.Second

// ReplayHold is how long a front remembers a signed request to refuse it again: a request is
// accepted only within SignatureWindow of its timestamp, so one first seen at t can be accepted
// again until t + 2*SignatureWindow at the latest; the rest allows for the fronts' clocks
// differing from each other and from Postgres's by up to 50 s.
const ReplayHold = 2*SignatureWindow + 50*time.Second

// maxTimestampDigits bounds the timestamp's text: Unix milliseconds have 13 digits until 2286.
const maxTimestampDigits = 16

// SignedMessage is the exact byte string a signing key signs:
//
//	timestamp "\n" method "\n" target "\n" hex(sha256(body))
//
// timestamp is the PMX-Timestamp header's text, method the request's method as sent (upper case),
// target the request target of the request line as sent (path and query, percent-encoded as on
// the wire, "?" and the raw query included when there is one: /api/v1/orders?marketId=m1), and
// the last line the lower-case hex SHA-256 of the body's bytes (of nothing for a request without
// one: e3b0c442...b855). No line ends in a newline. None of the parts can hold a newline, so the
// string names one request only.
func SignedMessage(timestamp, method, target string, body []byte) []byte {
	sum := sha256.Sum256(body)
	var b bytes.Buffer
	b.Grow(len(timestamp) + len(method) + len(target) + 3 + 2*sha256.Size)
	b.WriteString(timestamp)
	b.WriteByte('\n')
	b.WriteString(method)
	b.WriteByte('\n')
	b.WriteString(target)
	b.WriteByte('\n')
	b.WriteString(hex.EncodeToString(sum[:]))
	return b.Bytes()
}

// SignRequest signs a request with a private key at now, returning the two headers' values.
func SignRequest(priv ed25519.PrivateKey, now time.Time, method, target string, body []byte) (timestamp, signature string) {
	timestamp = strconv.FormatInt(now.UnixMilli(), 10)
	sig := ed25519.Sign(priv, SignedMessage(timestamp, method, target, body))
	return timestamp, base64.StdEncoding.EncodeToString(sig)
}

// Why a signature was refused.
var (
	ErrSignatureMissing   = errors.New("missing")
	ErrSignatureMalformed = errors.New("malformed")
	ErrSignatureWrong     = errors.New("wrong")
	ErrSignatureStale     = errors.New("stale")
)

// SignatureError is a refused signature: Reason is one of the ErrSignature* errors, Message what
// to tell the client.
type SignatureError struct {
	Reason  error
	Message string
}

func (e *SignatureError) Error() string { return e.Message }
func (e *SignatureError) Unwrap() error { return e.Reason }

func sigErr(reason error, format string, args ...any) *SignatureError {
	return &SignatureError{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// ParseSignatureHeaders reads the two headers strictly: the timestamp decimal digits only (no
// sign, no spaces, at most 16), the signature standard padded base64 of exactly 64 bytes.
func ParseSignatureHeaders(timestamp, signature string) (ms int64, sig []byte, err error) {
	if timestamp == "" || signature == "" {
		return 0, nil, sigErr(ErrSignatureMissing, "this API key must sign every request: send the headers %s (Unix milliseconds) and %s "+
			"(base64 of the Ed25519 signature of the request, as the API documentation's Signed requests section says)", TimestampHeader, SignatureHeader)
	}
	if len(timestamp) > maxTimestampDigits || strings.TrimLeft(timestamp, "0123456789") != "" {
		return 0, nil, sigErr(ErrSignatureMalformed, "%s must be the request's time in Unix milliseconds, decimal digits only (like 1767225600000), not %.40q",
			TimestampHeader, timestamp)
	}
	ms, err = strconv.ParseInt(timestamp, 10, 64)
	if err != nil {
		return 0, nil, sigErr(ErrSignatureMalformed, "%s %q is out of range: send Unix milliseconds", TimestampHeader, timestamp)
	}
	// The length first: the decoder skips newlines, which are no part of a signature's text.
	if len(signature) == base64.StdEncoding.EncodedLen(ed25519.SignatureSize) {
		sig, err = base64.StdEncoding.Strict().DecodeString(signature)
	}
	if sig == nil || err != nil || len(sig) != ed25519.SignatureSize {
		return 0, nil, sigErr(ErrSignatureMalformed, "%s must be the standard base64 (padded, 88 characters) of a 64-byte Ed25519 signature", SignatureHeader)
	}
	return ms, sig, nil
}

// VerifyRequest checks a signed request's headers against the key's public key at now: the
// signature must be of SignedMessage and the timestamp within SignatureWindow of now. It returns
// the message verified (for the front to remember, refusing its replay) or a *SignatureError.
// The signature is checked before the time, so a stale refusal says only that a real signature
// came late (a clock to fix), never that a forged one did.
func VerifyRequest(pub ed25519.PublicKey, timestamp, signature, method, target string, body []byte, now time.Time) ([]byte, error) {
	ms, sig, err := ParseSignatureHeaders(timestamp, signature)
	if err != nil {
		return nil, err
	}
	msg := SignedMessage(timestamp, method, target, body)
	if !ed25519.Verify(pub, msg, sig) {
		return nil, sigErr(ErrSignatureWrong, "the signature does not match this request and key: sign four lines joined by newlines, "+
			"the PMX-Timestamp header, the method, the path and query exactly as sent, and the lower-case hex SHA-256 of the body's exact bytes, "+
			"with the private key of the public key registered with this API key")
	}
	at := time.UnixMilli(ms)
	if off := at.Sub(now); off > SignatureWindow || off < -SignatureWindow {
		return nil, sigErr(ErrSignatureStale, "the request's %s is %s, %v from the server's clock (%s): a request must be signed within %v of it; "+
			"set your clock by NTP and sign each request when you send it", TimestampHeader, at.UTC().Format(time.RFC3339Nano),
			off.Round(time.Millisecond), now.UTC().Format(time.RFC3339Nano), SignatureWindow)
	}
	return msg, nil
}

// ParsePublicKey reads an Ed25519 public key as a key's owner registers it: the standard base64 of
// its 32 bytes (what GET /account/keys shows), or the PEM of its SubjectPublicKeyInfo that
// `openssl pkey -pubout` writes.
func ParsePublicKey(text string) (ed25519.PublicKey, error) {
	text = strings.TrimSpace(text)
	if strings.HasPrefix(text, "-----BEGIN") {
		block, rest := pem.Decode([]byte(text))
		if block == nil || block.Type != "PUBLIC KEY" || len(bytes.TrimSpace(rest)) != 0 {
			return nil, errors.New("the public key's PEM must be one PUBLIC KEY block, as openssl pkey -pubout writes")
		}
		pub, err := x509.ParsePKIXPublicKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("the public key's PEM holds no public key: %v", err)
		}
		key, ok := pub.(ed25519.PublicKey)
		if !ok {
			return nil, fmt.Errorf("the public key is a %T, not Ed25519: make one with openssl genpkey -algorithm ed25519", pub)
		}
		return key, nil
	}
	raw, err := base64.StdEncoding.Strict().DecodeString(text)
	if err != nil || len(text) != base64.StdEncoding.EncodedLen(ed25519.PublicKeySize) || len(raw) != ed25519.PublicKeySize {
		return nil, errors.New("the public key must be an Ed25519 public key: the standard base64 of its 32 bytes (44 characters), " +
			"or the PEM that openssl pkey -pubout writes")
	}
	return ed25519.PublicKey(raw), nil
}

// FormatPublicKey is a public key as the API and pages show it: the standard base64 of its bytes.
func FormatPublicKey(pub ed25519.PublicKey) string {
	if len(pub) == 0 {
		return ""
	}
	return base64.StdEncoding.EncodeToString(pub)
}
