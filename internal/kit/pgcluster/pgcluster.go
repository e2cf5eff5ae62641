// Package pgcluster runs a private PostgreSQL cluster owned by the calling Go process: it creates
// the cluster on first use (initdb), starts the server, waits until it accepts connections, creates
// the application database and stops the server again. `pmx dev` uses it for its default database
// (data kept under --data-dir between runs) and integration tests use it, through package pgtest,
// for throwaway clusters.
//
// # Layout
//
// Everything lives under Options.DataDir:
//
//	DataDir/pgdata          the PostgreSQL data directory (PGDATA)
//	DataDir/postgres.log    server and initdb output, appended across runs
//	DataDir/run/            the unix socket directory (unless the path is too long, see below)
//	DataDir/pgcluster.lock  flock held while a Cluster is running, to refuse a second user
//
// # Connections
//
// The server listens only on a unix socket, never on TCP (listen_addresses is empty). That needs no
// free-port search, so it cannot race with other processes for a port and any number of clusters
// (parallel test binaries) coexist, each with the default port 5432 in its own socket directory.
// Authentication is "trust" for local socket connections only; that is safe because the socket
// directory is mode 0700, reachable only by the server's OS user and root. The cluster superuser is
// always "postgres", whichever OS user runs the server. See Cluster.URL for the connection string.
//
// A unix socket path is limited to 107 bytes, so when DataDir/run/.s.PGSQL.5432 would be longer the
// socket goes into a fresh short directory under the temp dir (e.g. /tmp/pmxpg-123456), removed by
// Stop; the URL always names the right one.
//
// # Running as root
//
// initdb and postgres refuse to run as root, and CI runs tests as root. When the effective uid is 0
// they are run as an unprivileged user through SysProcAttr.Credential: Options.RunAsUser if set,
// else the owner of an existing data directory, else "postgres" if that user exists, else "nobody".
// The data and socket directories are chowned to that user. The user must also be able to traverse
// every directory above DataDir: Start adds the search (x) bit for others to DataDir itself, which
// it owns, but reports an error instead of touching permissions of directories above it (such as
// the 0700 directories of t.TempDir); package pgtest therefore creates its clusters under os.TempDir.
//
// # Process lifetime
//
// postgres is started directly as a child process (not daemonised through pg_ctl), in its own
// process group so that a Ctrl-C on the terminal reaches only pmx, which then shuts the database
// down after its own shutdown through Stop. On Linux the child carries a parent-death signal of
// SIGINT (PostgreSQL's "fast" shutdown: roll back open transactions, checkpoint, exit), so the
// server never outlives the Go process, even when that is killed with SIGKILL or by a test timeout.
// Stop sends the same SIGINT (what `pg_ctl stop -m fast` sends) and waits for the process to exit.
//
// Only Unix systems are supported.
package pgcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	// superuser is the cluster's bootstrap superuser, fixed so URLs do not depend on which OS user
	// created the cluster.
	superuser = "postgres"
	// port only names the socket file (.s.PGSQL.5432); nothing listens on TCP.
	port = 5432
	// maxSocketPath is sizeof(sockaddr_un.sun_path) minus the terminating NUL on Linux.
	maxSocketPath = 107
	// logRotateSize bounds postgres.log: beyond it, Start moves it to postgres.log.old.
	logRotateSize = 16 << 20
)

// ErrAlreadyRunning is wrapped by Start when the cluster under DataDir is already in use.
var ErrAlreadyRunning = errors.New("postgres cluster already running")

// Options configures Start.
type Options struct {
	// DataDir holds the cluster (see the package documentation for its layout); created if missing.
	DataDir string
	// Database is created if missing; default "pmx".
	Database string
	// Logger receives progress logs; default slog.Default().
	Logger *slog.Logger
	// BinDir holds initdb, postgres, psql, createdb and dropdb; default FindBinaries().
	BinDir string
	// Ephemeral trades durability for speed (fsync, synchronous_commit and full_page_writes off,
	// initdb --no-sync). A crash of the machine can then corrupt the cluster, so it is for throwaway
	// test clusters only; `pmx dev` keeps PostgreSQL's durable defaults.
	Ephemeral bool
	// Settings are extra server settings, passed as `postgres -c name=value` on every start (never
	// written to postgresql.conf, so removing one takes effect on the next start). They override
	// this package's own (listen_addresses, unix_socket_directories, the Ephemeral ones, ...).
	Settings map[string]string
	// RunAsUser is the OS user that runs initdb and postgres when the caller is root. Default: the
	// owner of an existing data directory, else "postgres" if it exists, else "nobody". Ignored when
	// not running as root.
	RunAsUser string
}

