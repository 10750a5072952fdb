// Package depcheck checks that the packages of oslayer import each other
// in pipeline order: sources → render → assemble → packagestage → preflight →
// publish → sign → pipeline (the one build specification and the function
// that wires the stages), with the front-ends (fleet, controller, the CLI)
// above them and the plumbing under internal/ usable by all. A stage implements
// the small interfaces the build defines; it never reaches forward.
package depcheck

import (
	"bufio"
	"bytes"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/oslayer/oslayer"

// stages lists the folders of each stage, earliest first. A package
// belongs to the first entry that is its path or a parent of it.
var stages = [][]string{
	{"internal"},            // plumbing: references, mirrors, auth, transport
	{"sources"},             // Gardener OSC, MachineConfig, imageRef; the neutral model
	{"render"},              // placement, enablement, the /var mechanism, layers
	{"assemble"},            // the build state and its steps; the base index
	{"packagestage"},        // the package stage (implements assemble.PackageStage)
	{"preflight"},           // checks (implements assemble.Stage)
	{"publish"},             // push by digest, move the tag
	{"sign"},                // signatures, attestations, trust
	{"diff", "prune"},       // Day 2 and change analysis: read (prune: delete) what publish and sign wrote; neither imports the other
	{"pipeline"},            // the one build specification and the pipeline it runs
	{"api"},                 // the controller's API types
	{"fleet", "controller"}, // front-ends
	{"cmd"},
	{"examples"},
}

// rank returns the stage index of an oslayer package, -1 for a package
// outside the stages (test helpers).
func rank(pkg string) int {
	rel := strings.TrimPrefix(strings.TrimPrefix(pkg, module), "/")
	for i, folders := range stages {
		for _, f := range folders {
			if rel == f || strings.HasPrefix(rel, f+"/") {
				return i
			}
		}
	}
	return -1
}

// violations lists the imports that reach a later stage, or a front-end of
// the same rank (the fleet and the controller do not import each other).
func violations(imports map[string][]string) []string {
	var bad []string
	for pkg, deps := range imports {
		r := rank(pkg)
		if r < 0 {
			continue
		}
		for _, d := range deps {
			if !strings.HasPrefix(d, module) {
				continue
			}
			rd := rank(d)
			if r == 0 && rd != 0 {
				bad = append(bad, pkg+" (plumbing) imports "+d)
			} else if rd > r {
				bad = append(bad, pkg+" imports the later stage "+d)
			} else if rd == r && r > 0 && topFolder(pkg) != topFolder(d) && len(stages[r]) > 1 {
				bad = append(bad, pkg+" imports the front-end "+d)
			} else if rd < 0 {
				bad = append(bad, pkg+" imports the test helper "+d)
			}
		}
	}
	return bad
}

// buildFrontEnds are the front-ends that run builds: each hands the
// pipeline one specification (pipeline.New, Prepare, Run) and reads its
// result through the pipeline, so they import no stage, only what
// frontEndMay lists. The CLI's thin commands over one stage (render,
// verify, trust) import theirs and are not among them.
var buildFrontEnds = []string{"fleet", "controller", "extension"}

// frontEndMay are the folders a build front-end may import besides its
// own: the pipeline, the API types, Day 2 (diff, prune), the plumbing.
var frontEndMay = []string{"pipeline", "api", "diff", "prune", "internal"}

// stageImports lists the imports of a build front-end that reach past
// the pipeline into a stage.
func stageImports(imports map[string][]string) []string {
	var bad []string
	for pkg, deps := range imports {
		top := topFolder(pkg)
		if !slices.Contains(buildFrontEnds, top) {
			continue
		}
		for _, d := range deps {
			if !strings.HasPrefix(d, module+"/") || topFolder(d) == top {
				continue
			}
			if !slices.Contains(frontEndMay, topFolder(d)) {
				bad = append(bad, pkg+" (a front-end that runs builds) imports the stage "+d+": go through pipeline")
			}
		}
	}
	return bad
}

func topFolder(pkg string) string {
	rel := strings.TrimPrefix(strings.TrimPrefix(pkg, module), "/")
	top, _, _ := strings.Cut(rel, "/")
	return top
}

// listImports runs go list over the module: each package's non-test
// imports.
func listImports(t *testing.T) map[string][]string {
	return goList(t, ".", "./...")
}

// goList runs go list on patterns in dir (relative to the module's
// root): each package's non-test imports.
func goList(t *testing.T, dir string, patterns ...string) map[string][]string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	cmd := exec.Command("go", append([]string{"list", "-f", `{{.ImportPath}} {{join .Imports " "}}`}, patterns...)...)
	cmd.Dir = filepath.Join(root, dir)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	imports := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 0 {
			imports[f[0]] = f[1:]
		}
	}
	return imports
}

func TestPipelineOrder(t *testing.T) {
	imports := listImports(t)
	for _, must := range []string{"/sources/model", "/render", "/assemble", "/preflight", "/publish", "/sign", "/internal/registry"} {
		if _, ok := imports[module+must]; !ok {
			t.Fatalf("go list did not list %s%s: the stages moved, update stages", module, must)
		}
	}
	for _, v := range violations(imports) {
		t.Error(v)
	}
	for _, v := range stageImports(imports) {
		t.Error(v)
	}
}

// TestExtensionFrontEnd: the Gardener OS extension, a module of its own,
// runs builds through the pipeline too: its packages (not its tests)
// import no stage of the main module.
func TestExtensionFrontEnd(t *testing.T) {
	imports := goList(t, "extension", "./pkg/...", "./cmd/...")
	if _, ok := imports[module+"/extension/pkg/app"]; !ok {
		t.Fatalf("go list did not list %s/extension/pkg/app: the extension moved, update the test", module)
	}
	for _, v := range stageImports(imports) {
		t.Error(v)
	}
}

// The check itself finds each kind of violation.
func TestViolations(t *testing.T) {
	for name, imports := range map[string]map[string][]string{
		"assemble imports publish":    {module + "/assemble": {module + "/publish"}},
		"render imports assemble":     {module + "/render/systemd": {module + "/assemble/baseindex"}},
		"plumbing imports a stage":    {module + "/internal/registry": {module + "/sources/model"}},
		"fleet imports controller":    {module + "/fleet": {module + "/controller"}},
		"a stage imports test helper": {module + "/sign": {module + "/test/regtest"}},
	} {
		if len(violations(imports)) != 1 {
			t.Errorf("%s: not found", name)
		}
	}
	ok := map[string][]string{
		module + "/sign":             {module + "/publish", module + "/assemble", module + "/internal/registry", "fmt"},
		module + "/cmd/oslayer":      {module + "/fleet", module + "/controller"},
		module + "/sources/gardener": {module + "/sources/model"},
	}
	if v := violations(ok); len(v) != 0 {
		t.Errorf("allowed imports refused: %v", v)
	}
	if v := stageImports(map[string][]string{module + "/fleet": {module + "/assemble", module + "/sign", module + "/pipeline"}}); len(v) != 2 {
		t.Errorf("a front-end's stage imports: found %v, want assemble and sign", v)
	}
	if v := stageImports(map[string][]string{
		module + "/fleet":       {module + "/pipeline", module + "/internal/registry", module + "/diff", module + "/fleet/x"},
		module + "/cmd/oslayer": {module + "/sign", module + "/render"},
	}); len(v) != 0 {
		t.Errorf("allowed front-end imports refused: %v", v)
	}
}
