package auth

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Tokens as long as MinAdminTokenLen requires.
const (
	fromFlag = "from-flag-0123456789abcdef0123456789"
	fromEnv  = "from-env-0123456789abcdef0123456789"
	fromFile = "from-file-0123456789abcdef0123456789"
)

func TestFindAdminToken(t *testing.T) {
	withFile, blankFile, noFile := t.TempDir(), t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(withFile, AdminTokenFile), []byte(" "+fromFile+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(blankFile, AdminTokenFile), []byte(" \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == AdminTokenEnv {
				return v
			}
			return "wrong variable"
		}
	}
	for _, c := range []struct {
		name, flag string
		getenv     func(string) string
		dir        string
		want       string // the token, or with wantErr a substring of the error
		source     string
		wantErr    bool
	}{
		{name: "flag first", flag: " " + fromFlag + " ", getenv: env(fromEnv), dir: withFile, want: fromFlag, source: "from --admin-token"},
		{name: "then the environment", getenv: env(" " + fromEnv + "\n"), dir: withFile, want: fromEnv, source: "from $PMX_ADMIN_TOKEN"},
		{name: "then the file", getenv: env(""), dir: withFile, want: fromFile, source: "in " + filepath.Join(withFile, AdminTokenFile)},
		{name: "blank values do not count", flag: "  ", getenv: env(" "), dir: withFile, want: fromFile, source: "in " + filepath.Join(withFile, AdminTokenFile)},
		{name: "no getenv", dir: withFile, want: fromFile, source: "in " + filepath.Join(withFile, AdminTokenFile)},
		{name: "no file", getenv: env(""), dir: noFile, want: "does not exist", wantErr: true},
		{name: "blank file", getenv: env(""), dir: blankFile, want: "is empty", wantErr: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			tok, src, err := FindAdminToken(c.flag, c.getenv, c.dir)
			if !c.wantErr {
				if err != nil || tok != c.want || src != c.source {
					t.Errorf("got %q %q (%v), want %q %q", tok, src, err, c.want, c.source)
				}
				return
			}
			if !errors.Is(err, ErrNoAdminToken) || tok != "" || src != "" {
				t.Fatalf("got %q %q (%v), want an ErrNoAdminToken", tok, src, err)
			}
			// The error tells the user every way to pass a token, and why the file did not do.
			for _, part := range []string{"--admin-token", AdminTokenEnv, filepath.Join(c.dir, AdminTokenFile), c.want} {
				if !strings.Contains(err.Error(), part) {
					t.Errorf("error %q does not name %q", err, part)
				}
			}
		})
	}
}

func TestFindAdminTokenUnreadableFile(t *testing.T) {
	dir := t.TempDir()
	// A directory where the file should be: reading it fails, and not because it is missing.
	if err := os.Mkdir(filepath.Join(dir, AdminTokenFile), 0o700); err != nil {
		t.Fatal(err)
	}
	_, _, err := FindAdminToken("", nil, dir)
	if err == nil || errors.Is(err, ErrNoAdminToken) {
		t.Fatalf("got %v, want a read error that is not ErrNoAdminToken (pmx dev would overwrite the file)", err)
	}
}

// TestShortAdminTokenRefused checks that a token shorter than MinAdminTokenLen is refused wherever
// it comes from, with an error that says where it is and how to make a good one; and that the
// tokens pmx dev generates are long enough.
func TestShortAdminTokenRefused(t *testing.T) {
	short := strings.Repeat("x", MinAdminTokenLen-1)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, AdminTokenFile), []byte(short+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := func(string) string { return short }
	for _, c := range []struct {
		name, flag string
		getenv     func(string) string
		source     string
	}{
		{"flag", short, nil, "from --admin-token"},
		{"environment", "", env, "from $" + AdminTokenEnv},
		{"file", "", nil, "in " + filepath.Join(dir, AdminTokenFile)},
	} {
		tok, src, err := FindAdminToken(c.flag, c.getenv, dir)
		if !errors.Is(err, ErrShortAdminToken) || tok != "" || src != "" {
			t.Errorf("%s: got %q %q (%v), want ErrShortAdminToken", c.name, tok, src, err)
			continue
		}
		for _, part := range []string{c.source, "31 characters", "at least 32", "openssl rand -hex 32"} {
			if !strings.Contains(err.Error(), part) {
				t.Errorf("%s: error %q does not say %q", c.name, err, part)
			}
		}
	}
	if err := CheckAdminToken(short+"x", "from somewhere"); err != nil {
		t.Errorf("a token of %d characters: %v", MinAdminTokenLen, err)
	}
	if err := CheckAdminToken("", "from somewhere"); err != nil {
		t.Errorf("no token (the admin API off): %v", err)
	}
	for range 100 {
		if tok := NewToken(); CheckAdminToken(tok, "generated") != nil {
			t.Fatalf("NewToken made %q, shorter than %d characters", tok, MinAdminTokenLen)
		}
	}
}