// Cluster is a running PostgreSQL server started by Start. Its methods are safe for concurrent use.
type Cluster struct {
	dataDir, pgdata, socketDir, logPath, binDir, database string
	removeSocketDir                                       bool // socketDir is a temp dir of ours
	logger                                                *slog.Logger
	lock                                                  *os.File

	cmd     *exec.Cmd
	done    chan struct{} // closed once the postgres process has exited
	waitErr error         // the exit status; set before done is closed

	stopOnce sync.Once
	stopErr  error
}

// serverIdentity is the OS user initdb and postgres run as.
type serverIdentity struct {
	cred     *syscall.Credential // nil: as ourselves
	name     string
	uid, gid int
}

// Start brings up the cluster under opts.DataDir, initialising it on first use, and returns once it
// accepts connections and opts.Database exists. A postmaster.pid left by a server that died (its
// process is gone, or the PID now belongs to another program) is removed. If another process
// already runs the cluster, the error wraps ErrAlreadyRunning. If postgres fails to start, the
// error includes the end of postgres.log. ctx bounds the startup only, not the server's life.
func Start(ctx context.Context, opts Options) (_ *Cluster, err error) {
	began := time.Now()
	if opts.DataDir == "" {
		return nil, errors.New("pgcluster: Options.DataDir is required")
	}
	if opts.Database == "" {
		opts.Database = "pmx"
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	dataDir, err := filepath.Abs(opts.DataDir)
	if err != nil {
		return nil, fmt.Errorf("while resolving data dir %q: %w", opts.DataDir, err)
	}
	c := &Cluster{
		dataDir:  dataDir,
		pgdata:   filepath.Join(dataDir, "pgdata"),
		logPath:  filepath.Join(dataDir, "postgres.log"),
		database: opts.Database,
		logger:   opts.Logger.With("data_dir", dataDir),
		done:     make(chan struct{}),
	}
	defer func() {
		if err != nil {
			stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = c.terminate(stopCtx) // a server that started but failed later must not linger
			c.releaseResources()
		}
	}()

	if err := os.MkdirAll(filepath.Dir(dataDir), 0o755); err != nil {
		return nil, fmt.Errorf("while creating data dir: %w", err)
	}
	if err := os.Mkdir(dataDir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("while creating data dir: %w", err)
	}
	if err := c.acquireLock(); err != nil {
		return nil, err
	}

	initialised, err := c.checkPGData()
	if err != nil {
		return nil, err
	}
	c.binDir = opts.BinDir
	if c.binDir == "" {
		pgVersion, _ := os.ReadFile(filepath.Join(c.pgdata, "PG_VERSION"))
		if c.binDir, err = findBinaries(os.Getenv("PATH"), defaultSearchGlobs, string(pgVersion)); err != nil {
			return nil, err
		}
	}
	id, err := chooseIdentity(c.pgdata, opts.RunAsUser)
	if err != nil {
		return nil, err
	}
	c.logger.Debug("postgres cluster settings", "bin_dir", c.binDir, "os_user", id.name, "uid", id.uid)
	if id.cred != nil {
		if err := prepareForUser(dataDir, c.pgdata, initialised, id, c.logger); err != nil {
			return nil, err
		}
	}
	logStart, err := c.logOffset()
	if err != nil {
		return nil, err
	}

	if !initialised {
		if err := c.initdb(ctx, id, opts.Ephemeral, logStart); err != nil {
			return nil, err
		}
	}
	if err := c.clearStalePID(ctx); err != nil {
		return nil, err
	}
	if err := c.prepareSocketDir(id); err != nil {
		return nil, err
	}
	if err := c.startServer(ctx, id, opts, logStart); err != nil {
		return nil, err
	}
	if err := c.ensureDatabase(ctx, c.database); err != nil {
		return nil, fmt.Errorf("while creating database %q: %w", c.database, err)
	}
	c.logger.Info("postgres started", "pid", c.cmd.Process.Pid, "url", c.URL(),
		"os_user", id.name, "elapsed", time.Since(began).Round(time.Millisecond))
	return c, nil
}

// acquireLock takes an exclusive flock on DataDir/pgcluster.lock for the Cluster's lifetime. Unlike
// postmaster.pid it is released by the kernel when the owning process dies, and it also serialises
// two processes that would otherwise both run initdb on a fresh DataDir.
func (c *Cluster) acquireLock() error {
	path := filepath.Join(c.dataDir, "pgcluster.lock")
	// O_RDONLY suffices for flock and works even if another user created the file.
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("while opening lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			msg := "another process is using it"
			if pid, ok := readPostmasterPID(c.pgdata); ok {
				msg = fmt.Sprintf("postgres pid %d, started by another process", pid)
			}
			return fmt.Errorf("%w in %s (%s); is another pmx running with this data dir? stop it or choose another data dir",
				ErrAlreadyRunning, c.dataDir, msg)
		}
		return fmt.Errorf("while locking %s: %w", path, err)
	}
	c.lock = f
	return nil
}

