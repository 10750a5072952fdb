// Package node emulates an ostree node with Debian's ostree: oslayer's
// images become ostree commits the way ostree-ext imports a container
// image (layers in order, whiteouts applied, /etc moved to /usr/etc), a
// directory sysroot deploys image A, then B, then rolls back to A, and
// every step boots the way a node does (the prune unit's script, then
// systemd-tmpfiles with the stateroot's /var in place).
package node

import (
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/oslayer/oslayer/render/varmech"
	"github.com/oslayer/oslayer/test/fixtures"
	"github.com/oslayer/oslayer/test/oslayerbin"
	"github.com/oslayer/oslayer/test/ostreecommit"
	"github.com/oslayer/oslayer/test/regtest"
	"github.com/oslayer/oslayer/test/synth"
)

const osName = "fcos"

// mc is a worker MachineConfig with files and units (Ignition 3.4).
func mc(name, storage, units string) string {
	return `apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: ` + name + `
  labels:
    machineconfiguration.openshift.io/role: worker
spec:
  config:
    ignition:
      version: 3.4.0
    storage:
      files:
` + storage + `
    systemd:
      units:
` + units
}

func file(p, data string, mode int) string {
	return fmt.Sprintf("      - path: %s\n        mode: %d\n        overwrite: true\n        contents:\n          source: data:,%s\n",
		p, mode, strings.ReplaceAll(data, " ", "%20"))
}

// build builds oslayer's image of the MachineConfig files or directories
// into an OCI layout onto base and returns the layout directory.
func build(t *testing.T, bin, base string, inputs []string, flags ...string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out")
	args := []string{"build", "--base", "oci:" + base + ":latest", "--pool", "worker", "--push", "oci:" + out + ":pool"}
	for _, in := range inputs {
		args = append(args, "--machineconfig", in)
	}
	regtest.Run(t, nil, bin, append(args, flags...)...)
	return out
}

// buildDoc builds the image of one MachineConfig document.
func buildDoc(t *testing.T, bin, base, doc string) string {
	t.Helper()
	in := filepath.Join(t.TempDir(), "mc.yaml")
	if err := os.WriteFile(in, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return build(t, bin, base, []string{in})
}

// node is a directory sysroot with one stateroot.
type node struct {
	t                      *testing.T
	ostree, tmpfiles, root string
}

func (n node) stateVar() string { return filepath.Join(n.root, "ostree/deploy", osName, "var") }

// booted returns the default (first) deployment's directory.
func (n node) booted() string {
	n.t.Helper()
	out := regtest.Run(n.t, nil, n.ostree, "admin", "status", "--sysroot="+n.root)
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(l), "* "))
		if len(f) >= 2 && f[0] == osName {
			return filepath.Join(n.root, "ostree/deploy", osName, "deploy", f[1])
		}
	}
	n.t.Fatalf("no deployment in:\n%s", out)
	return ""
}

// deploy pulls branch from repo and deploys it as the new default; the
// new deployment's /etc is ostree's 3-way merge of the booted one's.
func (n node) deploy(repo, branch string) string {
	n.t.Helper()
	regtest.Run(n.t, nil, n.ostree, "--repo="+filepath.Join(n.root, "ostree/repo"), "pull-local", repo, branch)
	regtest.Run(n.t, nil, n.ostree, "admin", "deploy", "--sysroot="+n.root, "--os="+osName, branch)
	return n.booted()
}

// boot runs, in the default deployment with the stateroot's /var bind
// mounted on its /var and a tmpfs on /run (in a private mount namespace, as
// the node mounts them), what a node runs at boot: oslayer's prune script (its unit is
// statically enabled), then systemd-tmpfiles --create.
func (n node) boot() string {
	n.t.Helper()
	dep := n.booted()
	script := "mount --bind \"$1\" \"$2/var\" && mount -t tmpfs tmpfs \"$2/run\" && OSLAYER_ROOT=\"$2\" \"$2$3\" && \"$4\" --root=\"$2\" --create"
	regtest.Run(n.t, nil, "unshare", "-m", "sh", "-ec", script, "boot", n.stateVar(), dep, varmech.PruneScript, n.tmpfiles)
	return dep
}

