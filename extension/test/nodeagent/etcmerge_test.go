package nodeagent

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	fakedbus "github.com/gardener/gardener/pkg/nodeagent/dbus/fake"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/oslayer/oslayer/test/oslayerbin"
	"github.com/oslayer/oslayer/test/ostreecommit"
	"github.com/oslayer/oslayer/test/regtest"
	"github.com/oslayer/oslayer/test/synth"
)

const etcOS = "fcos"

// etcOSC is a reconcile OSC with /etc files and a unit; with removed, a
// file the next version drops.
func etcOSC(body string, removed bool) *extensionsv1alpha1.OperatingSystemConfig {
	inline := func(p, data string, mode uint32) extensionsv1alpha1.File {
		return extensionsv1alpha1.File{Path: p, Permissions: ptr.To(mode),
			Content: extensionsv1alpha1.FileContent{Inline: &extensionsv1alpha1.FileContentInline{Data: data}}}
	}
	osc := &extensionsv1alpha1.OperatingSystemConfig{
		TypeMeta:   metav1.TypeMeta{APIVersion: extensionsv1alpha1.SchemeGroupVersion.String(), Kind: "OperatingSystemConfig"},
		ObjectMeta: metav1.ObjectMeta{Name: "osc-worker", Namespace: "kube-system"},
		Spec: extensionsv1alpha1.OperatingSystemConfigSpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "coreos"},
			Purpose:     extensionsv1alpha1.OperatingSystemConfigPurposeReconcile,
			Units: []extensionsv1alpha1.Unit{{Name: "hello.service", Enable: ptr.To(true),
				Content:   ptr.To("[Unit]\nDescription=hello " + body + "\n[Service]\nExecStart=/usr/bin/true\n[Install]\nWantedBy=multi-user.target\n"),
				FilePaths: []string{"/etc/hello.conf"}}},
			Files: []extensionsv1alpha1.File{inline("/etc/hello.conf", body+"\n", 0o644), inline("/etc/hello/secret.conf", "key "+body+"\n", 0o600)},
		},
	}
	if removed {
		osc.Spec.Files = append(osc.Spec.Files, inline("/etc/hello/removed.conf", "gone next\n", 0o644))
	}
	return osc
}

// etcSysroot is a directory sysroot with one stateroot, deployed with
// Debian's ostree as a node deploys its image.
type etcSysroot struct {
	t            *testing.T
	ostree, root string
}

func newEtcSysroot(t *testing.T) *etcSysroot {
	s := &etcSysroot{t: t, ostree: regtest.Require(t, "ostree"), root: filepath.Join(t.TempDir(), "sysroot")}
	chattr := regtest.Require(t, "chattr")
	if err := os.Mkdir(s.root, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // ostree makes every deployment immutable
		ds, _ := filepath.Glob(filepath.Join(s.root, "ostree/deploy", etcOS, "deploy", "*.0"))
		for _, d := range ds {
			exec.Command(chattr, "-i", d).Run()
		}
	})
	regtest.Run(t, nil, s.ostree, "admin", "init-fs", s.root)
	regtest.Run(t, nil, s.ostree, "admin", "os-init", etcOS, "--sysroot="+s.root)
	return s
}

// deploy deploys branch of repo as the new default and returns its
// directory: its /etc is ostree's three-way merge of the booted
// deployment's (the node's /etc against its image's /usr/etc) onto the new
// image's /usr/etc.
func (s *etcSysroot) deploy(repo, branch string) string {
	s.t.Helper()
	regtest.Run(s.t, nil, s.ostree, "--repo="+filepath.Join(s.root, "ostree/repo"), "pull-local", repo, branch)
	regtest.Run(s.t, nil, s.ostree, "admin", "deploy", "--sysroot="+s.root, "--os="+etcOS, branch)
	out := regtest.Run(s.t, nil, s.ostree, "admin", "status", "--sysroot="+s.root)
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(l), "* ")); len(f) >= 2 && f[0] == etcOS {
			return filepath.Join(s.root, "ostree/deploy", etcOS, "deploy", f[1])
		}
	}
	s.t.Fatalf("no deployment in:\n%s", out)
	return ""
}