// checkPGData reports whether pgdata holds an initialised cluster. initdb writes into a temporary
// directory that is renamed on success, so a pgdata without PG_VERSION was not made by us.
func (c *Cluster) checkPGData() (initialised bool, err error) {
	if _, err := os.Stat(filepath.Join(c.pgdata, "PG_VERSION")); err == nil {
		return true, nil
	}
	entries, err := os.ReadDir(c.pgdata)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("while inspecting %s: %w", c.pgdata, err)
	case len(entries) > 0:
		return false, fmt.Errorf("%s exists but is not a PostgreSQL data directory (no PG_VERSION); move it away or choose another data dir", c.pgdata)
	}
	if err := os.Remove(c.pgdata); err != nil { // empty: let initdb's rename take its place
		return false, fmt.Errorf("while removing empty %s: %w", c.pgdata, err)
	}
	return false, nil
}

// chooseIdentity picks the OS user for initdb and postgres; see the package documentation.
func chooseIdentity(pgdata, runAs string) (serverIdentity, error) {
	if os.Geteuid() != 0 {
		id := serverIdentity{uid: os.Geteuid(), gid: os.Getegid(), name: strconv.Itoa(os.Geteuid())}
		if u, err := user.Current(); err == nil {
			id.name = u.Username
		}
		return id, nil
	}
	var u *user.User
	var err error
	switch {
	case runAs != "":
		if u, err = user.Lookup(runAs); err != nil {
			return serverIdentity{}, fmt.Errorf("while looking up user %q to run postgres as: %w", runAs, err)
		}
	default:
		// An existing cluster must be served by its owner; reuse it unless it is root's (which
		// postgres would reject anyway).
		if fi, statErr := os.Stat(pgdata); statErr == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != 0 {
				u, _ = user.LookupId(strconv.FormatUint(uint64(st.Uid), 10))
				if u == nil { // owner has no passwd entry; run as the bare uid/gid
					return credentialFor(strconv.FormatUint(uint64(st.Uid), 10), int(st.Uid), int(st.Gid)), nil
				}
			}
		}
		if u == nil {
			if u, err = user.Lookup("postgres"); err != nil {
				if u, err = user.Lookup("nobody"); err != nil {
					return serverIdentity{}, fmt.Errorf("running as root, but neither a %q nor a %q user exists to run postgres as: %w", "postgres", "nobody", err)
				}
			}
		}
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err := errors.Join(err1, err2); err != nil {
		return serverIdentity{}, fmt.Errorf("while parsing ids of user %q: %w", u.Username, err)
	}
	if uid == 0 {
		return serverIdentity{}, fmt.Errorf("cannot run postgres as %q: it is root", u.Username)
	}
	return credentialFor(u.Username, uid, gid), nil
}

func credentialFor(name string, uid, gid int) serverIdentity {
	// Empty Groups drops root's supplementary groups in the child.
	return serverIdentity{
		cred: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)},
		name: name, uid: uid, gid: gid,
	}
}

