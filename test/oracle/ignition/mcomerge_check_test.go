package ignition

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"testing"

	ign35 "github.com/coreos/ignition/v2/config/v3_5"
	ign35types "github.com/coreos/ignition/v2/config/v3_5/types"
)

// TestMergeMatchesMCO checks the oracle's merge against the MCO's own: the
// fixtures' rendered-ROLE.yaml files are MergeMachineConfigs' output for the
// same template configs plus the SSH config (see the fixtures' SOURCES.md).
func TestMergeMatchesMCO(t *testing.T) {
	for _, p := range []string{"aws", "baremetal", "gcp"} {
		for _, role := range []string{"worker", "master"} {
			t.Run(p+"-"+role, func(t *testing.T) {
				c := set("", role, fx("mco/"+p+"/"+role), fx("mco/misc/99_openshift-machineconfig_"+role+".yaml"))
				got, err := mergeMachineConfigs(c.write(t, filepath.Join(t.TempDir(), "mcs")))
				if err != nil {
					t.Fatal(err)
				}
				r := set("", role, fx("mco/"+p+"/rendered-"+role+".yaml")).write(t, filepath.Join(t.TempDir(), "rendered"))
				want, rpt, err := ign35.Parse(r[0].Spec.Config.Raw)
				if err != nil || rpt.IsFatal() {
					t.Fatalf("rendered config: %v %s", err, rpt)
				}
				if !reflect.DeepEqual(normalize(t, got), normalize(t, want)) {
					a, _ := json.MarshalIndent(got, "", " ")
					b, _ := json.MarshalIndent(want, "", " ")
					t.Errorf("merge differs from the MCO's rendered config\noracle:\n%.3000s\nMCO:\n%.3000s", a, b)
				}
				if len(got.Storage.Files) < 20 || len(got.Systemd.Units) < 10 || len(got.Passwd.Users) != 1 {
					t.Errorf("only %d files, %d units and %d users merged", len(got.Storage.Files), len(got.Systemd.Units), len(got.Passwd.Users))
				}
			})
		}
	}
}

// normalize round-trips a config through its JSON form.
func normalize(t *testing.T, c ign35types.Config) ign35types.Config {
	t.Helper()
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	out, rpt, err := ign35.Parse(b)
	if err != nil || rpt.IsFatal() {
		t.Fatalf("%v %s", err, rpt)
	}
	return out
}
