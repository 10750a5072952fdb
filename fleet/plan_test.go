package fleet

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestInheritance(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"common.yaml": "x", "a/w.yaml": "x", "mcs/00.yaml": "x", "key": "k"})
	plan := `
defaults:
  base: 127.0.0.1:5000/fcos:stable
  target: 127.0.0.1:5000/os/{cluster}/{pool}:v1
  osc: [common.yaml]
  preflight: {skip: [size], fatalWarnings: true}
clusters:
- name: a
  arch: aarch64
  signKey: key
  pools:
  - name: w
    osc: [a/w.yaml]
    preflight: {skip: [units], fatalWarnings: false}
  - name: infra
    base: 127.0.0.1:5000/fcos:next
    target: oci:out/{cluster}-{pool}
- name: b
  pools:
  - name: w
    machineConfig: [mcs]
`
	pools, err := Parse([]byte(plan), dir, "plan.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(pools) != 3 {
		t.Fatalf("%d pools, want 3", len(pools))
	}
	w := pools[0]
	if w.ID() != "a/w" || w.Path != "clusters[0].pools[0]" || w.Target != "127.0.0.1:5000/os/a/w:v1" || w.Arch != "aarch64" ||
		w.SignKey != filepath.Join(dir, "key") || w.Base != "127.0.0.1:5000/fcos:stable" {
		t.Errorf("a/w resolved to %+v", w)
	}
	if got := strings.Join(w.OSC, ","); got != filepath.Join(dir, "common.yaml")+","+filepath.Join(dir, "a/w.yaml") {
		t.Errorf("a/w osc = %s (lists add up, outermost first)", got)
	}
	if got := strings.Join(w.Preflight.Skip, ","); got != "size,units" || *w.Preflight.FatalWarnings {
		t.Errorf("a/w preflight = %+v", *w.Preflight)
	}
	infra := pools[1]
	if infra.Base != "127.0.0.1:5000/fcos:next" || infra.Target != "oci:"+filepath.Join(dir, "out")+"/a-infra" || infra.Index != 1 {
		t.Errorf("a/infra resolved to %+v", infra)
	}
	if b := pools[2]; b.Arch != "" || b.SignKey != "" || b.Target != "127.0.0.1:5000/os/b/w:v1" || len(b.MachineConfig) != 1 || len(b.OSC) != 1 {
		t.Errorf("b/w resolved to %+v", b)
	}
}

// TestPlanErrors: every error of the plan at once, each at its place.
func TestPlanErrors(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"osc.yaml": "x", "notadir": "x"})
	plan := `
defaults:
  target: 127.0.0.1:5000/os/{pool}
  osc: [osc.yaml]
  colour: blue
clusters:
- name: a
  base: "not a reference"
  pools:
  - name: w
  - name: w
    base: 127.0.0.1:5000/fcos:1
  - name: Bad_Name
    base: 127.0.0.1:5000/fcos:1
    target: 127.0.0.1:5000/os/x
- name: b
  secrets: notadir
  arch: sparc
  pools:
  - name: w
    base: 127.0.0.1:5000/fcos:1
    osc: [missing.yaml]
    baseIndex: sometimes
    signIdentity: 127.0.0.1:5000/os/w
    preflight: {skip: [nope], maxAddedBytes: lots, warnLayers: 60, maxLayers: 50}
  - name: x
    machineConfig: [mcs]
- name: a
  pools: []
`
	_, err := Parse([]byte(plan), dir, "plan.yaml")
	if err == nil {
		t.Fatal("no error")
	}
	// Unknown fields are found first, on their own.
	if !strings.Contains(err.Error(), "defaults.colour: unknown field") {
		t.Fatalf("error does not name defaults.colour:\n%v", err)
	}
	plan = strings.Replace(plan, "  colour: blue\n", "", 1)
	_, err = Parse([]byte(plan), dir, "plan.yaml")
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		`clusters[0].base: `,
		`clusters[0].pools[1].name: "w" is also the name of clusters[0].pools[0]`,
		`clusters[0].pools[1].target: 127.0.0.1:5000/os/w is also the target of clusters[0].pools[0]`,
		`clusters[0].pools[2].name: "Bad_Name"`,
		`clusters[1].secrets: `,
		`clusters[1].arch: "sparc"`,
		`clusters[1].pools[0].osc[0]: `,
		`clusters[1].pools[0].baseIndex: "sometimes"`,
		`clusters[1].pools[0].preflight.skip[0]: "nope": no such check`,
		`clusters[1].pools[0].preflight.maxAddedBytes: "lots"`,
		`clusters[1].pools[0].preflight.warnLayers: 60 must be below maxLayers 50`,
		`clusters[1].pools[0].signKey: signIdentity and signReferrers need signKey`,
		`clusters[1].pools[1].machineConfig[0]: `,
		`clusters[2].name: "a" is also the name of clusters[0]`,
		`clusters[2].pools: no pools`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not contain %q", want)
		}
	}
	if t.Failed() {
		t.Log(err)
	}
	var errs Errors
	if !asErrors(err, &errs) || len(errs) < 15 {
		t.Errorf("want every error listed, got %d", len(errs))
	}
}

func TestPlanWrongKinds(t *testing.T) {
	for plan, want := range map[string]string{
		"clusters: {a: 1}":                            "clusters: want a list",
		"clusters: [{name: a, pools: [{osc: x}]}]":    "clusters[0].pools[0].osc: want a list",
		"clusters: [{name: a, pools: [{name: [x]}]}]": "clusters[0].pools[0].name: want a string",
		"defaults: {bakeSecrets: yes please}":         "defaults.bakeSecrets: want true or false",
		"- a":                                         "the plan: want a mapping",
	} {
		_, err := Parse([]byte(plan), t.TempDir(), "plan.yaml")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", plan, err, want)
		}
	}
}

func asErrors(err error, out *Errors) bool {
	for err != nil {
		if e, ok := err.(Errors); ok {
			*out = e
			return true
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return false
		}
		err = u.Unwrap()
	}
	return false
}
