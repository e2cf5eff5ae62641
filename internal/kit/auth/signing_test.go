package auth

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
)

// exampleKey is the key of README's worked example: the seed is sha256("pmx signing example").
func exampleKey() ed25519.PrivateKey {
	seed := sha256.Sum256([]byte("pmx signing example"))
	return ed25519.NewKeyFromSeed(seed[:])
}

const (
	examplePublicKey = "TQ4mJ/zK8sowTT0QsToI5+29PhsclIQW4Y8WSdDehvk="
	examplePEM       = "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEATQ4mJ/zK8sowTT0QsToI5+29PhsclIQW4Y8WSdDehvk=\n-----END PUBLIC KEY-----\n"
	exampleBody      = `{"marketId":"m1","side":"BUY","outcome":"YES","price":40,"quantity":10}`
)

// TestSignedMessage holds the string signed to the bytes the documents give, and the signatures
// to the ones openssl pkeyutl -sign -rawin makes of them (README's worked example), so that a
// change to either side of the rule fails here before it fails every client.
func TestSignedMessage(t *testing.T) {
	priv := exampleKey()
	for _, tc := range []struct {
		method, target, body string
		want, sig            string
	}{
		{"POST", "/api/v1/order", exampleBody,
			"1767225600000\nPOST\n/api/v1/order\n2dff3b8ebb6dbff975ae637b65565438c1b95bce8246e6d3d2c5905c59bf0954",
			"2rR+sZUi+/b06EW1TlChdaexQ6cek7V0qn8xUgRX6ddrUF7VKs1FHlWhAjhUzTxAdzrN51BxpQ+xzW/Rw0gmBw=="},
		{"GET", "/api/v1/orders?marketId=m1&status=OPEN", "",
			"1767225600000\nGET\n/api/v1/orders?marketId=m1&status=OPEN\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
			"AkNvcd6umrWVpmNnw0N6E0lM6Xara+9ogJWU4B9OuT2tr+YIfdD39YvLFDifopnD+JFSHcwMs5Ib7mPMackiBg=="},
	} {
		if got := string(SignedMessage("1767225600000", tc.method, tc.target, []byte(tc.body))); got != tc.want {
			t.Errorf("%s %s: signed %q, want %q", tc.method, tc.target, got, tc.want)
		}
		ts, sig := SignRequest(priv, time.UnixMilli(1767225600000), tc.method, tc.target, []byte(tc.body))
		if ts != "1767225600000" || sig != tc.sig {
			t.Errorf("%s %s: headers %s %s, want 1767225600000 %s", tc.method, tc.target, ts, sig, tc.sig)
		}
	}
	if got := FormatPublicKey(priv.Public().(ed25519.PublicKey)); got != examplePublicKey {
		t.Errorf("the example's public key reads %s, want %s", got, examplePublicKey)
	}
}

