package pgcluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
)

// ErrBinariesNotFound is wrapped by FindBinaries when no usable PostgreSQL installation exists.
var ErrBinariesNotFound = errors.New("PostgreSQL server binaries not found")

// requiredBinaries are the programs this package executes. The client tools (psql, createdb, dropdb)
// are required too because every distribution ships them next to the server, and finding out at
// CreateDatabase time that they are missing would be a worse error than failing up front.
var requiredBinaries = []string{"initdb", "postgres", "psql", "createdb", "dropdb"}

// defaultSearchGlobs are where distributions put server binaries that are not on PATH. The "*" is
// the major version, so the highest one can be preferred.
var defaultSearchGlobs = []string{
	"/usr/lib/postgresql/*/bin", // Debian, Ubuntu
	"/usr/pgsql-*/bin",          // RHEL/Fedora PGDG packages
	"/usr/local/pgsql/bin",      // source builds
}

// FindBinaries returns the directory holding the PostgreSQL server programs (initdb, postgres) and
// the client tools this package uses (psql, createdb, dropdb). It looks on PATH first, then in the
// versioned distribution directories (/usr/lib/postgresql/*/bin, /usr/pgsql-*/bin), highest major
// version first, then /usr/local/pgsql/bin. The error, which wraps ErrBinariesNotFound, says what
// to install.
func FindBinaries() (string, error) {
	return findBinaries(os.Getenv("PATH"), defaultSearchGlobs, "")
}

type binCandidate struct {
	dir     string
	version []int // major version parsed from the directory name; nil when unknown
}

// findBinaries is FindBinaries with its inputs injectable for tests. preferVersion (the content of
// an existing cluster's PG_VERSION, e.g. "15") picks the matching installation when several are
// present, because a data directory can only be served by the major version that created it.
func findBinaries(pathEnv string, globs []string, preferVersion string) (string, error) {
	var candidates []binCandidate
	for _, dir := range filepath.SplitList(pathEnv) {
		if dir == "" {
			continue
		}
		if hasBinaries(dir) {
			candidates = append(candidates, binCandidate{dir: dir})
		}
	}

	var versioned, unversioned []binCandidate
	for _, pattern := range globs {
		matches, _ := filepath.Glob(pattern) // the only possible error is a malformed pattern
		for _, dir := range matches {
			if !hasBinaries(dir) {
				continue
			}
			if v := versionFromPath(pattern, dir); v != nil {
				versioned = append(versioned, binCandidate{dir: dir, version: v})
			} else {
				unversioned = append(unversioned, binCandidate{dir: dir})
			}
		}
	}
	slices.SortStableFunc(versioned, func(a, b binCandidate) int {
		return slices.Compare(b.version, a.version) // highest first
	})
	candidates = append(candidates, versioned...)
	candidates = append(candidates, unversioned...)

	if len(candidates) == 0 {
		return "", fmt.Errorf("%w (looked on PATH and in %s); install them with: %s",
			ErrBinariesNotFound, strings.Join(globs, ", "), installHint())
	}
	if want := parseVersion(preferVersion); want != nil {
		for _, c := range candidates {
			if slices.Equal(c.version, want) {
				return c.dir, nil
			}
		}
	}
	return candidates[0].dir, nil
}

func installHint() string {
	switch runtime.GOOS {
	case "darwin":
		return "brew install postgresql@15"
	default:
		return "sudo apt-get install -y postgresql"
	}
}

func hasBinaries(dir string) bool {
	for _, name := range requiredBinaries {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
			return false
		}
	}
	return true
}

// versionFromPath extracts what the "*" of pattern matched in dir and parses it as a version.
func versionFromPath(pattern, dir string) []int {
	prefix, suffix, ok := strings.Cut(pattern, "*")
	if !ok || !strings.HasPrefix(dir, prefix) || !strings.HasSuffix(dir, suffix) ||
		len(dir) < len(prefix)+len(suffix) {
		return nil
	}
	return parseVersion(dir[len(prefix) : len(dir)-len(suffix)])
}

// parseVersion parses "15" or "9.6" into comparable parts; nil if it is not a version.
func parseVersion(s string) []int {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil
	}
	var v []int
	for part := range strings.SplitSeq(s, ".") {
		n, err := strconv.Atoi(part)
		if err != nil || n < 0 {
			return nil
		}
		v = append(v, n)
	}
	return v
}

// lookBin returns the absolute path of a program in binDir, or an error naming what is missing.
func lookBin(binDir, name string) (string, error) {
	p := filepath.Join(binDir, name)
	if _, err := exec.LookPath(p); err != nil {
		return "", fmt.Errorf("%s not found in %s: %w", name, binDir, err)
	}
	return p, nil
}
