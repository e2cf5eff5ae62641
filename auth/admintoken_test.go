package auth

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFindAdminToken(t *testing.T) {
	withFile, blankFile, noFile := t.TempDir(), t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(withFile, AdminTokenFile), []byte(" from-file\n"), 0o600); err != nil {
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
		{name: "flag first", flag: " from-flag ", getenv: env("from-env"), dir: withFile, want: "from-flag", source: "from --admin-token"},
		{name: "then the environment", getenv: env(" from-env\n"), dir: withFile, want: "from-env", source: "from $PMX_ADMIN_TOKEN"},
		{name: "then the file", getenv: env(""), dir: withFile, want: "from-file", source: "in " + filepath.Join(withFile, AdminTokenFile)},
		{name: "blank values do not count", flag: "  ", getenv: env(" "), dir: withFile, want: "from-file", source: "in " + filepath.Join(withFile, AdminTokenFile)},
		{name: "no getenv", dir: withFile, want: "from-file", source: "in " + filepath.Join(withFile, AdminTokenFile)},
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
