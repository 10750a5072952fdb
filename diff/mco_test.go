package diff

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode"

	opv1 "github.com/openshift/api/operator/v1"

	"github.com/oslayer/oslayer/render"
)

// The MCO agreement tests: the tables of the MCO's own tests
// (testdata/mco, verbatim; see its SOURCES.md), evaluated and run through
// oslayer's render path and decision. Each pair must agree.

const mcoData = "testdata/mco"

// mcoConsts are the constants the tables name, with the MCO's values.
var mcoConsts = map[string]any{
	"postConfigChangeActionNone":        LegacyNone,
	"postConfigChangeActionReloadCrio":  LegacyReloadCrio,
	"postConfigChangeActionRestartCrio": LegacyRestartCrio,
	"postConfigChangeActionReboot":      LegacyReboot,

	"constants.KubeletAuthFile":                      pathKubeletAuth,
	"constants.GPGNoRebootPath":                      pathGPGNoReboot,
	"constants.ContainerRegistryPolicyPath":          pathPolicyJSON,
	"constants.ContainerRegistryConfPath":            pathRegistriesConf,
	"constants.SigstoreRegistriesConfigDir":          pathSigstoreRegistriesD,
	"constants.CrioPoliciesDir":                      pathCrioPolicies,
	"constants.OpenShiftNMStateConfigDir":            pathNMStateOpenShift,
	"constants.UserCABundlePath":                     pathUserCABundle,
	"constants.UpdateCATrustServiceName":             unitUpdateCATrust,
	"constants.KubernetesCredentialProvidersDir":     pathCredProviders,
	"constants.KubeletCrioImageCredProviderConfPath": pathCrioCredProvider,
	"constants.IRIRegistryConfigPath":                pathIRIRegistryConfig,
	"constants.IRILoadImageScriptPath":               pathIRILoadImageScript,
	"constants.IRIRootCAPath":                        pathIRIRootCA,
	"constants.IRIRegistryServiceName":               unitIRIRegistry,
}

func init() {
	for _, t := range []string{"Reboot", "Drain", "Reload", "Restart", "DaemonReload", "None", "Special"} {
		mcoConsts["opv1."+t+"StatusAction"] = t
		mcoConsts["opv1."+t+"SpecAction"] = t
	}
}

// mcArgs is a MachineConfig as helpers.NewMachineConfigExtended builds it.
type mcArgs struct {
	name                    string
	files, units, ssh, exts []any
	kargs                   []any
	fips                    bool
	kernelType, osURL       string
}

func list(v any) []any {
	l, _ := v.([]any)
	return l
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

// mcoFuncs are the helpers the tables call (test/helpers/helpers.go,
// pkg/controller/common/helpers.go).
var mcoFuncs = map[string]func([]any) (any, error){
	// The content stays plain: writeMC makes the data URL.
	"helpers.StrToPtr":    func(a []any) (any, error) { return a[0], nil },
	"dataurl.EncodeBytes": func(a []any) (any, error) { return a[0], nil },
	"ctrlcommon.NewIgnFile": func(a []any) (any, error) {
		return map[string]any{"path": a[0], "contents": a[1]}, nil
	},
	"helpers.NewMachineConfig": func(a []any) (any, error) {
		if len(a) != 4 {
			return nil, fmt.Errorf("NewMachineConfig: %d arguments", len(a))
		}
		return mcArgs{name: str(a[0]), osURL: str(a[2]), files: list(a[3])}, nil
	},
	"helpers.NewMachineConfigExtended": func(a []any) (any, error) {
		if len(a) != 11 {
			return nil, fmt.Errorf("NewMachineConfigExtended: %d arguments", len(a))
		}
		fips, _ := a[7].(bool)
		return mcArgs{name: str(a[0]), files: list(a[3]), units: list(a[4]), ssh: list(a[5]), exts: list(a[6]),
			fips: fips, kargs: list(a[8]), kernelType: str(a[9]), osURL: str(a[10])}, nil
	},
}

func newEval() *goEval {
	return &goEval{consts: mcoConsts, funcs: mcoFuncs, vars: map[string]any{}}
}

// evalVar evaluates the value assigned to name in a testdata file, with
// the variables already evaluated in e.
func evalVar(t *testing.T, e *goEval, file, name string) any {
	t.Helper()
	x, err := declared(filepath.Join(mcoData, file), name)
	if err != nil {
		t.Fatal(err)
	}
	v, err := e.eval(x, 0)
	if err != nil {
		t.Fatalf("%s %s: %v", file, name, err)
	}
	e.vars[name] = v
	return v
}

// asAPI converts an evaluated literal to an openshift/api value: Go field
// names become their JSON names (the first letter lowered).
func asAPI(t *testing.T, v any, out any) {
	t.Helper()
	data, err := json.Marshal(lowerKeys(v))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, out); err != nil {
		t.Fatalf("%s: %v", data, err)
	}
}