// buildOSCImage builds oslayer's image of osc onto base into an OCI layout.
func buildOSCImage(t *testing.T, bin, base string, osc *extensionsv1alpha1.OperatingSystemConfig) string {
	t.Helper()
	b, err := yaml.Marshal(osc)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	in := filepath.Join(dir, "osc.yaml")
	if err := os.WriteFile(in, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	regtest.Run(t, nil, bin, "build", "--base", "oci:"+base+":latest", "--pool", "worker", "--osc", in, "--push", "oci:"+out+":pool")
	return out
}

// etcState is every entry under the deployment's /etc: type, mode, owner,
// content or link target, and modification time (a rewrite of the same
// bytes shows).
func etcState(t *testing.T, dep string) map[string]string {
	t.Helper()
	st := map[string]string{}
	root := filepath.Join(dep, "etc")
	err := filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		sys := fi.Sys().(*syscall.Stat_t)
		v := fmt.Sprintf("%v %d:%d mtime %d", fi.Mode(), sys.Uid, sys.Gid, fi.ModTime().UnixNano())
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			v += " -> " + l
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			v += " " + string(b)
		}
		st[strings.TrimPrefix(p, dep)] = v
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// agreeWithImage: the node's /etc files of osc (written by the agent or
// merged by ostree) are the image's /usr/etc files, content and mode.
func agreeWithImage(t *testing.T, step, dep string, osc *extensionsv1alpha1.OperatingSystemConfig) {
	t.Helper()
	paths := []string{"/etc/systemd/system/hello.service"}
	for _, f := range osc.Spec.Files {
		paths = append(paths, f.Path)
	}
	for _, p := range paths {
		node, img := filepath.Join(dep, p), filepath.Join(dep, "usr", p)
		nb, nerr := os.ReadFile(node)
		ib, ierr := os.ReadFile(img)
		ni, _ := os.Stat(node)
		ii, _ := os.Stat(img)
		if nerr != nil || ierr != nil || string(nb) != string(ib) || ni.Mode() != ii.Mode() {
			t.Errorf("%s: %s on the node (%v, %v) and in the image (%v, %v) differ:\n%q\n%q", step, p, nerr, ni.Mode(), ierr, ii.Mode(), nb, ib)
		}
	}
}

// unitActions are the node agent's start, stop and restart actions of
// units since action from.
func unitActions(n *oscNode, from int) []fakedbus.SystemdAction {
	db := n.r.DBus.(*fakedbus.DBus)
	var out []fakedbus.SystemdAction
	for _, a := range db.Actions[from:] {
		if slices.Contains([]fakedbus.Action{fakedbus.ActionRestart, fakedbus.ActionStart, fakedbus.ActionStop}, a.Action) {
			out = append(out, a)
		}
	}
	return out
}

// TestEtcOnUpdate: an in-place update moves a node from image A (OSC v1)
// to image B (OSC v2) as gardener-node-agent does it: the agent writes
// v2's files onto the node running A (its last-applied state becomes v2),
// then the update deploys B, whose /etc is ostree's three-way merge
// (Debian's ostree). The merged /etc is B's /usr/etc for every file of the
// OSC (a file v2 drops is gone), and the agent, run again on B with its
// state in the shared /var, rewrites nothing in /etc and starts, stops or
// restarts no unit.
func TestEtcOnUpdate(t *testing.T) {
	regtest.RequireRoot(t, "ostree keeps owners in a bare repository")
	tmpfiles := regtest.Require(t, "systemd-tmpfiles")
	bin := oslayerbin.Path(t)
	base := filepath.Join(t.TempDir(), "base")
	synth.WriteBase(t, base, synth.Skeleton())
	v1, v2 := etcOSC("one", true), etcOSC("two", false)
	s := newEtcSysroot(t)
	repo := filepath.Join(t.TempDir(), "repo")
	regtest.Run(t, nil, s.ostree, "--repo="+repo, "init", "--mode=bare")
	ostreecommit.Commit(t, s.ostree, repo, buildOSCImage(t, bin, base, v1), etcOS+"/a")
	ostreecommit.Commit(t, s.ostree, repo, buildOSCImage(t, bin, base, v2), etcOS+"/b")

	// The node boots A; the agent applies v1: what it writes is A's.
	depA := s.deploy(repo, etcOS+"/a")
	regtest.Run(t, nil, tmpfiles, "--root="+depA, "--create", "--boot")
	a := agentOn(t, depA)
	if _, err := a.apply(v1); err != nil {
		t.Fatalf("v1 on A: %v", err)
	}
	if len(unitActions(a, 0)) == 0 {
		t.Fatalf("v1 on A started nothing: the agent did not apply it")
	}
	agreeWithImage(t, "v1 on A", depA, v1)

	// v2: the agent writes its files onto A (and restarts hello.service),
	// then the update deploys B.
	from := len(a.r.DBus.(*fakedbus.DBus).Actions)
	if _, err := a.apply(v2); err != nil {
		t.Fatalf("v2 on A: %v", err)
	}
	if len(unitActions(a, from)) == 0 {
		t.Fatalf("v2 on A restarted nothing: the changed unit should restart")
	}
	depB := s.deploy(repo, etcOS+"/b")
	// /var is the stateroot's, shared by every deployment: the agent's
	// state (its last-applied OSC) goes with the node.
	regtest.Run(t, nil, "cp", "-a", filepath.Join(depA, "var")+"/.", filepath.Join(depB, "var"))
	regtest.Run(t, nil, tmpfiles, "--root="+depB, "--create", "--boot")
	agreeWithImage(t, "B after the merge", depB, v2)
	if _, err := os.Lstat(filepath.Join(depB, "etc/hello/removed.conf")); !os.IsNotExist(err) {
		t.Errorf("B: the file v2 drops is still in /etc (%v)", err)
	}

	// The agent on B: its last-applied state is v2, the image is v2.
	before := etcState(t, depB)
	b := agentOn(t, depB)
	if _, err := b.apply(v2); err != nil {
		t.Fatalf("v2 on B: %v", err)
	}
	if acts := unitActions(b, 0); len(acts) > 0 {
		t.Errorf("the agent on B started, stopped or restarted units: %+v", acts)
	}
	after := etcState(t, depB)
	for p, v := range after {
		if before[p] != v {
			t.Errorf("the agent on B changed %s:\n%s\nwas\n%s", p, v, before[p])
		}
	}
	for p := range before {
		if _, ok := after[p]; !ok {
			t.Errorf("the agent on B removed %s", p)
		}
	}
}
