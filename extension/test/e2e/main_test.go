// Package e2e tests the OS extension end to end: Gardener's extension
// library with oslayer's actuator in the extension's manager, against a
// real API server with Gardener's CRDs, a real registry and cosign.
package e2e

import (
	"os"
	"strings"
	"testing"
	"time"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"

	"github.com/oslayer/oslayer/extension/test/exttest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	exttest.Stop()
	os.Exit(code)
}

// wait waits until ok holds for the OSC (two minutes at most).
func wait(t *testing.T, e *exttest.Env, osc *extensionsv1alpha1.OperatingSystemConfig, what string, ok func(*extensionsv1alpha1.OperatingSystemConfig) bool) *extensionsv1alpha1.OperatingSystemConfig {
	t.Helper()
	var last *extensionsv1alpha1.OperatingSystemConfig
	exttest.Until(t, 2*time.Minute, func() bool {
		o, err := e.Get(osc)
		if err != nil {
			t.Fatal(err)
		}
		last = o
		return ok(o)
	}, func() string { return osc.Name + " " + what + ": status " + state(last) })
	return last
}

func state(o *extensionsv1alpha1.OperatingSystemConfig) string {
	if o == nil {
		return "none"
	}
	var b strings.Builder
	if lo := o.Status.LastOperation; lo != nil {
		b.WriteString(string(lo.Type) + " " + string(lo.State) + " " + lo.Description)
	}
	if le := o.Status.LastError; le != nil {
		b.WriteString("; lastError: " + le.Description)
	}
	return b.String()
}

// succeeded is a reconcile that succeeded after the OSC's last change.
func succeeded(o *extensionsv1alpha1.OperatingSystemConfig) bool {
	lo := o.Status.LastOperation
	return lo != nil && lo.State == gardencorev1beta1.LastOperationStateSucceeded && o.Status.ObservedGeneration == o.Generation
}

// failed is a reconcile whose error is in status.lastError.
func failed(o *extensionsv1alpha1.OperatingSystemConfig) bool {
	return o.Status.LastError != nil
}