func TestVerifyRequest(t *testing.T) {
	priv := exampleKey()
	pub := priv.Public().(ed25519.PublicKey)
	_, other, _ := ed25519.GenerateKey(nil)
	now := time.UnixMilli(1767225600000)
	sign := func(key ed25519.PrivateKey, at time.Time, method, target, body string) (string, string) {
		return SignRequest(key, at, method, target, []byte(body))
	}
	good := func() (string, string) { return sign(priv, now, "POST", "/api/v1/order?x=1", exampleBody) }
	for _, tc := range []struct {
		name                 string
		headers              func() (string, string)
		method, target, body string
		want                 error // nil: accepted
	}{
		{"good", good, "POST", "/api/v1/order?x=1", exampleBody, nil},
		{"at the window's edges", func() (string, string) { return sign(priv, now.Add(SignatureWindow), "GET", "/a", "") }, "GET", "/a", "", nil},
		{"at the window's past edge", func() (string, string) { return sign(priv, now.Add(-SignatureWindow), "GET", "/a", "") }, "GET", "/a", "", nil},
		{"stale", func() (string, string) {
			return sign(priv, now.Add(-SignatureWindow-time.Millisecond), "GET", "/a", "")
		}, "GET", "/a", "", ErrSignatureStale},
		{"future", func() (string, string) { return sign(priv, now.Add(SignatureWindow+time.Millisecond), "GET", "/a", "") }, "GET", "/a", "", ErrSignatureStale},
		{"body changed", good, "POST", "/api/v1/order?x=1", strings.Replace(exampleBody, "40", "41", 1), ErrSignatureWrong},
		{"body added", func() (string, string) { return sign(priv, now, "POST", "/a", "") }, "POST", "/a", "{}", ErrSignatureWrong},
		{"query changed", good, "POST", "/api/v1/order?x=2", exampleBody, ErrSignatureWrong},
		{"query dropped", good, "POST", "/api/v1/order", exampleBody, ErrSignatureWrong},
		{"query re-encoded", func() (string, string) { return sign(priv, now, "GET", "/a?q=a%20b", "") }, "GET", "/a?q=a+b", "", ErrSignatureWrong},
		{"path changed", good, "POST", "/api/v1/orders?x=1", exampleBody, ErrSignatureWrong},
		{"method changed", good, "PUT", "/api/v1/order?x=1", exampleBody, ErrSignatureWrong},
		{"wrong key", func() (string, string) { return sign(other, now, "POST", "/api/v1/order?x=1", exampleBody) }, "POST", "/api/v1/order?x=1", exampleBody, ErrSignatureWrong},
		{"timestamp changed", func() (string, string) {
			ts, sig := good()
			n, _ := strconv.ParseInt(ts, 10, 64)
			return strconv.FormatInt(n+1, 10), sig
		}, "POST", "/api/v1/order?x=1", exampleBody, ErrSignatureWrong},
		{"stale and forged", func() (string, string) { return sign(other, now.Add(-time.Hour), "GET", "/a", "") }, "GET", "/a", "", ErrSignatureWrong},
		{"no signature", func() (string, string) { ts, _ := good(); return ts, "" }, "POST", "/api/v1/order?x=1", exampleBody, ErrSignatureMissing},
		{"no timestamp", func() (string, string) { _, sig := good(); return "", sig }, "POST", "/api/v1/order?x=1", exampleBody, ErrSignatureMissing},
		{"timestamp in seconds text", func() (string, string) { _, sig := good(); return "1767225600.000", sig }, "POST", "/api/v1/order?x=1", exampleBody, ErrSignatureMalformed},
		{"signed timestamp", func() (string, string) { ts, sig := good(); return "+" + ts, sig }, "POST", "/api/v1/order?x=1", exampleBody, ErrSignatureMalformed},
		{"timestamp too long", func() (string, string) { _, sig := good(); return "00000001767225600000", sig }, "POST", "/api/v1/order?x=1", exampleBody, ErrSignatureMalformed},
		{"timestamp out of range", func() (string, string) { _, sig := good(); return "9999999999999999", sig }, "POST", "/api/v1/order?x=1", exampleBody, ErrSignatureWrong},
		{"signature unpadded", func() (string, string) { ts, sig := good(); return ts, strings.TrimRight(sig, "=") }, "POST", "/api/v1/order?x=1", exampleBody, ErrSignatureMalformed},
		{"signature url-safe", func() (string, string) {
			return "1", base64.URLEncoding.EncodeToString(make([]byte, 62)) + "_-__"
		}, "GET", "/a", "", ErrSignatureMalformed},
		{"signature short", func() (string, string) {
			ts, _ := good()
			return ts, base64.StdEncoding.EncodeToString(make([]byte, 63))
		}, "POST", "/a", "", ErrSignatureMalformed},
		{"signature in hex", func() (string, string) { ts, _ := good(); return ts, strings.Repeat("ab", 64) }, "POST", "/a", "", ErrSignatureMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts, sig := tc.headers()
			msg, err := VerifyRequest(pub, ts, sig, tc.method, tc.target, []byte(tc.body), now)
			if tc.want == nil {
				if err != nil || string(msg) != string(SignedMessage(ts, tc.method, tc.target, []byte(tc.body))) {
					t.Fatalf("refused (%v) or verified another message: %q", err, msg)
				}
				return
			}
			var se *SignatureError
			if !errors.Is(err, tc.want) || !errors.As(err, &se) || se.Message == "" || msg != nil {
				t.Fatalf("got %v (%q), want %v", err, msg, tc.want)
			}
		})
	}
}

func TestParsePublicKey(t *testing.T) {
	pub := exampleKey().Public().(ed25519.PublicKey)
	for _, text := range []string{examplePublicKey, " " + examplePublicKey + "\n", examplePEM} {
		got, err := ParsePublicKey(text)
		if err != nil || !got.Equal(pub) {
			t.Errorf("%q: read %x (%v), want %x", text, got, err, pub)
		}
	}
	ecdsaPEM := "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEDmBtHdZWPCCtY3uozgTGOfX0wFjq\nsWEuFNjHCqpwIuvYmSZ7yWbjANI5BwMiJe6hpRcbc51WTBQGgeg3patnSA==\n-----END PUBLIC KEY-----\n"
	for _, text := range []string{"", "TQ4mJ/zK8sowTT0QsToI5+29PhsclIQW4Y8WSdDehv=", strings.TrimRight(examplePublicKey, "="),
		base64.StdEncoding.EncodeToString(make([]byte, 33)), "-----BEGIN PUBLIC KEY-----\nnot base64\n-----END PUBLIC KEY-----\n",
		examplePEM + examplePEM, strings.Replace(examplePEM, "PUBLIC KEY", "PRIVATE KEY", 2), ecdsaPEM} {
		if got, err := ParsePublicKey(text); err == nil {
			t.Errorf("%q: read as %x, want a refusal", text, got)
		} else if text == ecdsaPEM && !strings.Contains(err.Error(), "not Ed25519") {
			t.Errorf("an ECDSA key is refused for %v, want for not being Ed25519", err)
		}
	}
}
