// Package logtest holds what tests share to read a log while the code under test still writes it.
package logtest

import (
	"bytes"
	"strings"
	"sync"
)

// Buffer is a log's destination (an slog handler's writer, a process's stderr) that a test reads
// while the code under test writes to it from other goroutines.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String is everything written so far.
func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Says reports whether what was written so far contains s.
func (l *Buffer) Says(s string) bool { return strings.Contains(l.String(), s) }
