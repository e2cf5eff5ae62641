package settings

import (
	"testing"
	"time"
)

// HoldHashSlots takes every password-hashing slot of the process and shortens the wait for one to
// wait, until t ends: every hash is then refused. Only for a test that is not parallel.
func HoldHashSlots(t *testing.T, wait time.Duration) {
	before := hashWait
	hashWait = wait
	for range cap(hashSlots) {
		hashSlots <- struct{}{}
	}
	t.Cleanup(func() {
		for range cap(hashSlots) {
			<-hashSlots
		}
		hashWait = before
	})
}

// SetHashWait sets how long a request waits for a hashing slot (before any test runs).
func SetHashWait(wait time.Duration) { hashWait = wait }
