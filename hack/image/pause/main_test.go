package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestPauseStopsOnSIGTERM builds the pause program, starts it, and checks that it runs until
// SIGTERM and then exits 0, as a container runtime stops a pod's sandbox.
func TestPauseStopsOnSIGTERM(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "pause")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Ready once it says so: before, SIGTERM would kill it rather than stop it.
	line, err := bufio.NewReader(stderr).ReadString('\n')
	if err != nil || line != "pause: waiting for SIGTERM\n" {
		t.Fatalf("pause's first line %q (%v)", line, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("pause after SIGTERM: %v, want exit 0", err)
		}
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatal("pause did not stop within 10 s of SIGTERM")
	}
	_ = os.Remove(bin)
}
