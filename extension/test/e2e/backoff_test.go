package e2e

import (
	"testing"
	"time"

	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/gardener/gardener/extensions/pkg/controller/operatingsystemconfig"
)

// reconcileErrors is controller-runtime's count of failed reconciles of
// the OSC controller in this process (controller_runtime_reconcile_total
// with result error).
func reconcileErrors(t *testing.T) float64 {
	t.Helper()
	mfs, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var ctrl, result string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "controller":
					ctrl = l.GetValue()
				case "result":
					result = l.GetValue()
				}
			}
			if ctrl == operatingsystemconfig.ControllerName && result == "error" {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}

// checkBackoff: the failing OSCs created at start, when the count of
// failures was before, are retried with the extension's backoff (1 s
// doubling: failures at 0, 1, 3 and 7 s, so at most 5 each in their first
// 10 s with some slack), not controller-runtime's 5 ms doubling (11 each
// in that time).
func checkBackoff(t *testing.T, failing int, before float64, start time.Time) {
	t.Helper()
	time.Sleep(time.Until(start.Add(10 * time.Second)))
	n := reconcileErrors(t) - before
	if n > float64(5*failing) {
		t.Errorf("%d failing OSCs failed %.0f times in their first 10 s: want at most %d (back off)", failing, n, 5*failing)
	}
	t.Logf("%d failing OSCs failed %.0f times in their first 10 s", failing, n)
}
