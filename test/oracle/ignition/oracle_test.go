// Package ignition holds the Ignition oracle test: every MachineConfig set
// the project has is merged the way the MachineConfig operator renders a
// pool and applied by the real ignition-apply (as OpenShift's on-cluster
// image build runs it) to an FCOS-shaped root; oslayer builds its image of
// the same set onto the same root as an OCI layout base. Both trees then
// boot the way a node does (enablement presets, systemd-tmpfiles), and what
// a node sees must agree, up to an exact list of expected differences per
// case (testdata/expected).
package ignition

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	mcfgv1 "github.com/openshift/api/machineconfiguration/v1"
	"sigs.k8s.io/yaml"

	"github.com/oslayer/oslayer/render/varmech"
	"github.com/oslayer/oslayer/test/oslayerbin"
	"github.com/oslayer/oslayer/test/regtest"
	"github.com/oslayer/oslayer/test/synth"
)

var update = flag.Bool("update", false, "rewrite testdata/expected from this run's differences")

// tools are the external programs the oracle runs.
type tools struct {
	ignition, systemctl, tmpfiles, umoci, oslayer string
}

func requireTools(t *testing.T) tools {
	t.Helper()
	// ignition-apply and umoci keep owners only as root.
	regtest.RequireRoot(t, "the Ignition oracle keeps owners and looks users up in a chroot")
	return tools{
		ignition:  regtest.Require(t, "ignition-apply"),
		systemctl: regtest.Require(t, "systemctl"),
		tmpfiles:  regtest.Require(t, "systemd-tmpfiles"),
		umoci:     regtest.Require(t, "umoci"),
		oslayer:   oslayerbin.Path(t),
	}
}

// TestSkeletonPresetsConsistent: the skeleton's enablement links are exactly
// what its presets give, so applying presets after ignition-apply changes
// only what the config asked for.
func TestSkeletonPresetsConsistent(t *testing.T) {
	tl := requireTools(t)
	root := t.TempDir()
	synth.WriteTree(t, root, synth.Skeleton())
	before := describe(t, root, nil)
	regtest.Run(t, nil, tl.systemctl, "--root="+root, "preset-all")
	if d := diffViews(before, describe(t, root, nil)); len(d) != 0 {
		t.Fatalf("presets change the skeleton:\n%s", strings.Join(d, "\n"))
	}
}

// TestIgnitionOracle runs every case and compares the two nodes.
func TestIgnitionOracle(t *testing.T) {
	tl := requireTools(t)
	cs := cases(t)
	if len(cs) < 40 {
		t.Errorf("only %d MachineConfig sets", len(cs))
	}
	base := filepath.Join(t.TempDir(), "base")
	synth.WriteBase(t, base, synth.Skeleton())
	ran, agree := 0, 0
	for _, c := range cs {
		t.Run(c.name, func(t *testing.T) {
			ran++
			got := compareCase(t, tl, base, c)
			checkExpected(t, c.name, got)
			if len(got) == 0 {
				agree++
			}
		})
	}
	t.Logf("Ignition oracle: %d of %d MachineConfig sets run, %d agree exactly, %d with listed differences", ran, len(cs), agree, ran-agree)
}

