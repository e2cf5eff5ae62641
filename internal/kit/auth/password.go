package auth

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"golang.org/x/crypto/argon2"
)

// Passwords are hashed with argon2id at the parameters of RFC 9106 §4's second recommended option,
// the one for machines that cannot spend 2 GiB per hash: 3 passes over 64 MiB with 4 lanes. A
// guess then costs an attacker 64 MiB of memory for three passes, which is what makes argon2id
// expensive on GPUs and ASICs, while a sign-in costs the server about 80 ms on two cores (the lanes
// run in parallel). The parameters are stored in each hash, so they can be raised later without
// invalidating existing passwords.
const (
	argonTime    = 3
	argonMemory  = 64 * 1024 // KiB
	argonThreads = 4
	argonKeyLen  = 32
	argonSaltLen = 16
)

// Password lengths. The minimum follows NIST SP 800-63B's advice to prefer length over composition
// rules; the maximum only bounds the work a request can ask for.
const (
	MinPasswordLen = 10  // characters
	MaxPasswordLen = 256 // bytes
)

// Limits on the parameters of a stored hash, so that a corrupt or hostile hash cannot make
// CheckPassword allocate gigabytes or spin for minutes.
const (
	maxArgonMemory  = 1024 * 1024 // KiB: 1 GiB
	maxArgonTime    = 16
	maxArgonThreads = 16
)

// ErrMalformedHash is returned for a stored hash that is not an argon2id hash this package wrote.
var ErrMalformedHash = errors.New("auth: malformed password hash")

// b64 is the PHC string format's base64: standard alphabet, no padding.
var b64 = base64.RawStdEncoding

// HashPassword hashes a password with argon2id and a fresh random salt, and returns it in the PHC
// string format: $argon2id$v=19$m=65536,t=3,p=4$<salt>$<hash>.
func HashPassword(password string) string {
	salt := make([]byte, argonSaltLen)
	if _, err := rand.Read(salt); err != nil {
		panic("auth: no randomness: " + err.Error())
	}
	key := argon2.IDKey([]byte(password), salt, argonTime, argonMemory, argonThreads, argonKeyLen)
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, argonMemory, argonTime,
		argonThreads, b64.EncodeToString(salt), b64.EncodeToString(key))
}

// CheckPassword reports whether password matches an encoded hash from HashPassword, comparing in
// constant time with the parameters and salt stored in the hash.
func CheckPassword(password, encoded string) (bool, error) {
	p, err := parseHash(encoded)
	if err != nil {
		return false, err
	}
	key := argon2.IDKey([]byte(password), p.salt, p.time, p.memory, p.threads, uint32(len(p.key)))
	return subtle.ConstantTimeCompare(key, p.key) == 1, nil
}

// dummyHash is checked against when there is no real hash to check (an unknown account, or one
// without a password), so that such a sign-in takes as long as a real one and does not tell an
// observer which names exist.
var dummyHash = sync.OnceValue(func() string { return HashPassword("pmx: no such account") })

// CheckNoPassword spends the time CheckPassword would, and reports false.
func CheckNoPassword(password string) {
	_, _ = CheckPassword(password, dummyHash())
}

// PasswordProblem says what is wrong with a new password, or "" when it is acceptable.
func PasswordProblem(password string) string {
	switch {
	case password == "":
		return "Choose a password."
	case !utf8.ValidString(password):
		return "The password is not valid text."
	case utf8.RuneCountInString(password) < MinPasswordLen:
		return fmt.Sprintf("The password is too short: use at least %d characters (a few words make a good one).", MinPasswordLen)
	case len(password) > MaxPasswordLen:
		return fmt.Sprintf("The password is too long: use at most %d bytes.", MaxPasswordLen)
	}
	return ""
}

type argonParams struct {
	time, memory uint32
	threads      uint8
	salt, key    []byte
}

func parseHash(encoded string) (argonParams, error) {
	var p argonParams
	// "", "argon2id", "v=19", "m=...,t=...,p=...", salt, key
	parts := strings.Split(encoded, "$")
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" {
		return p, ErrMalformedHash
	}
	var version int
	if _, err := fmt.Sscanf(parts[2], "v=%d", &version); err != nil || version != argon2.Version ||
		parts[2] != fmt.Sprintf("v=%d", version) {
		return p, ErrMalformedHash
	}
	var m, t, threads uint32
	// Sscanf tolerates signs and trailing text; printing the numbers back must give the same text.
	if n, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &m, &t, &threads); err != nil || n != 3 ||
		parts[3] != fmt.Sprintf("m=%d,t=%d,p=%d", m, t, threads) {
		return p, ErrMalformedHash
	}
	if t < 1 || t > maxArgonTime || threads < 1 || threads > maxArgonThreads || m < 8*threads || m > maxArgonMemory {
		return p, ErrMalformedHash
	}
	salt, err := b64.DecodeString(parts[4])
	if err != nil || len(salt) < 8 {
		return p, ErrMalformedHash
	}
	key, err := b64.DecodeString(parts[5])
	if err != nil || len(key) < 16 || len(key) > 64 {
		return p, ErrMalformedHash
	}
	return argonParams{time: t, memory: m, threads: uint8(threads), salt: salt, key: key}, nil
}