// prepareForUser makes dataDir usable by the unprivileged server user when we are root.
func prepareForUser(dataDir, pgdata string, initialised bool, id serverIdentity, logger *slog.Logger) error {
	fi, err := os.Stat(dataDir)
	if err != nil {
		return fmt.Errorf("while inspecting data dir: %w", err)
	}
	if err := checkTraversable(filepath.Dir(dataDir), id); err != nil {
		return err
	}
	if !canTraverse(fi, id) {
		// Search permission only: the server needs to reach pgdata, not to list DataDir.
		mode := fi.Mode().Perm() | 0o001
		logger.Info("granting others search permission on data dir so postgres can reach it",
			"os_user", id.name, "mode", mode)
		if err := os.Chmod(dataDir, mode); err != nil {
			return fmt.Errorf("while making data dir reachable for user %q: %w", id.name, err)
		}
	}
	if !initialised {
		return nil
	}
	// A cluster copied by root, or created for another RunAsUser, must change hands: postgres
	// insists on owning its data directory.
	pfi, err := os.Stat(pgdata)
	if err != nil {
		return fmt.Errorf("while inspecting %s: %w", pgdata, err)
	}
	if st, ok := pfi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != id.uid {
		logger.Info("changing owner of data directory", "pgdata", pgdata, "os_user", id.name)
		err := filepath.WalkDir(pgdata, func(path string, _ os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(path, id.uid, id.gid)
		})
		if err != nil {
			return fmt.Errorf("while handing %s to user %q: %w", pgdata, id.name, err)
		}
	}
	return nil
}

// canTraverse reports whether id may search (enter) the directory described by fi. Only the primary
// group counts: the child runs with no supplementary groups.
func canTraverse(fi os.FileInfo, id serverIdentity) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return true // cannot tell; let postgres report it
	}
	perm := fi.Mode().Perm()
	switch {
	case int(st.Uid) == id.uid:
		return perm&0o100 != 0
	case int(st.Gid) == id.gid:
		return perm&0o010 != 0
	default:
		return perm&0o001 != 0
	}
}

// checkTraversable returns an error naming the deepest directory among dir and its ancestors that
// id cannot enter. We do not change those permissions: they belong to someone else.
func checkTraversable(dir string, id serverIdentity) error {
	for p := dir; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("while checking access to %s: %w", p, err)
		}
		if !canTraverse(fi, id) {
			return fmt.Errorf("postgres must run as user %q (uid %d) because pmx runs as root, but that user cannot enter %s (mode %v); "+
				"choose a data dir it can reach (e.g. under /tmp or /var/lib), or grant it access with: chmod o+x %s",
				id.name, id.uid, p, fi.Mode().Perm(), p)
		}
		if parent := filepath.Dir(p); parent == p {
			return nil
		}
	}
}

// logOffset rotates an oversized postgres.log and returns its current size, where this run's output
// starts (so a failed start shows this run's lines, not an old run's).
func (c *Cluster) logOffset() (int64, error) {
	fi, err := os.Stat(c.logPath)
	if err == nil && fi.Size() > logRotateSize {
		if err := os.Rename(c.logPath, c.logPath+".old"); err != nil {
			return 0, fmt.Errorf("while rotating %s: %w", c.logPath, err)
		}
		return 0, nil
	}
	if err == nil {
		return fi.Size(), nil
	}
	return 0, nil
}

func (c *Cluster) appendLog() (*os.File, error) {
	// The log stays root's: children write through the inherited descriptor, never by path.
	f, err := os.OpenFile(c.logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("while opening postgres log: %w", err)
	}
	return f, nil
}