func lowerKeys(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, x := range v {
			r := []rune(k)
			r[0] = unicode.ToLower(r[0])
			out[string(r)] = lowerKeys(x)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = lowerKeys(x)
		}
		return out
	}
	return v
}

// TestDefaultPoliciesMatchMCO: DefaultPolicies is apihelpers'
// defaultClusterPolicies.
func TestDefaultPoliciesMatchMCO(t *testing.T) {
	v := evalVar(t, newEval(), "defaultClusterPolicies.go.txt", "defaultClusterPolicies")
	var want opv1.NodeDisruptionPolicyClusterStatus
	asAPI(t, v, &want)
	if len(want.Files) == 0 {
		t.Fatal("evaluated no default file policies")
	}
	if got := DefaultPolicies(); !reflect.DeepEqual(got, want) {
		g, _ := json.MarshalIndent(got, "", " ")
		w, _ := json.MarshalIndent(want, "", " ")
		t.Errorf("default policies differ from the MCO's:\ngot  %s\nwant %s", g, w)
	}
}

// TestFindClosestFilePolicyPathMatchTable runs every case of the MCO's
// TestFindClosestFilePolicyPathMatch through ClosestFilePolicy.
func TestFindClosestFilePolicyPathMatchTable(t *testing.T) {
	e := newEval()
	const file = "TestFindClosestFilePolicyPathMatch.go.txt"
	evalVar(t, e, file, "policyActions")
	cases := list(evalVar(t, e, file, "tests"))
	if len(cases) != 5 {
		t.Fatalf("%d cases, the MCO's table at 7ff337a4ffac has 5", len(cases))
	}
	for i, c := range cases {
		m := c.(map[string]any)
		var policies []opv1.NodeDisruptionPolicyStatusFile
		var want []opv1.NodeDisruptionPolicyStatusAction
		asAPI(t, m["filePolicies"], &policies)
		asAPI(t, m["expectedActionsFound"], &want)
		found, _, got := ClosestFilePolicy(str(m["diffPath"]), policies)
		if found != m["expectedPathFound"].(bool) || !reflect.DeepEqual(got, want) {
			t.Errorf("case#%d %s: found %v %v, the MCO: %v %v", i, m["diffPath"], found, got, m["expectedPathFound"], want)
		}
	}
}

// ignFile flattens an ign3types.File literal ({Node: {Path}, FileEmbedded1:
// {Contents: {Source}}}) to NewIgnFile's {path, contents}.
func ignFile(f map[string]any) map[string]any {
	node, ok := f["Node"].(map[string]any)
	if !ok {
		return f
	}
	src, _ := field(f, "FileEmbedded1", "Contents", "Source").(string)
	return map[string]any{"path": node["Path"], "contents": src}
}

// writeMC writes a MachineConfig as the MCO's test helpers build it.
func writeMC(t *testing.T, dir string, mc mcArgs) string {
	return writeRoleMC(t, dir, mc, "")
}

