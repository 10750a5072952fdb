package fleet_test

import (
	"fmt"
	"testing"

	"github.com/oslayer/oslayer/pipeline"
)

// TestFleetSigningSettingsNotShared: two pools with the same content,
// base and target repository that differ only in the signing identity
// (OCI layout targets) or only in the referrer mode are two images, each
// built and signed with its own setting: the second is not merely
// retagged to the first's image (whose signature names another identity
// or has no referrer).
func TestFleetSigningSettingsNotShared(t *testing.T) {
	e := newMemoryEnv(t)
	e.signingKey(t)
	e.osc(t, "same.yaml", "the same")
	for name, plan := range map[string]string{
		"signing identity": fmt.Sprintf(`defaults: {base: %s, target: "oci:%s/out:{pool}", signKey: cosign.key, osc: [same.yaml]}
clusters:
- name: c
  pools:
  - {name: worker, signIdentity: registry.example.com/os/worker}
  - {name: edge, signIdentity: registry.example.com/os/edge}
`, e.base, e.dir),
		"referrer mode": fmt.Sprintf(`defaults: {base: %s, target: "%s/os/images:{pool}", signKey: cosign.key, osc: [same.yaml]}
clusters:
- name: c
  pools:
  - {name: worker}
  - {name: edge, signReferrers: true}
`, e.base, e.host),
	} {
		t.Run(name, func(t *testing.T) {
			sum := e.run(t, e.plan(t, plan))
			if sum.Built != 2 || sum.Failed != 0 {
				t.Fatalf("built %d, failed %d: %+v", sum.Built, sum.Failed, sum.Pools)
			}
			for _, p := range sum.Pools {
				if p.SameImageAs != "" {
					t.Errorf("%s: only retagged to %s's image", p.Path, p.SameImageAs)
				}
				if !signed(p.Phases) || p.Signature == "" {
					t.Errorf("%s: not signed by its own build: %+v", p.Path, p)
				}
			}
		})
	}
}

// signed reports whether a pool's phases include its own signing.
func signed(phases []pipeline.Phase) bool {
	for _, ph := range phases {
		if ph.Name == pipeline.StepSign {
			return true
		}
	}
	return false
}
