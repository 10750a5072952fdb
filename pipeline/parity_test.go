package pipeline

import (
	"slices"
	"testing"

	"github.com/oslayer/oslayer/sign"
)

// Unreached reports exactly the fields a mapping left as the minimal
// input has them, walking into Inputs, Preflight, Signing, ...; Absent
// names only fields that exist.
func TestUnreached(t *testing.T) {
	none := Spec{Target: "oci:a", Inputs: Inputs{Pool: "a"}}
	full := none
	full.Target, full.Inputs.Pool = "oci:b", "b"
	full.Preflight.MaxLayers = 9
	full.Signing = &Signing{Password: sign.Password(nil)}
	got := Unreached(none, full)
	for _, reached := range []string{"Target", "Inputs.Pool", "Preflight.MaxLayers", "Signing.Password"} {
		if slices.Contains(got, reached) {
			t.Errorf("%s reported unreached", reached)
		}
	}
	for _, missed := range []string{"Base", "Arch", "Inputs.Strict", "Preflight.WarnLayers", "Signing.Key", "Signing.Identity", "Packages.Repos", "Inputs.ImageRefs.Budget"} {
		if !slices.Contains(got, missed) {
			t.Errorf("%s not reported unreached: %v", missed, got)
		}
	}
	if len(got) != len(Fields())-4 {
		t.Errorf("%d unreached of %d fields: %v", len(got), len(Fields()), got)
	}
	for front, fields := range Absent {
		for f, why := range fields {
			if !slices.Contains(Fields(), f) || why == "" {
				t.Errorf("Absent[%s]: %s is no field of Spec, or has no reason", front, f)
			}
		}
	}
}