// compareCase builds both nodes for c and returns their differences.
func compareCase(t *testing.T, tl tools, base string, c mcCase) []string {
	work := t.TempDir()
	mcDir := filepath.Join(work, "mcs")
	mcs := c.write(t, mcDir)

	// The oracle: the MCO's merge, ignition-apply, presets, tmpfiles.
	oracle := filepath.Join(work, "oracle")
	synth.WriteTree(t, oracle, synth.Skeleton())
	var oracleErr error
	merged, err := mergeMachineConfigs(mcs)
	if err != nil {
		oracleErr = err
	} else {
		b, err := json.Marshal(merged)
		if err != nil {
			t.Fatal(err)
		}
		cfg := filepath.Join(work, "merged.ign")
		if err := os.WriteFile(cfg, b, 0o600); err != nil {
			t.Fatal(err)
		}
		oracleErr = ignitionApply(tl, oracle, cfg)
	}
	for p, want := range c.oracle {
		if got, err := os.ReadFile(filepath.Join(oracle, p)); err != nil || string(got) != want {
			t.Errorf("the oracle's node has %s = %q (%v), want %q", p, got, err, want)
		}
	}
	if oracleErr == nil {
		regtest.Run(t, nil, tl.systemctl, "--root="+oracle, "preset-all")
		regtest.Run(t, nil, tl.tmpfiles, "--root="+oracle, "--create")
	}

	// oslayer: build onto the skeleton, unpack, tmpfiles.
	layoutDir := filepath.Join(work, "out")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := []string{"build", "--base", "oci:" + base + ":latest", "--machineconfig", mcDir,
		"--pool", c.pool, "--push", "oci:" + layoutDir + ":pool", "--skip", "secrets",
		// ignition-apply writes the pull secret: bake it too, like for like
		// (a real build leaves it to the platform).
		"--bake-secrets"}
	if c.mcp != nil {
		args = append(args, "--machineconfigpool", c.writePool(t, filepath.Join(work, "pool.yaml")))
	}
	build := exec.CommandContext(ctx, tl.oslayer, args...)
	var stderr bytes.Buffer
	build.Stderr = &stderr
	buildErr := build.Run()

	switch {
	case oracleErr != nil && buildErr != nil:
		t.Logf("both refuse: oracle: %v; oslayer: %s", oracleErr, lastLine(stderr.String()))
		return nil
	case oracleErr != nil:
		return []string{"oracle refuses the set, oslayer builds it: " + firstLine(oracleErr.Error())}
	case buildErr != nil:
		t.Logf("oslayer build: %v\n%s", buildErr, stderr.String())
		return []string{"oslayer refuses the set: " + refusal(stderr.String())}
	}
	bundle := filepath.Join(work, "bundle")
	regtest.Run(t, nil, tl.umoci, "unpack", "--image", layoutDir+":pool", bundle)
	node := filepath.Join(bundle, "rootfs")
	regtest.Run(t, nil, tl.tmpfiles, "--root="+node, "--create")

	ov := describe(t, oracle, nil)
	pristine := filepath.Join(work, "pristine")
	synth.WriteTree(t, pristine, synth.Skeleton())
	regtest.Run(t, nil, tl.tmpfiles, "--root="+pristine, "--create")
	t.Logf("the config changes %d paths of the skeleton", len(diffViews(describe(t, pristine, nil), ov)))
	// A node rebased onto the image sees it as built; a node that boots it
	// first applies the presets. Both must see what the oracle's node sees.
	got := diffViews(ov, describe(t, node, oslayerOnly))
	regtest.Run(t, nil, tl.systemctl, "--root="+node, "preset-all")
	seen := map[string]bool{}
	for _, d := range got {
		seen[d] = true
	}
	for _, d := range diffViews(ov, describe(t, node, oslayerOnly)) {
		if !seen[d] {
			got = append(got, "after preset-all: "+d)
		}
	}
	return got
}

// ignitionApply runs the real ignition-apply the way the on-cluster build
// does: in a container (container=oci), offline, ignoring what cannot be
// applied to an image (users, disks, kernel arguments).
func ignitionApply(tl tools, root, cfg string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, tl.ignition, "--root", root, "--ignore-unsupported", "--offline", cfg)
	cmd.Env = append(os.Environ(), "container=oci")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("ignition-apply: %v: %s", err, critical(string(out)))
	}
	return nil
}

// critical returns ignition's CRITICAL log lines.
func critical(log string) string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "CRITICAL") {
			out = append(out, strings.TrimSpace(l))
		}
	}
	return strings.Join(out, "; ")
}

func firstLine(s string) string { return strings.SplitN(strings.TrimSpace(s), "\n", 2)[0] }

func lastLine(s string) string {
	ls := strings.Split(strings.TrimSpace(s), "\n")
	return ls[len(ls)-1]
}