// initdb creates the cluster in a temporary directory and renames it to pgdata only on success, so
// an interrupted initdb never leaves a half-made cluster that later looks initialised.
func (c *Cluster) initdb(ctx context.Context, id serverIdentity, ephemeral bool, logStart int64) error {
	began := time.Now()
	tmp := c.pgdata + ".initdb-tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("while removing leftover %s: %w", tmp, err)
	}
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return fmt.Errorf("while creating %s: %w", tmp, err)
	}
	if id.cred != nil {
		if err := os.Chown(tmp, id.uid, id.gid); err != nil {
			return fmt.Errorf("while handing %s to user %q: %w", tmp, id.name, err)
		}
	}
	initdb, err := lookBin(c.binDir, "initdb")
	if err != nil {
		return err
	}
	logFile, err := c.appendLog()
	if err != nil {
		return err
	}
	defer logFile.Close()

	args := []string{
		"-D", tmp,
		"--username=" + superuser,
		"--encoding=UTF8",
		// C collation: byte order, identical on every machine and unaffected by libc upgrades.
		"--locale=C",
		"--auth-local=trust",
		"--auth-host=reject",
	}
	if ephemeral {
		args = append(args, "--no-sync")
	}
	c.logger.Info("initialising postgres cluster", "pgdata", c.pgdata, "os_user", id.name)
	cmd := exec.CommandContext(ctx, initdb, args...)
	cmd.Dir = "/" // our working directory may be unreadable for the server user
	// TZ=UTC makes initdb write timezone=UTC (an exchange's timestamps are best kept in UTC) and
	// skips its slow scan of the system timezone database.
	cmd.Env = append(cleanEnv(), "TZ=UTC")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: id.cred}
	SetParentDeathSignal(cmd.SysProcAttr, syscall.SIGKILL) // the next Start discards its work anyway
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("while initialising the cluster (initdb): %w%s", err, c.logTail(logStart))
	}
	if err := os.Rename(tmp, c.pgdata); err != nil {
		return fmt.Errorf("while moving the new cluster into place: %w", err)
	}
	c.logger.Info("postgres cluster initialised", "elapsed", time.Since(began).Round(time.Millisecond))
	return nil
}

// clearStalePID removes a postmaster.pid whose server is gone. We hold the lock, so no pmx process
// owns a live server here; one that still runs is either shutting down after its pmx died (its
// parent-death signal is in flight), which we wait out briefly, or was started by hand.
func (c *Cluster) clearStalePID(ctx context.Context) error {
	pidFile := filepath.Join(c.pgdata, "postmaster.pid")
	deadline := time.Now().Add(10 * time.Second)
	for delay := 5 * time.Millisecond; ; delay = min(2*delay, 200*time.Millisecond) {
		if _, err := os.Stat(pidFile); errors.Is(err, os.ErrNotExist) {
			return nil
		}
		pid, ok := readPostmasterPID(c.pgdata)
		alive := ok && !processGone(pid)
		if alive {
			if isPG, known := processIsPostgres(pid); known && !isPG {
				alive = false // the PID was reused by an unrelated process, typical after a container restart
			}
		}
		if !alive {
			c.logger.Warn("removing stale postmaster.pid left by a postgres that is no longer running", "pid", pid)
			if err := os.Remove(pidFile); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("while removing stale %s: %w", pidFile, err)
			}
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: postgres (pid %d) is running on %s but no pmx process owns it; stop it with: kill -INT %d",
				ErrAlreadyRunning, pid, c.pgdata, pid)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("while waiting for the previous postgres (pid %d) to exit: %w", pid, ctx.Err())
		case <-time.After(delay):
		}
	}
}

// readPostmasterPID returns the PID on the first line of pgdata/postmaster.pid.
func readPostmasterPID(pgdata string) (int, bool) {
	lines := readPIDFile(pgdata)
	if len(lines) == 0 {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(lines[0]))
	return pid, err == nil && pid > 0
}

func readPIDFile(pgdata string) []string {
	b, err := os.ReadFile(filepath.Join(pgdata, "postmaster.pid"))
	if err != nil {
		return nil
	}
	return strings.Split(string(b), "\n")
}

