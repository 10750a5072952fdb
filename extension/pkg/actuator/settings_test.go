package actuator

import (
	"strings"
	"testing"

	configv1alpha1 "github.com/oslayer/oslayer/extension/pkg/apis/config/v1alpha1"
)

// TestTargetOf: the placeholders are replaced and the tag defaults to
// the version, made a valid tag.
func TestTargetOf(t *testing.T) {
	values := map[string]string{configv1alpha1.PlaceholderNamespace: "shoot--p--s", configv1alpha1.PlaceholderPool: "worker",
		configv1alpha1.PlaceholderVersion: "1.2.3+build", configv1alpha1.PlaceholderShoot: "s", configv1alpha1.PlaceholderProject: "p"}
	for _, tc := range []struct{ pattern, want string }{
		{"r.example/os/{namespace}/{pool}", "r.example/os/shoot--p--s/worker:1.2.3_build"},
		{"r.example/{project}/{shoot}-{pool}:v{version}", ""},
		{"r.example:5000/{project}/{shoot}-{pool}:stable", "r.example:5000/p/s-worker:stable"},
	} {
		got, _, err := targetOf(tc.pattern, values)
		if tc.want == "" {
			if err == nil || !strings.Contains(err.Error(), "spec.providerConfig.target") {
				t.Errorf("%s: %q, %v: want an error naming spec.providerConfig.target", tc.pattern, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: %q, %v; want %q", tc.pattern, got, err, tc.want)
		}
	}
}
