package browsertest

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"

	"github.com/chromedp/chromedp"
)

// chromiumPath is Debian's chromium, which `make test` installs through `make chromium`.
const chromiumPath = "/usr/bin/chromium"

// Start starts a headless Chromium with a window of width×height for t and stops it, and every
// process it started, when t ends. chromedp gives it a fresh --user-data-dir, which it deletes
// afterwards; its other temporary files go into the test's temporary folder. Other packages'
// tests that render a page (internal/charttest's dashboard) start theirs here too.
func Start(t testing.TB, width, height int) context.Context {
	t.Helper()
	path := chromiumPath
	if _, err := os.Stat(path); err != nil {
		found, lerr := exec.LookPath("chromium")
		if lerr != nil {
			t.Fatalf("Chromium is missing (%v): the browser tests need it; run `make chromium` (or `apt-get install chromium`)", err)
		}
		path = found
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox, // root in a sandboxed machine: Chromium's own sandbox cannot start
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		// Chromium's own connections (updates, sync, field trials, QUIC probes) are refused by a
		// closed network and slow everything down; turn them off.
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(width, height),
		// Chromium makes a folder for its singleton socket in the temporary folder and leaves it
		// behind when it is stopped; this one is the test's, removed after the browser exits.
		chromedp.Env("TMPDIR="+t.TempDir()),
	)
	ctx, cancel := chromedp.NewContext(allocCtx, chromedp.WithErrorf(t.Logf))
	// The first action starts the browser; it lives as long as ctx, not as a timeout.
	if err := chromedp.Do(ctx); err != nil {
		cancel()
		cancelAlloc()
		t.Fatalf("starting Chromium (%s): %v", path, err)
	}
	proc := chromedp.FromContext(ctx).Browser.Process()
	t.Cleanup(func() {
		cancel()      // closes the browser
		cancelAlloc() // waits for it to exit and removes its profile
		if proc != nil {
			if err := proc.Signal(syscall.Signal(0)); !errors.Is(err, os.ErrProcessDone) {
				t.Errorf("Chromium (pid %d) is still running after the test: %v", proc.Pid, err)
			}
		}
	})
	return ctx
}