// prepareSocketDir picks DataDir/run, or a short temporary directory when a socket path under
// DataDir would exceed the kernel's limit.
func (c *Cluster) prepareSocketDir(id serverIdentity) error {
	socketName := "/.s.PGSQL." + strconv.Itoa(port)
	dir := filepath.Join(c.dataDir, "run")
	if strings.ContainsAny(dir, `",`) {
		return fmt.Errorf("data dir %q contains a quote or comma, which postgres cannot parse in unix_socket_directories", c.dataDir)
	}
	if len(dir)+len(socketName) <= maxSocketPath {
		if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("while creating socket dir: %w", err)
		}
		// Leftovers of a killed server would make postgres refuse to start if their PID was reused;
		// the lock guarantees no live server uses them.
		stale, _ := filepath.Glob(filepath.Join(dir, ".s.PGSQL.*"))
		for _, f := range stale {
			os.Remove(f)
		}
	} else {
		base := os.TempDir()
		if len(base)+len("/pmxpg-1234567890")+len(socketName) > maxSocketPath {
			base = "/tmp"
		}
		var err error
		if dir, err = os.MkdirTemp(base, "pmxpg-"); err != nil {
			return fmt.Errorf("while creating socket dir: %w", err)
		}
		c.removeSocketDir = true
		c.logger.Debug("data dir path too long for a unix socket; using a temporary socket dir", "socket_dir", dir)
	}
	c.socketDir = dir
	if id.cred != nil {
		if err := os.Chown(dir, id.uid, id.gid); err != nil {
			return fmt.Errorf("while handing socket dir to user %q: %w", id.name, err)
		}
		if err := checkTraversable(filepath.Dir(dir), id); err != nil {
			return err
		}
	}
	return nil
}

// startServer launches postgres and waits until it accepts connections.
func (c *Cluster) startServer(ctx context.Context, id serverIdentity, opts Options, logStart int64) error {
	postgres, err := lookBin(c.binDir, "postgres")
	if err != nil {
		return err
	}
	settings := map[string]string{
		"listen_addresses":        "",
		"unix_socket_directories": `"` + c.socketDir + `"`,
		"unix_socket_permissions": "0700",
		"port":                    strconv.Itoa(port),
		"cluster_name":            "pmx", // shows in ps output: "postgres: pmx: checkpointer"
	}
	if opts.Ephemeral {
		settings["fsync"] = "off"
		settings["synchronous_commit"] = "off"
		settings["full_page_writes"] = "off"
	}
	maps.Copy(settings, opts.Settings)
	args := []string{"-D", c.pgdata}
	for _, k := range slices.Sorted(maps.Keys(settings)) {
		if k == "" || strings.ContainsAny(k, "= ") {
			return fmt.Errorf("invalid postgres setting name %q", k)
		}
		args = append(args, "-c", k+"="+settings[k])
	}

	logFile, err := c.appendLog()
	if err != nil {
		return err
	}
	defer logFile.Close() // the child keeps its own copy
	c.cmd = exec.Command(postgres, args...)
	c.cmd.Dir = "/"
	c.cmd.Env = cleanEnv()
	c.cmd.Stdout, c.cmd.Stderr = logFile, logFile
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: id.cred, Setpgid: true}
	SetParentDeathSignal(c.cmd.SysProcAttr, syscall.SIGINT)
	if err := c.cmd.Start(); err != nil {
		c.cmd = nil
		return fmt.Errorf("while starting postgres: %w", err)
	}
	go func() {
		c.waitErr = c.cmd.Wait()
		close(c.done)
	}()

	if err := c.waitReady(ctx); err != nil {
		// Start's cleanup stops the server; the log tail says why it did not come up.
		return fmt.Errorf("while starting postgres: %w%s", err, c.logTail(logStart))
	}
	return nil
}

// waitReady polls postmaster.pid until postgres marks itself ready to accept connections, the same
// readiness signal `pg_ctl start -w` uses, and fails as soon as the process exits.
func (c *Cluster) waitReady(ctx context.Context) error {
	pid := c.cmd.Process.Pid
	for delay := time.Millisecond; ; delay = min(2*delay, 50*time.Millisecond) {
		lines := readPIDFile(c.pgdata)
		// Line 1 is the PID, line 8 the status ("starting", "ready", "stopping").
		if len(lines) >= 8 && strings.TrimSpace(lines[0]) == strconv.Itoa(pid) &&
			strings.TrimSpace(lines[7]) == "ready" {
			return nil
		}
		timer := time.NewTimer(delay)
		select {
		case <-c.done:
			timer.Stop()
			return fmt.Errorf("postgres exited during startup (%v)", c.waitErr)
		case <-ctx.Done():
			timer.Stop()
			return fmt.Errorf("gave up waiting for postgres to accept connections: %w", ctx.Err())
		case <-timer.C:
		}
	}
}