// refusal is the stable part of oslayer's error: the message after the
// last document reference, without temporary paths.
func refusal(stderr string) string {
	l := lastLine(stderr)
	// A pool that needs the package stage is refused here whatever the
	// reason that follows (built without buildah's tags, or a layout
	// target): the difference is what it needs.
	if _, after, ok := strings.Cut(l, "needs the package stage ("); ok {
		if what, _, ok := strings.Cut(after, ")"); ok {
			return "needs the package stage (" + what + ")"
		}
	}
	if i := strings.LastIndex(l, ": "); i >= 0 {
		l = l[i+2:]
	}
	return l
}

// Paths that are oslayer's mechanism, not configuration (see docs/design.md,
// "Fidelity: the Ignition oracle"): its /var store, tmpfiles rules, prune unit and script,
// ownership manifest and kernel-argument file (the MCO applies kernel
// arguments at runtime).
var oslayerOnly = []string{
	"/usr/lib/oslayer",
	varmech.TmpfilesPath,
	"/usr/lib/systemd/system/" + varmech.PruneUnit,
	varmech.PruneWantsPath,
	varmech.PruneScript,
	"/usr/lib/bootc/kargs.d/10-oslayer.toml",
}

// presetFiles are the preset files Ignition and oslayer write for a
// configuration's enablement. describe compares their rules, one entry per
// unit under presetRules, not their names and comments.
var presetFiles = []string{"/etc/systemd/system-preset/20-ignition.preset", "/etc/systemd/system-preset/20-oslayer.preset"}

const presetRules = "/etc/systemd/system-preset/: preset rule for"

// view maps a node path to what the node sees there.
type view map[string]string