// read returns the content of node path p in deployment dep, following
// symlinks inside the deployment and /var into the stateroot.
func (n node) read(dep, p string) (string, error) {
	for range 40 {
		host := n.host(dep, p)
		fi, err := os.Lstat(host)
		if err != nil {
			return "", err
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			b, err := os.ReadFile(host)
			return string(b), err
		}
		target, err := os.Readlink(host)
		if err != nil {
			return "", err
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(p), target)
		}
		p = filepath.Clean(target)
	}
	return "", fmt.Errorf("%s: symlink loop", p)
}

// host maps node path p (parents resolved) to the sysroot directory.
func (n node) host(dep, p string) string {
	// Resolve symlinks of the parents, as the kernel would.
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	cur := "/"
	for i, part := range parts {
		next := path.Join(cur, part)
		if i < len(parts)-1 {
			if target, err := os.Readlink(n.raw(dep, next)); err == nil {
				if !path.IsAbs(target) {
					target = path.Join(cur, target)
				}
				next = path.Clean(target)
			}
		}
		cur = next
	}
	return n.raw(dep, cur)
}

func (n node) raw(dep, p string) string {
	if p == "/var" || strings.HasPrefix(p, "/var/") {
		return filepath.Join(n.stateVar(), strings.TrimPrefix(p, "/var"))
	}
	return filepath.Join(dep, p)
}

func (n node) want(dep, p, data string) {
	n.t.Helper()
	got, err := n.read(dep, p)
	if err != nil {
		n.t.Errorf("%s: %v", p, err)
	} else if got != data {
		n.t.Errorf("%s: %q, want %q", p, got, data)
	}
}

func (n node) gone(dep, p string) {
	n.t.Helper()
	if _, err := os.Lstat(n.host(dep, p)); !os.IsNotExist(err) {
		n.t.Errorf("%s: still there (%v)", p, err)
	}
}

func (n node) enabled(dep, link string) bool {
	_, err := os.Lstat(filepath.Join(dep, link))
	return err == nil
}

// snapshot describes every entry under the stateroot's /var.
func (n node) snapshot() map[string]string {
	n.t.Helper()
	out := map[string]string{}
	root := n.stateVar()
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		desc := fmt.Sprintf("%v %d:%d", fi.Mode(), st.Uid, st.Gid)
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			desc += " -> " + target
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			desc += fmt.Sprintf(" %x", sha256.Sum256(b))
		}
		out["/var"+strings.TrimPrefix(p, root)] = desc
		return nil
	})
	if err != nil {
		n.t.Fatal(err)
	}
	return out
}

// owned returns the node paths the deployment's image lists as its own
// (varmech.ListPath: "KIND<TAB>PATH[<TAB>TARGET]").
func owned(t *testing.T, dep string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dep, varmech.ListPath))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Split(l, "\t"); len(f) >= 2 && !strings.HasPrefix(l, "#") {
			out = append(out, f[1])
		}
	}
	return out
}

// onlyOwnedChanged fails for every /var entry that changed between before
// and after, unless an image owns it (or it is a parent directory of an
// owned path, or the prune unit's state).
func onlyOwnedChanged(t *testing.T, step string, before, after map[string]string, ownedPaths ...[]string) {
	t.Helper()
	allowed := func(p string) bool {
		if p == "/var/lib/oslayer" || strings.HasPrefix(p, "/var/lib/oslayer/") {
			return true
		}
		for _, ps := range ownedPaths {
			for _, o := range ps {
				if p == o || strings.HasPrefix(o, p+"/") {
					return true
				}
			}
		}
		return false
	}
	for p, b := range before {
		if a, ok := after[p]; (!ok || a != b) && !allowed(p) {
			t.Errorf("%s: %s changed (%q -> %q), but no image owns it", step, p, b, a)
		}
	}
	for p, a := range after {
		if _, ok := before[p]; !ok && !allowed(p) {
			t.Errorf("%s: %s appeared (%q), but no image owns it", step, p, a)
		}
	}
}

