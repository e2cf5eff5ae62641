package auth

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/argon2"
)

func TestHashPassword(t *testing.T) {
	h := HashPassword("correct horse battery staple")
	phc := regexp.MustCompile(`^\$argon2id\$v=19\$m=65536,t=3,p=4\$[A-Za-z0-9+/]{22}\$[A-Za-z0-9+/]{43}$`)
	if !phc.MatchString(h) {
		t.Fatalf("hash %q is not a PHC argon2id string with the chosen parameters", h)
	}
	if h2 := HashPassword("correct horse battery staple"); h2 == h {
		t.Fatal("two hashes of one password are equal: the salt is not random")
	}
	for _, tc := range []struct {
		password string
		want     bool
	}{
		{"correct horse battery staple", true},
		{"correct horse battery stapl", false},
		{"Correct horse battery staple", false},
		{"", false},
	} {
		ok, err := CheckPassword(tc.password, h)
		if err != nil || ok != tc.want {
			t.Errorf("CheckPassword(%q) = %v, %v; want %v", tc.password, ok, err, tc.want)
		}
	}
}

// TestCheckPasswordUsesStoredParams checks that a hash written with other parameters (OWASP's
// m=19 MiB, t=2, p=1) still verifies: the parameters come from the hash, not the constants, so they
// can be raised without invalidating stored passwords.
func TestCheckPasswordUsesStoredParams(t *testing.T) {
	salt := []byte("somesaltsomesalt")
	key := argon2.IDKey([]byte("password"), salt, 2, 19456, 1, 32)
	h := "$argon2id$v=19$m=19456,t=2,p=1$" + b64.EncodeToString(salt) + "$" + b64.EncodeToString(key)
	if ok, err := CheckPassword("password", h); !ok || err != nil {
		t.Fatalf("CheckPassword = %v, %v; want true", ok, err)
	}
	if ok, err := CheckPassword("passwore", h); ok || err != nil {
		t.Fatalf("a wrong password: CheckPassword = %v, %v; want false", ok, err)
	}
}

func TestCheckPasswordMalformed(t *testing.T) {
	good := HashPassword("correct horse battery staple")
	parts := strings.Split(good, "$")
	for name, h := range map[string]string{
		"empty":         "",
		"bcrypt":        "$2a$10$N9qo8uLOickgx2ZMRZoMyeIjZAgcfl7p92ldGxad68LJZdL17lhWy",
		"argon2i":       strings.Replace(good, "argon2id", "argon2i", 1),
		"old version":   strings.Replace(good, "v=19", "v=16", 1),
		"no params":     strings.Join([]string{"", parts[1], parts[2], "", parts[4], parts[5]}, "$"),
		"trailing text": strings.Replace(good, "p=4", "p=4x", 1),
		"signed":        strings.Replace(good, "t=3", "t=+3", 1),
		"huge memory":   strings.Replace(good, "m=65536", "m=4194304", 1),
		"zero time":     strings.Replace(good, "t=3", "t=0", 1),
		"bad salt":      strings.Join([]string{"", parts[1], parts[2], parts[3], "!!", parts[5]}, "$"),
		"short key":     strings.Join([]string{"", parts[1], parts[2], parts[3], parts[4], "AAAA"}, "$"),
		"extra part":    good + "$x",
	} {
		if ok, err := CheckPassword("correct horse battery staple", h); ok || !errors.Is(err, ErrMalformedHash) {
			t.Errorf("%s: CheckPassword = %v, %v; want ErrMalformedHash", name, ok, err)
		}
	}
}

func TestPasswordProblem(t *testing.T) {
	for _, tc := range []struct {
		password string
		problem  string // a fragment of the message, "" for none
	}{
		{"", "Choose a password"},
		{"short", "too short"},
		{"123456789", "too short"},
		{"ünïcødé-ok", ""}, // 10 characters, more bytes
		{"0123456789", ""},
		{strings.Repeat("x", MaxPasswordLen), ""},
		{strings.Repeat("x", MaxPasswordLen+1), "too long"},
		{"bad\xffutf8 text", "not valid text"},
	} {
		got := PasswordProblem(tc.password)
		if (tc.problem == "") != (got == "") || !strings.Contains(got, tc.problem) {
			t.Errorf("PasswordProblem(%q) = %q, want a message containing %q", tc.password, got, tc.problem)
		}
	}
}

// TestCheckNoPassword checks that a sign-in without a hash to check costs what one with a hash
// does: the dummy hash is well formed with today's parameters (a malformed one would make
// CheckPassword return at once), and CheckNoPassword does spend about one hash's time.
func TestCheckNoPassword(t *testing.T) {
	stored := HashPassword("correct horse battery staple")
	want, err := parseHash(stored)
	if err != nil {
		t.Fatal(err)
	}
	got, err := parseHash(dummyHash())
	if err != nil {
		t.Fatalf("the dummy hash %q does not parse: %v", dummyHash(), err)
	}
	if got.time != want.time || got.memory != want.memory || got.threads != want.threads || len(got.key) != len(want.key) {
		t.Fatalf("the dummy hash costs m=%d,t=%d,p=%d (%d-byte key), a real one m=%d,t=%d,p=%d (%d-byte key)",
			got.memory, got.time, got.threads, len(got.key), want.memory, want.time, want.threads, len(want.key))
	}
	if ok, err := CheckPassword("anything", dummyHash()); ok || err != nil {
		t.Fatalf("CheckPassword against the dummy hash = %v, %v; want false, nil", ok, err)
	}

	// dummyHash is computed by now, so what CheckNoPassword spends is the check alone. A skipped
	// check takes microseconds and one hash tens of milliseconds: a quarter leaves room for noise.
	realTook := time.Duration(1<<63 - 1)
	for range 2 {
		start := time.Now()
		if ok, err := CheckPassword("wrong password", stored); ok || err != nil {
			t.Fatalf("CheckPassword = %v, %v", ok, err)
		}
		realTook = min(realTook, time.Since(start))
	}
	start := time.Now()
	CheckNoPassword("anything")
	if took := time.Since(start); took < realTook/4 {
		t.Errorf("CheckNoPassword took %v, a real check %v: it does not spend a hash's time", took, realTook)
	}
}