// logTail returns the last lines postgres.log received since offset, formatted for an error.
func (c *Cluster) logTail(offset int64) string {
	const maxBytes, maxLines = 8 << 10, 25
	f, err := os.Open(c.logPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return ""
	}
	offset = max(offset, fi.Size()-maxBytes)
	if offset > fi.Size() {
		offset = 0 // the log was replaced meanwhile
	}
	b, err := io.ReadAll(io.NewSectionReader(f, offset, fi.Size()-offset))
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > maxLines {
		lines = lines[len(lines)-maxLines:]
	}
	if len(lines) == 1 && lines[0] == "" {
		return ""
	}
	return fmt.Sprintf("\nlast lines of %s:\n\t%s", c.logPath, strings.Join(lines, "\n\t"))
}

// cleanEnv is our environment without libpq and server variables (PGDATA, PGHOST, PGPORT, ...)
// that could redirect the tools we run away from this cluster.
func cleanEnv() []string {
	return slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "PG")
	})
}

// URL returns the connection URL of the application database (Options.Database). See URLFor.
func (c *Cluster) URL() string { return c.URLFor(c.database) }

// URLFor returns a connection URL for database db, understood by libpq (psql) and pgx/v5:
//
//	postgres://postgres@/DB?host=SOCKETDIR&port=5432&sslmode=disable
//
// for example "postgres://postgres@/pmx?host=/srv/pmx/.pmx/run&port=5432&sslmode=disable". An
// absolute path as host means a unix socket directory. Characters outside [A-Za-z0-9-._~/] in DB
// and SOCKETDIR are percent-encoded (never "+", which libpq would not decode). port and sslmode are
// explicit so PGPORT or PGSSLMODE in the environment cannot override them.
func (c *Cluster) URLFor(db string) string {
	return fmt.Sprintf("postgres://%s@/%s?host=%s&port=%d&sslmode=disable",
		superuser, pctEncode(db, false), pctEncode(c.socketDir, true), port)
}

func pctEncode(s string, keepSlash bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case 'a' <= ch && ch <= 'z', 'A' <= ch && ch <= 'Z', '0' <= ch && ch <= '9',
			ch == '-', ch == '.', ch == '_', ch == '~', ch == '/' && keepSlash:
			b.WriteByte(ch)
		default:
			fmt.Fprintf(&b, "%%%02X", ch)
		}
	}
	return b.String()
}

// DataDir returns the absolute Options.DataDir.
func (c *Cluster) DataDir() string { return c.dataDir }

// SocketDir returns the directory holding the server's unix socket.
func (c *Cluster) SocketDir() string { return c.socketDir }

// Port returns the port number that names the socket file; nothing listens on TCP.
func (c *Cluster) Port() int { return port }

// User returns the database superuser that URLs connect as.
func (c *Cluster) User() string { return superuser }

// Database returns Options.Database.
func (c *Cluster) Database() string { return c.database }

// BinDir returns the directory of the PostgreSQL programs in use.
func (c *Cluster) BinDir() string { return c.binDir }

// LogFile returns the path of the server log.
func (c *Cluster) LogFile() string { return c.logPath }

// Pid returns the postmaster's process id.
func (c *Cluster) Pid() int { return c.cmd.Process.Pid }

// Done is closed when the postgres process has exited, whether through Stop or not; `pmx dev` can
// watch it to shut down when its database dies.
func (c *Cluster) Done() <-chan struct{} { return c.done }

// CreateDatabase creates database name (an error if it exists), using createdb from BinDir.
func (c *Cluster) CreateDatabase(ctx context.Context, name string) error {
	return c.CreateDatabaseFrom(ctx, name, "")
}

// CreateDatabaseFrom creates database name as a copy of database template ("" means template1).
// Tests can migrate a template once and clone it per test, which is much faster than migrating
// every test's database. Nobody may be connected to template meanwhile.
func (c *Cluster) CreateDatabaseFrom(ctx context.Context, name, template string) error {
	args := []string{}
	if template != "" {
		args = append(args, "--template="+template)
	}
	if _, err := c.runClient(ctx, "createdb", append(args, "--", name)...); err != nil {
		return fmt.Errorf("while creating database %q: %w", name, err)
	}
	return nil
}

