package operatingsystemconfig

import (
	"testing"

	"github.com/oslayer/oslayer/pipeline"
	"github.com/oslayer/oslayer/sign"

	configv1alpha1 "github.com/oslayer/oslayer/extension/pkg/apis/config/v1alpha1"
)

// TestSpecParity: every field of the build specification is reachable
// from an OSC's settings (its providerConfig refined from the default,
// its pool and version) and what the actuator reads for it, unless
// pipeline.Absent lists it for the extension with the reason; a field
// listed there must really be out of reach (as the other front-ends'
// TestSpecParity in cmd/oslayer).
func TestSpecParity(t *testing.T) {
	spec := func(s *settings, rd read) pipeline.Spec {
		t.Helper()
		sp, err := specOf(s, rd)
		if err != nil {
			t.Fatal(err)
		}
		return sp
	}
	cfg := func(c configv1alpha1.OperatingSystemConfiguration) *config {
		return &config{OperatingSystemConfiguration: &c, fromDefault: map[string]bool{}}
	}
	none := &settings{config: cfg(configv1alpha1.OperatingSystemConfiguration{Target: "r.example/os/a"}),
		pool: "a", base: "b.example/fcos:1", target: "r.example/os/a:1"}
	full := &settings{config: cfg(configv1alpha1.OperatingSystemConfiguration{Target: "r.example/os/{pool}",
		Arch: []string{"amd64", "arm64"}, Signing: &configv1alpha1.Signing{Referrers: true}, Settings: pipeline.FullSettings()}),
		pool: "worker", version: "42.1", base: "b.example/fcos:42.1", target: "r.example/os/worker:42.1",
		values: map[string]string{configv1alpha1.PlaceholderVersion: "42.1"}}
	rd := read{osc: "/tmp/full/osc.yaml", secretsDir: "/tmp/full/secretrefs", registry: &pipeline.RegistryOptions{Jobs: 7},
		signingKey: &sign.KeyMaterial{Source: "Secret ns/cosign", PEM: []byte("key")}, cacheDir: "/tmp/cache"}
	for _, e := range pipeline.ParityErrors(pipeline.FrontExtension, spec(none, read{osc: "/tmp/none/osc.yaml"}), spec(full, rd)) {
		t.Error(e)
	}
}
