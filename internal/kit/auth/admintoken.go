package auth

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Where pmx dev, pmxtools loadgen and pmxtools bench look for the admin token, after the --admin-token flag.
const (
	// AdminTokenEnv is the environment variable that holds the admin token.
	AdminTokenEnv = "PMX_ADMIN_TOKEN"
	// AdminTokenFile is the name of the file, inside the data directory, that holds the admin
	// token; pmx dev writes a fresh one there when it finds none.
	AdminTokenFile = "admin-token"
)

// MinAdminTokenLen is the shortest admin token pmx accepts: the admin API creates accounts and
// markets and settles them, and its token is its only guard, so it must be a secret no one could
// guess, however often they try (NewToken's are 32 characters of 6 random bits each).
const MinAdminTokenLen = 32

// ErrShortAdminToken means an admin token is shorter than MinAdminTokenLen.
var ErrShortAdminToken = errors.New("the admin token is too short")

// CheckAdminToken refuses an admin token shorter than MinAdminTokenLen; source says where it came
// from, as FindAdminToken's does ("from --admin-token"). An empty token is not checked: where it
// is allowed it disables the admin API.
func CheckAdminToken(token, source string) error {
	if token == "" || len(token) >= MinAdminTokenLen {
		return nil
	}
	return fmt.Errorf("%w: the token %s has %d characters and must have at least %d; make one with: openssl rand -hex 32",
		ErrShortAdminToken, source, len(token), MinAdminTokenLen)
}

// ErrNoAdminToken means that none of the three places FindAdminToken looks holds a token: the file
// is missing or blank. Any other failure to read the file is a different error.
var ErrNoAdminToken = errors.New("no admin token")

// FindAdminToken finds the admin token: flagValue if set, else $PMX_ADMIN_TOKEN (looked up through
// getenv, which may be nil), else the file AdminTokenFile in dataDir; values are trimmed and blank
// ones do not count. source says where the token came from, as a phrase to follow "token":
// "from --admin-token", "from $PMX_ADMIN_TOKEN" or "in <path>". When there is none the error wraps
// ErrNoAdminToken and names all three places; a token found shorter than MinAdminTokenLen is an
// error (CheckAdminToken) too.
func FindAdminToken(flagValue string, getenv func(string) string, dataDir string) (token, source string, err error) {
	token, source, err = findAdminToken(flagValue, getenv, dataDir)
	if err == nil {
		err = CheckAdminToken(token, source)
	}
	if err != nil {
		return "", "", err
	}
	return token, source, nil
}

func findAdminToken(flagValue string, getenv func(string) string, dataDir string) (token, source string, err error) {
	if t := strings.TrimSpace(flagValue); t != "" {
		return t, "from --admin-token", nil
	}
	if getenv != nil {
		if t := strings.TrimSpace(getenv(AdminTokenEnv)); t != "" {
			return t, "from $" + AdminTokenEnv, nil
		}
	}
	path := filepath.Join(dataDir, AdminTokenFile)
	b, err := os.ReadFile(path)
	var why string
	switch {
	case err == nil:
		if t := strings.TrimSpace(string(b)); t != "" {
			return t, "in " + path, nil
		}
		why = path + " is empty"
	case errors.Is(err, fs.ErrNotExist):
		why = path + " does not exist"
	default:
		return "", "", fmt.Errorf("while reading the admin token: %w", err)
	}
	return "", "", fmt.Errorf("%w: pass --admin-token, set %s, or put the token in %s (pmx dev writes it there) (%s)",
		ErrNoAdminToken, AdminTokenEnv, path, why)
}
