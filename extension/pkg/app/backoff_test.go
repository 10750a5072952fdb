package app

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// TestFailureBackoff: an OSC that keeps failing is retried at most 6
// times in its first 40 s (not ~24), and the delay is capped.
func TestFailureBackoff(t *testing.T) {
	rl := failureBackoff()
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "shoot--p--s", Name: "bad"}}
	var elapsed, last time.Duration
	retries := 0
	for elapsed < 40*time.Second {
		last = rl.When(req)
		elapsed += last
		retries++
	}
	if retries > 6 {
		t.Errorf("%d retries in the first 40 s of a failing OSC; want at most 6", retries)
	}
	for range 20 {
		last = rl.When(req)
	}
	if last != failureBackoffMax {
		t.Errorf("delay after many failures %s; want %s", last, failureBackoffMax)
	}
	rl.Forget(req)
	if d := rl.When(req); d != failureBackoffBase {
		t.Errorf("after a success the first retry waits %s; want %s", d, failureBackoffBase)
	}
}