// setup returns an initialised directory sysroot, the oslayer command and
// the FCOS-shaped base as an OCI layout.
func setup(t *testing.T) (node, string, string) {
	t.Helper()
	regtest.RequireRoot(t, "the ostree emulation keeps owners in a bare repository and bind-mounts /var")
	n := node{t: t, ostree: regtest.Require(t, "ostree"), tmpfiles: regtest.Require(t, "systemd-tmpfiles"),
		root: filepath.Join(t.TempDir(), "sysroot")}
	regtest.Require(t, "unshare")
	chattr := regtest.Require(t, "chattr")
	if err := os.Mkdir(n.root, 0o755); err != nil {
		t.Fatal(err)
	}
	// ostree makes every deployment immutable; let the test remove them.
	t.Cleanup(func() {
		ds, _ := filepath.Glob(filepath.Join(n.root, "ostree/deploy", osName, "deploy", "*.0"))
		for _, d := range ds {
			exec.Command(chattr, "-i", d).Run()
		}
	})
	regtest.Run(t, nil, n.ostree, "admin", "init-fs", n.root)
	regtest.Run(t, nil, n.ostree, "admin", "os-init", osName, "--sysroot="+n.root)
	base := filepath.Join(t.TempDir(), "base")
	synth.WriteBase(t, base, synth.Skeleton())
	return n, oslayerbin.Path(t), base
}

// repo returns a new bare repository to commit images into.
func (n node) repo() string {
	repo := filepath.Join(n.t.TempDir(), "repo")
	regtest.Run(n.t, nil, n.ostree, "--repo="+repo, "init", "--mode=bare")
	return repo
}