// DropDatabase drops database name if it exists, terminating its connections (DROP DATABASE ...
// WITH (FORCE)).
func (c *Cluster) DropDatabase(ctx context.Context, name string) error {
	if _, err := c.runClient(ctx, "dropdb", "--if-exists", "--force", "--", name); err != nil {
		return fmt.Errorf("while dropping database %q: %w", name, err)
	}
	return nil
}

// ensureDatabase creates name unless it exists. Looking first keeps a "database already exists"
// ERROR out of postgres.log on every start.
func (c *Cluster) ensureDatabase(ctx context.Context, name string) error {
	out, err := c.runClient(ctx, "psql", "--no-psqlrc", "--dbname=postgres", "--tuples-only", "--no-align",
		"--command=SELECT 1 FROM pg_database WHERE datname = "+quoteLiteral(name))
	if err != nil {
		return err
	}
	if out == "1" {
		return nil
	}
	if _, err = c.runClient(ctx, "createdb", "--", name); err != nil && strings.Contains(err.Error(), "already exists") {
		return nil // created meanwhile by someone else
	}
	return err
}

// quoteLiteral quotes s as an SQL string literal (standard_conforming_strings is on by default).
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// runClient runs a client tool from BinDir against this cluster as the superuser and returns its
// trimmed output. Client tools may run as root, and root can reach the socket, so no credential
// switch is needed.
func (c *Cluster) runClient(ctx context.Context, tool string, args ...string) (string, error) {
	bin, err := lookBin(c.binDir, tool)
	if err != nil {
		return "", err
	}
	args = append([]string{"--host=" + c.socketDir, "--port=" + strconv.Itoa(port), "--username=" + superuser, "--no-password"}, args...)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = cleanEnv()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	trimmed := strings.TrimSpace(out.String())
	if err != nil {
		return trimmed, fmt.Errorf("%s: %w: %s", tool, err, trimmed)
	}
	return trimmed, nil
}

// Stop shuts postgres down cleanly ("fast" shutdown: open transactions are rolled back, a
// checkpoint is written) and waits for it to exit. If ctx ends first, it falls back to an immediate
// shutdown and, failing that, kills the server's process group; the data survives either way
// through WAL recovery on the next start (unless Ephemeral). Stop is idempotent: later calls
// return the first call's result. It also releases the data dir for the next Start.
func (c *Cluster) Stop(ctx context.Context) error {
	c.stopOnce.Do(func() {
		began := time.Now()
		c.stopErr = c.terminate(ctx)
		c.releaseResources()
		if c.stopErr != nil {
			c.logger.Error("postgres did not stop cleanly", "err", c.stopErr)
			return
		}
		c.logger.Info("postgres stopped", "elapsed", time.Since(began).Round(time.Millisecond))
	})
	return c.stopErr
}

// terminate signals postgres and waits for it, escalating when ctx ends.
func (c *Cluster) terminate(ctx context.Context) error {
	if c.cmd == nil {
		return nil
	}
	select {
	case <-c.done:
		return fmt.Errorf("postgres had already exited: %v (see %s)", c.waitErr, c.logPath)
	default:
	}
	pid := c.cmd.Process.Pid
	if err := c.cmd.Process.Signal(syscall.SIGINT); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("while asking postgres to shut down: %w", err)
	}
	select {
	case <-c.done:
		if c.waitErr != nil {
			return fmt.Errorf("postgres exited with an error during shutdown: %w (see %s)", c.waitErr, c.logPath)
		}
		return nil
	case <-ctx.Done():
	}
	c.logger.Warn("postgres is slow to shut down; forcing an immediate shutdown", "pid", pid)
	_ = c.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-c.done:
	case <-time.After(5 * time.Second):
		// Its backends notice the postmaster's death and exit by themselves.
		_ = c.cmd.Process.Kill()
		<-c.done
	}
	return fmt.Errorf("while stopping postgres: forced an immediate shutdown: %w", ctx.Err())
}

// releaseResources drops the lock and the temporary socket dir; the server must be gone.
func (c *Cluster) releaseResources() {
	if c.removeSocketDir && c.socketDir != "" {
		os.RemoveAll(c.socketDir)
	}
	if c.lock != nil {
		c.lock.Close() // closing the descriptor releases the flock
		c.lock = nil
	}
}
