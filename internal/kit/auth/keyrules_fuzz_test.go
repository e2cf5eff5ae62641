package auth

import (
	"crypto/ed25519"
	"encoding/base64"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FuzzParseAllowlist feeds the allowlist parser what a settings form or an admin body may hold:
// it never panics, and what it accepts is canonical (masked, IPv4 as IPv4), admits its own
// ranges' addresses, and reads back as itself from its own listing.
func FuzzParseAllowlist(f *testing.F) {
	for _, s := range []string{"203.0.113.0/24", "2001:db8::/48", "::ffff:203.0.113.0/120", "10.0.0.1/8", "fe80::1%eth0",
		"0.0.0.0/0,::/0", "1.2.3.4", "", "::ffff:1.2.3.4", "1.2.3.4/33"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		list, err := ParseAllowlist(strings.Split(in, ","))
		if err != nil {
			return
		}
		for _, p := range list {
			if p.Masked() != p || p.Addr().Is4In6() || p.Addr().Zone() != "" {
				t.Fatalf("%q: accepted %v, which is not canonical", in, p)
			}
			if !Allowed(list, p.Addr()) {
				t.Fatalf("%q: %v is not allowed by its own range", in, p.Addr())
			}
		}
		again, err := ParseAllowlist(FormatAllowlist(list))
		if err != nil || !slices.Equal(again, list) {
			t.Fatalf("%q: the listing %v reads back as %v (%v)", in, FormatAllowlist(list), again, err)
		}
	})
}

// FuzzSignatureHeaders feeds the signature headers' parser and the verifier what a client may
// send: they never panic; a timestamp accepted is digits that read back as themselves; a
// signature accepted is 64 bytes that encode back to the header; and nothing but the one true
// signature of the request verifies.
func FuzzSignatureHeaders(f *testing.F) {
	priv := exampleKey()
	ts, sig := SignRequest(priv, time.UnixMilli(1767225600000), "GET", "/a?b=c", nil)
	f.Add(ts, sig)
	f.Add("", sig)
	f.Add(ts, "")
	f.Add("+1", sig)
	f.Add("1767225600000 ", sig)
	f.Add("99999999999999999999", sig)
	f.Add(ts, strings.TrimRight(sig, "="))
	f.Add(ts, sig+"\n")
	f.Fuzz(func(t *testing.T, timestamp, signature string) {
		ms, raw, err := ParseSignatureHeaders(timestamp, signature)
		if err == nil {
			if strconv.FormatInt(ms, 10) != strings.TrimLeft(timestamp, "0") && !(ms == 0 && strings.Trim(timestamp, "0") == "") {
				t.Fatalf("timestamp %q read as %d", timestamp, ms)
			}
			if len(raw) != ed25519.SignatureSize || base64.StdEncoding.EncodeToString(raw) != signature {
				t.Fatalf("signature %q read as %x", signature, raw)
			}
		}
		msg, err := VerifyRequest(priv.Public().(ed25519.PublicKey), timestamp, signature, "GET", "/a?b=c", nil, time.UnixMilli(1767225600000))
		if (err == nil) != (timestamp == ts && signature == sig) {
			t.Fatalf("%q %q: verified %q (%v)", timestamp, signature, msg, err)
		}
	})
}