// TestOstreeDeployments deploys image A, then B, then rolls back to A.
func TestOstreeDeployments(t *testing.T) {
	n, bin, base := setup(t)
	const (
		chronyLink = "etc/systemd/system/multi-user.target.wants/chronyd.service"
		sshdLink   = "etc/systemd/system/multi-user.target.wants/sshd.service"
		zincati    = "etc/systemd/system/multi-user.target.wants/zincati.service"
		appLink    = "etc/systemd/system/multi-user.target.wants/app.service"
	)
	app := "        - name: app.service\n          enabled: true\n          contents: |\n            [Service]\n            ExecStart=/usr/bin/true\n            [Install]\n            WantedBy=multi-user.target\n"
	a := buildDoc(t, bin, base, mc("99-a",
		file("/etc/app.conf", "A", 420)+file("/var/lib/app/state", "state A", 384)+
			file("/opt/app/bin/tool", "tool A", 493)+file("/var/lib/app/only-a", "only A", 420),
		app+"        - name: chronyd.service\n          enabled: false\n"))
	b := buildDoc(t, bin, base, mc("99-b",
		file("/etc/app.conf", "B", 420)+file("/var/lib/app/state", "state B", 420)+
			file("/opt/app/bin/tool", "tool B", 493),
		app))

	repo := n.repo()
	ostreecommit.Commit(t, n.ostree, repo, a, osName+"/a")
	ostreecommit.Commit(t, n.ostree, repo, b, osName+"/b")

	// Image A.
	n.deploy(repo, osName+"/a")
	dep := n.boot()
	n.want(dep, "/etc/app.conf", "A")
	n.want(dep, "/var/lib/app/state", "state A")
	n.want(dep, "/opt/app/bin/tool", "tool A")
	n.want(dep, "/var/lib/app/only-a", "only A")
	if !n.enabled(dep, appLink) {
		t.Error("A: app.service is not enabled")
	}
	if !n.enabled(dep, sshdLink) {
		t.Error("A: the OS's sshd.service lost its enablement")
	}
	// A disables the OS's chronyd.service: its base link is whited out.
	if n.enabled(dep, chronyLink) {
		t.Error("A: chronyd.service, disabled by A, is enabled")
	}

	// Node-local state oslayer does not own.
	local := map[string]string{
		"/etc/admin.conf":          "admin\n",
		"/var/lib/other/data":      "other agent\n",
		"/var/opt/admin-tool":      "#!/bin/sh\n",
		"/var/home/core/notes.txt": "notes\n",
	}
	for p, data := range local {
		h := n.host(dep, p)
		if err := os.MkdirAll(filepath.Dir(h), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(h, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The admin edits an OS config file and disables an OS unit.
	chrony := "pool time.example.com iburst\n"
	if err := os.WriteFile(filepath.Join(dep, "etc/chrony.conf"), []byte(chrony), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dep, zincati)); err != nil {
		t.Fatal(err)
	}
	checkLocal := func(dep, step string) {
		t.Helper()
		for p, data := range local {
			n.want(dep, p, data)
		}
		n.want(dep, "/etc/chrony.conf", chrony)
		if n.enabled(dep, zincati) {
			t.Errorf("%s: zincati.service, disabled on the node, is enabled again", step)
		}
	}

	// Image B: the 3-way merge keeps the node's /etc edits; /var follows B.
	ownedA := owned(t, dep)
	if len(ownedA) < 3 {
		t.Fatalf("A owns only %v", ownedA)
	}
	before := n.snapshot()
	dep = n.deploy(repo, osName+"/b")
	dep = n.boot()
	ownedB := owned(t, dep)
	onlyOwnedChanged(t, "B", before, n.snapshot(), ownedA, ownedB)
	n.want(dep, "/etc/app.conf", "B")
	n.want(dep, "/var/lib/app/state", "state B")
	n.want(dep, "/opt/app/bin/tool", "tool B")
	n.gone(dep, "/var/lib/app/only-a")
	if !n.enabled(dep, appLink) || !n.enabled(dep, sshdLink) {
		t.Error("B: app.service or sshd.service is not enabled")
	}
	// B leaves chronyd.service alone: the OS's enablement comes back.
	if !n.enabled(dep, chronyLink) {
		t.Error("B: chronyd.service, which only A disabled, is not enabled")
	}
	checkLocal(dep, "B")

	// Roll back to A: drop B, A is the default again, and boots.
	before = n.snapshot()
	regtest.Run(t, nil, n.ostree, "admin", "undeploy", "--sysroot="+n.root, "0")
	dep = n.boot()
	onlyOwnedChanged(t, "rollback to A", before, n.snapshot(), ownedA, ownedB)
	n.want(dep, "/etc/app.conf", "A")
	n.want(dep, "/var/lib/app/state", "state A")
	n.want(dep, "/opt/app/bin/tool", "tool A")
	n.want(dep, "/var/lib/app/only-a", "only A")
	if n.enabled(dep, chronyLink) {
		t.Error("rollback to A: chronyd.service, disabled by A, is enabled")
	}
	checkLocal(dep, "rollback to A")
}

// checkImage verifies, in a booted deployment, what the image owns: every
// file in its var.list reads through /var as the store holds it, every
// link points where the image says, every directory exists, and /etc (with
// no node-local edits) is exactly the image's /usr/etc.
func (n node) checkImage(step, dep string) {
	n.t.Helper()
	b, err := os.ReadFile(filepath.Join(dep, varmech.ListPath))
	if err != nil {
		n.t.Fatal(err)
	}
	count := 0
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Split(l, "\t")
		if len(f) < 2 || strings.HasPrefix(l, "#") {
			continue
		}
		count++
		switch f[0] {
		case "f":
			want, err := os.ReadFile(filepath.Join(dep, varmech.StoreDir, f[1]))
			if err != nil {
				n.t.Errorf("%s: store copy of %s: %v", step, f[1], err)
				continue
			}
			n.want(dep, f[1], string(want))
		case "l":
			if target, err := os.Readlink(n.host(dep, f[1])); err != nil || len(f) < 3 || target != f[2] {
				n.t.Errorf("%s: link %s -> %q (%v), want %v", step, f[1], target, err, f[2:])
			}
		case "d":
			if fi, err := os.Stat(n.host(dep, f[1])); err != nil || !fi.IsDir() {
				n.t.Errorf("%s: directory %s: %v", step, f[1], err)
			}
		}
	}
	n.t.Logf("%s: %d /var entries checked", step, count)
	etc, usrEtc := treeOf(n.t, filepath.Join(dep, "etc")), treeOf(n.t, filepath.Join(dep, "usr/etc"))
	for p, d := range usrEtc {
		if etc[p] != d {
			n.t.Errorf("%s: /etc%s is %q, the image's default %q", step, p, etc[p], d)
		}
	}
	for p := range etc {
		if _, ok := usrEtc[p]; !ok {
			n.t.Errorf("%s: /etc%s is not in the image", step, p)
		}
	}
}

// treeOf describes every entry below dir (content of files, target of
// links, mode of all).
func treeOf(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		desc := fi.Mode().String()
		if fi.Mode()&os.ModeSymlink != 0 {
			target, _ := os.Readlink(p)
			desc += " -> " + target
		} else if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			desc += fmt.Sprintf(" %x", sha256.Sum256(b))
		}
		out[strings.TrimPrefix(p, dir)] = desc
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestOstreeRealPools deploys the MCO's AWS worker pool, then its GCP
// worker pool, then rolls back: real configurations with files under /var
// (kubelet, CNI, the pull secret), /etc, units and disabled OS units.
func TestOstreeRealPools(t *testing.T) {
	n, bin, base := setup(t)
	ssh := fixtures.Path(t, "mco", "misc", "99_openshift-machineconfig_worker.yaml")
	// The pull secret is compared like any file here (--skip secrets).
	aws := build(t, bin, base, []string{fixtures.Path(t, "mco", "aws", "worker"), ssh}, "--skip", "secrets")
	gcp := build(t, bin, base, []string{fixtures.Path(t, "mco", "gcp", "worker"), ssh}, "--skip", "secrets")
	repo := n.repo()
	ostreecommit.Commit(t, n.ostree, repo, aws, osName+"/aws")
	ostreecommit.Commit(t, n.ostree, repo, gcp, osName+"/gcp")

	n.deploy(repo, osName+"/aws")
	dep := n.boot()
	n.checkImage("aws", dep)
	ownedAWS := owned(t, dep)

	before := n.snapshot()
	n.deploy(repo, osName+"/gcp")
	dep = n.boot()
	n.checkImage("gcp", dep)
	ownedGCP := owned(t, dep)
	onlyOwnedChanged(t, "gcp", before, n.snapshot(), ownedAWS, ownedGCP)
	kept := map[string]bool{}
	for _, p := range ownedGCP {
		kept[p] = true
	}
	dropped := 0
	for _, p := range ownedAWS {
		if !kept[p] {
			dropped++
			n.gone(dep, p)
		}
	}
	t.Logf("aws owns %d /var paths, gcp %d; %d dropped", len(ownedAWS), len(ownedGCP), dropped)

	before = n.snapshot()
	regtest.Run(t, nil, n.ostree, "admin", "undeploy", "--sysroot="+n.root, "0")
	dep = n.boot()
	n.checkImage("rollback to aws", dep)
	onlyOwnedChanged(t, "rollback to aws", before, n.snapshot(), ownedAWS, ownedGCP)
}
