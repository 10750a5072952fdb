package controller

import (
	"testing"
	"time"
)

// TestJobBackoff: the retry of a build Job waits as the work queue waits
// for an in-process build: 250 ms after the first attempt, doubling, at
// most 30 s.
func TestJobBackoff(t *testing.T) {
	for attempt, want := range map[int32]time.Duration{1: 250 * time.Millisecond, 2: 500 * time.Millisecond, 3: time.Second,
		7: 16 * time.Second, 8: 30 * time.Second, 9: 30 * time.Second, 1 << 30: 30 * time.Second} {
		if got := jobBackoff(attempt); got != want {
			t.Errorf("backoff after attempt %d: %v, want %v", attempt, got, want)
		}
	}
}