// writeRoleMC writes a MachineConfig of a role (helpers.MCLabelForRole).
func writeRoleMC(t *testing.T, dir string, mc mcArgs, role string) string {
	t.Helper()
	ign := map[string]any{"ignition": map[string]any{"version": "3.5.0"}}
	var files []any
	for _, f := range mc.files {
		fm := ignFile(f.(map[string]any))
		files = append(files, map[string]any{"path": fm["path"], "mode": 0o644,
			"contents": map[string]any{"source": "data:," + url.PathEscape(str(fm["contents"])), "compression": ""}})
	}
	ign["storage"] = map[string]any{"files": files}
	var units []any
	for _, u := range mc.units {
		units = append(units, lowerKeys(u))
	}
	ign["systemd"] = map[string]any{"units": units}
	if len(mc.ssh) > 0 {
		ign["passwd"] = map[string]any{"users": []any{map[string]any{"name": "core", "sshAuthorizedKeys": mc.ssh}}}
	}
	doc := map[string]any{
		"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
		"metadata": map[string]any{"name": mc.name, "labels": map[string]any{"machineconfiguration.openshift.io/role": role}},
		"spec": map[string]any{"config": ign, "osImageURL": mc.osURL, "fips": mc.fips, "kernelArguments": mc.kargs,
			"kernelType": mc.kernelType, "extensions": mc.exts},
	}
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, mc.name+".json")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// renderSide renders MachineConfig files (every one, as the tables have
// no pool labels; pool selects by role otherwise).
func renderSide(t *testing.T, pool string, paths ...string) *Side {
	t.Helper()
	s, err := LoadInputs(context.Background(), strings.Join(paths, " "), render.Request{MachineConfigs: paths, Pool: pool}, "")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestCalculatePostConfigChangeActionTable runs every case of the MCO's
// TestCalculatePostConfigChangeAction through oslayer: both configs are
// written as MachineConfigs, rendered, diffed, and the daemon's
// first-boot actions compared with the table's.
func TestCalculatePostConfigChangeActionTable(t *testing.T) {
	e := newEval()
	const file = "TestCalculatePostConfigChangeAction.go.txt"
	evalVar(t, e, file, "files")
	cases := list(evalVar(t, e, file, "tests"))
	if len(cases) != 14 {
		t.Fatalf("%d cases, the MCO's table at 7ff337a4ffac has 14", len(cases))
	}
	for i, c := range cases {
		m := c.(map[string]any)
		t.Run(fmt.Sprintf("case#%d", i), func(t *testing.T) {
			dir := t.TempDir()
			old := renderSide(t, "", writeMC(t, filepath.Join(dir), m["oldConfig"].(mcArgs)))
			dir2 := t.TempDir()
			new := renderSide(t, "", writeMC(t, dir2, m["newConfig"].(mcArgs)))
			r, err := Compare(old, new, Options{})
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, a := range list(m["expectedAction"]) {
				want = append(want, str(a))
			}
			if got := r.Platform(PlatformOpenShift).LegacyActions; !slices.Equal(got, want) {
				t.Errorf("actions %v, the MCO: %v (change %+v)", got, want, r.MCO)
			}
		})
	}
}

// TestIsDrainRequiredTable runs every case of the MCO's TestIsDrainRequired
// (registries.conf changes under first-boot actions) through render and
// LegacyDrain.
func TestIsDrainRequiredTable(t *testing.T) {
	e := newEval()
	const file = "TestIsDrainRequired.go.txt"
	evalVar(t, e, file, "machineConfigs")
	cases := list(evalVar(t, e, file, "tests"))
	if len(cases) != 16 {
		t.Fatalf("%d cases, the MCO's table at 7ff337a4ffac has 16", len(cases))
	}
	for i, c := range cases {
		m := c.(map[string]any)
		t.Run(fmt.Sprintf("case#%d", i), func(t *testing.T) {
			old := renderSide(t, "", writeMC(t, t.TempDir(), m["oldConfig"].(mcArgs)))
			new := renderSide(t, "", writeMC(t, t.TempDir(), m["newConfig"].(mcArgs)))
			r, err := Compare(old, new, Options{})
			if err != nil {
				t.Fatal(err)
			}
			var actions []string
			for _, a := range list(m["actions"]) {
				actions = append(actions, str(a))
			}
			if got, want := LegacyDrain(actions, r), m["expectedAction"].(bool); got != want {
				t.Errorf("drain %v, the MCO: %v (actions %v, change %+v)", got, want, actions, r.MCO)
			}
		})
	}
}
