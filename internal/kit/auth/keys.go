// Package auth owns credentials: API keys (generated, stored only as hashes, checked in constant
// time) and the admin token.
package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"strings"
)

// An API key reads pmx_<16 hex digits>_<32 base64url characters>. The first part, the prefix,
// names the key publicly (listings, lookups); the whole key is the secret.
const (
	keyScheme   = "pmx_"
	prefixLen   = len(keyScheme) + 16
	secretLen   = 32
	keyLen      = prefixLen + 1 + secretLen
	prefixBytes = 8
	secretBytes = 24
)

// NewKey generates an API key and returns it with its prefix and the hash to store.
func NewKey() (key, prefix string, hash []byte) {
	var b [prefixBytes + secretBytes]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("auth: no randomness: " + err.Error()) // crypto/rand never fails on Linux
	}
	prefix = keyScheme + hex.EncodeToString(b[:prefixBytes])
	key = prefix + "_" + base64.RawURLEncoding.EncodeToString(b[prefixBytes:])
	return key, prefix, HashKey(key)
}

// HashKey is the SHA-256 of a key. Keys carry 192 random bits, so a fast hash is the right one:
// there is nothing for a slow hash to protect against guessing.
func HashKey(key string) []byte {
	h := sha256.Sum256([]byte(key))
	return h[:]
}

// ParseKey checks a key's shape and returns its prefix.
func ParseKey(key string) (prefix string, ok bool) {
	if len(key) != keyLen || !strings.HasPrefix(key, keyScheme) || key[prefixLen] != '_' {
		return "", false
	}
	for i := len(keyScheme); i < prefixLen; i++ {
		if c := key[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return "", false
		}
	}
	for i := prefixLen + 1; i < keyLen; i++ {
		if c := key[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '-' || c == '_') {
			return "", false
		}
	}
	return key[:prefixLen], true
}

// KeyMatches compares a presented key with a stored hash in constant time.
func KeyMatches(key string, hash []byte) bool {
	return subtle.ConstantTimeCompare(HashKey(key), hash) == 1
}

// TokenMatches compares a presented admin token with the configured one in constant time.
func TokenMatches(presented, want string) bool {
	a, b := sha256.Sum256([]byte(presented)), sha256.Sum256([]byte(want))
	return want != "" && subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// NewToken generates a random admin token.
func NewToken() string {
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("auth: no randomness: " + err.Error())
	}
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// ParsePrefix checks a key's public prefix alone (pmx_ and 16 lower-case hex digits), as a
// signing key sends it instead of the whole key (Authorization: PMX-Ed25519 <prefix>).
func ParsePrefix(prefix string) (string, bool) {
	if len(prefix) != prefixLen || !strings.HasPrefix(prefix, keyScheme) {
		return "", false
	}
	for i := len(keyScheme); i < prefixLen; i++ {
		if c := prefix[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return "", false
		}
	}
	return prefix, true
}