// describe walks root and describes every entry: type, mode, owner, the
// sha256 of a file, the target of a link. A link into oslayer's /var store
// is described by what it resolves to (the /var relocation is deliberate).
// Paths in skip and their subtrees are left out, and so are their parent
// directories that exist only for them.
func describe(t *testing.T, root string, skip []string) view {
	t.Helper()
	v := view{}
	skipped := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := "/" + strings.TrimPrefix(p, root)
		rel = filepath.Clean(rel)
		if rel == "/" {
			return nil
		}
		for _, s := range skip {
			if rel == s || strings.HasPrefix(rel, s+"/") {
				for a := filepath.Dir(rel); a != "/"; a = filepath.Dir(a) {
					skipped[a] = true
				}
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if strings.HasPrefix(target, varmech.StoreDir+"/") {
				st, err := os.Lstat(filepath.Join(root, target))
				if err != nil {
					v[rel] = "dangling store link -> " + target
					return nil
				}
				v[rel] = entryDesc(filepath.Join(root, target), st)
				return nil
			}
			// Debian's systemctl finds units under /lib/systemd first;
			// on a merged-/usr root /lib/X and /usr/lib/X are one file.
			if rest, ok := strings.CutPrefix(target, "/lib/"); ok {
				if l, err := os.Readlink(filepath.Join(root, "lib")); err == nil && l == "usr/lib" {
					target = "/usr/lib/" + rest
				}
			}
			v[rel] = "link -> " + target
			return nil
		}
		for _, pf := range presetFiles {
			if rel == pf {
				b, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				for _, l := range strings.Split(string(b), "\n") {
					f := strings.Fields(l)
					if len(f) < 2 || strings.HasPrefix(f[0], "#") {
						continue
					}
					rule := f[0]
					if len(f) > 2 {
						rule += " (instances " + strings.Join(f[2:], " ") + ")"
					}
					v[presetRules+" "+f[1]] = fmt.Sprintf("%s, file mode %04o", rule, fi.Mode().Perm())
				}
				return nil
			}
		}
		v[rel] = entryDesc(p, fi)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Deepest first, so a parent sees its children already marked.
	parents := make([]string, 0, len(skipped))
	for p := range skipped {
		parents = append(parents, p)
	}
	sort.Slice(parents, func(i, j int) bool { return len(parents[i]) > len(parents[j]) })
	for _, p := range parents {
		if !hasDescendant(v, p) {
			v[p] = "" // marker: present only for skipped paths
		}
	}
	return v
}

func hasDescendant(v view, dir string) bool {
	for p, d := range v {
		if d != "" && strings.HasPrefix(p, dir+"/") {
			return true
		}
	}
	return false
}

func entryDesc(p string, fi fs.FileInfo) string {
	uid, gid := owner(fi)
	mode := fi.Mode()
	perm := uint32(mode.Perm())
	if mode&fs.ModeSetuid != 0 {
		perm |= 0o4000
	}
	if mode&fs.ModeSetgid != 0 {
		perm |= 0o2000
	}
	if mode&fs.ModeSticky != 0 {
		perm |= 0o1000
	}
	switch {
	case fi.IsDir():
		return fmt.Sprintf("dir %04o %d:%d", perm, uid, gid)
	case mode.IsRegular():
		b, err := os.ReadFile(p)
		if err != nil {
			return "unreadable file: " + err.Error()
		}
		sum := sha256.Sum256(b)
		return fmt.Sprintf("file %04o %d:%d sha256:%s", perm, uid, gid, hex.EncodeToString(sum[:6]))
	default:
		return fmt.Sprintf("%v %d:%d", mode.Type(), uid, gid)
	}
}

// diffViews lists, sorted, every path where the two views differ.
func diffViews(oracle, node view) []string {
	var out []string
	seen := map[string]bool{}
	for _, v := range []view{oracle, node} {
		for p := range v {
			if seen[p] {
				continue
			}
			seen[p] = true
			o, ok1 := oracle[p]
			n, ok2 := node[p]
			if (ok1 && o == "") || (ok2 && n == "") {
				continue // a parent of the other side's mechanism
			}
			if ok1 && ok2 && o == n {
				continue
			}
			if !ok1 {
				o = "absent"
			}
			if !ok2 {
				n = "absent"
			}
			out = append(out, fmt.Sprintf("%s: ignition %s | oslayer %s", p, o, n))
		}
	}
	sort.Strings(out)
	return out
}

// expectedFile is where a case's expected differences are listed.
func expectedFile(name string) string {
	return filepath.Join("testdata", "expected", name+".txt")
}

// readExpected returns the listed differences of a case (comment lines,
// starting with "#", say why).
func readExpected(t *testing.T, name string) []string {
	t.Helper()
	b, err := os.ReadFile(expectedFile(name))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		out = append(out, l)
	}
	return out
}

// checkExpected fails on every difference not listed and every listed one
// that is gone, so the list shrinks as oslayer gets closer.
func checkExpected(t *testing.T, name string, got []string) {
	t.Helper()
	want := readExpected(t, name)
	if *update {
		writeExpected(t, name, got)
		return
	}
	wantSet := map[string]bool{}
	for _, w := range want {
		wantSet[w] = true
	}
	gotSet := map[string]bool{}
	for _, g := range got {
		gotSet[g] = true
		if !wantSet[g] {
			t.Errorf("new difference: %s", g)
		}
	}
	for _, w := range want {
		if !gotSet[w] {
			t.Errorf("listed difference is gone (remove it from %s): %s", expectedFile(name), w)
		}
	}
}

// writeExpected rewrites a case's list, keeping its comment lines.
func writeExpected(t *testing.T, name string, got []string) {
	t.Helper()
	p := expectedFile(name)
	var comments []string
	if b, err := os.ReadFile(p); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "#") {
				comments = append(comments, l)
			}
		}
	}
	if len(got) == 0 {
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		return
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	data := strings.Join(append(comments, got...), "\n") + "\n"
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// decodeMC reads one MachineConfig object.
func decodeMC(t *testing.T, b []byte) *mcfgv1.MachineConfig {
	t.Helper()
	mc := &mcfgv1.MachineConfig{}
	if err := yaml.Unmarshal(b, mc); err != nil {
		t.Fatal(err)
	}
	return mc
}
