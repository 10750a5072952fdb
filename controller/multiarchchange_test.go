package controller_test

import (
	"encoding/json"
	"os/exec"
	"reflect"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/oslayer/oslayer/api/v1alpha1"
	"github.com/oslayer/oslayer/controller"
	"github.com/oslayer/oslayer/diff"
	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/test/synth"
)

// pushBase pushes to ref an index of one synthetic base per architecture,
// of the scale given for it.
func (e *env) pushBase(t *testing.T, ref string, scales map[string]float64, arches ...string) {
	t.Helper()
	var adds []mutate.IndexAddendum
	for _, a := range arches {
		img, err := synth.ArchBase(a, scales[a])
		if err != nil {
			t.Fatal(err)
		}
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			MediaType: types.OCIManifestSchema1, Platform: &v1.Platform{OS: "linux", Architecture: a}}})
	}
	idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), adds...)
	if _, err := synth.PushIndex(e.ctx, idx, e.reg.Host+ref); err != nil {
		t.Fatal(err)
	}
}

// updateSpec changes the spec of PoolImage name.
func (e *env) updateSpec(t *testing.T, name string, mod func(*v1alpha1.PoolImageSpec)) {
	t.Helper()
	pi := e.get(t, name)
	mod(&pi.Spec)
	if err := e.c.Update(e.ctx, pi); err != nil {
		t.Fatal(err)
	}
}

// TestMultiArchChange: a PoolImage with arch [amd64, arm64] moves to a
// base whose amd64 image is the same and whose arm64 image differs. The
// amd64 images built are the same (the status's inputs and base digests,
// the first platform's, do not change), the arm64 ones differ: the
// change analysis compares both architectures, status.change says reboot
// (bootc and gardener naming arm64 and its base), and the new index is
// published (not held back as NoNodeChange). A PoolImage with arch
// [arm64] alone (one image, not an index) analyses the same move as one
// diff of the two images, as before. A PoolImage whose arch [amd64]
// becomes [amd64, arm64] (the same amd64 image in an index) publishes the
// index: arm64 is added, a reboot.
func TestMultiArchChange(t *testing.T) {
	e := newEnv(t)
	e.runManager(t, nil)
	e.pushBase(t, "/fcos/multi:one", map[string]float64{"amd64": 0.0002, "arm64": 0.0002}, "amd64", "arm64")
	e.pushBase(t, "/fcos/multi:two", map[string]float64{"amd64": 0.0002, "arm64": 0.0003}, "amd64", "arm64")
	e.create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "osc", Namespace: e.ns}, Data: oscSecret("multi")})
	for name, arch := range map[string][]string{"multi": {"amd64", "arm64"}, "single": {"arm64"}, "grow": {"amd64"}} {
		pi := e.poolImage(name, v1alpha1.Source{Gardener: &v1alpha1.GardenerSource{SecretName: "osc"}})
		pi.Spec.Base, pi.Spec.Arch = e.host+"/fcos/multi:one", arch
		e.create(t, pi)
	}
	first := map[string]*v1alpha1.PoolImage{}
	for _, name := range []string{"multi", "single", "grow"} {
		first[name] = e.wait(t, name, "the first image", func(pi *v1alpha1.PoolImage) bool { return ready(pi) && pi.Status.Published != nil })
		e.updateSpec(t, name, func(s *v1alpha1.PoolImageSpec) {
			if name == "grow" {
				s.Arch = []string{"amd64", "arm64"}
			} else {
				s.Base = e.host + "/fcos/multi:two"
			}
		})
	}

	pi := e.newBuild(t, "multi", "the arm64 base change", []string{first["multi"].Status.Image}, func(*v1alpha1.PoolImage) bool { return true })
	if f := first["multi"].Status; pi.Status.InputsDigest != f.InputsDigest || pi.Status.BaseDigest != f.BaseDigest {
		t.Fatalf("the amd64 image changed (inputs %s → %s, base %s → %s): the test needs it unchanged", f.InputsDigest, pi.Status.InputsDigest, f.BaseDigest, pi.Status.BaseDigest)
	}
	ch := pi.Status.Change
	want := []v1alpha1.ArchChange{{Architecture: "amd64", Action: "none"}, {Architecture: "arm64", Action: "reboot"}}
	if len(ch.Architectures) != 2 || ch.Architectures[0] != want[0] || ch.Architectures[1].Action != "reboot" || ch.Architectures[1].Architecture != "arm64" ||
		ch.Architectures[1].DownloadBytes <= 0 || ch.DownloadBytes != ch.Architectures[1].DownloadBytes {
		t.Errorf("status.change.architectures %+v, want %+v (arm64 with a download, the sum of them)", ch.Architectures, want)
	}
	for _, name := range []string{"bootc", "gardener"} {
		if p := platform(t, ch, name); p.Action != "reboot" || !strings.HasPrefix(p.Why, "arm64: base") {
			t.Errorf("status.change platform %s: %+v, want reboot for arm64's base", name, p)
		}
	}
	if ch.Action != "reboot" || !ch.Base || ch.Error != "" || ch.PathsTotal != 0 {
		t.Errorf("status.change %+v", ch)
	}
	if p := pi.Status.Published; p.Image != pi.Status.Image || p.Decision != v1alpha1.DecisionBuilt {
		t.Errorf("status.published %+v, want the new index %s (Built)", p, pi.Status.Image)
	}

	checkDiffCLI(t, first["multi"].Status.Image, pi.Status.Image)

	pi = e.newBuild(t, "single", "the arm64 base change", []string{first["single"].Status.Image}, func(*v1alpha1.PoolImage) bool { return true })
	from, to := first["single"].Status.Image, pi.Status.Image
	reg := &registry.Options{Insecure: []string{e.host}}
	arm64 := &v1.Platform{OS: "linux", Architecture: "arm64"}
	var sides [2]*diff.Side
	for i, ref := range []string{from, to} {
		s, err := diff.LoadImage(e.ctx, reg, ref, arm64)
		if err != nil {
			t.Fatal(err)
		}
		sides[i] = s
	}
	res, err := diff.Compare(sides[0], sides[1], diff.Options{})
	if err != nil {
		t.Fatal(err)
	}
	wantCh := controller.Summarize(from, to, res)
	// A Gardener source: the headline is the node agent's action.
	wantCh.Action, wantCh.ActionPlatform = platform(t, wantCh, "gardener").Action, "gardener"
	if !reflect.DeepEqual(pi.Status.Change, wantCh) || wantCh.Action != "reboot" {
		t.Errorf("single-arch status.change\n%+v\nwant the one diff of the two images\n%+v", pi.Status.Change, wantCh)
	}
	if p := pi.Status.Published; p.Image != to {
		t.Errorf("single-arch status.published %+v, want %s", p, to)
	}

	e.checkGrown(t, first["grow"])
}

// checkGrown checks the change from one amd64 image to an index of the
// same amd64 image and an arm64 one: arm64 added, a reboot, published.
func (e *env) checkGrown(t *testing.T, first *v1alpha1.PoolImage) {
	t.Helper()
	pi := e.newBuild(t, "grow", "the arm64 image added", []string{first.Status.Image}, func(*v1alpha1.PoolImage) bool { return true })
	ch := pi.Status.Change
	if len(ch.Architectures) != 2 || ch.Architectures[0] != (v1alpha1.ArchChange{Architecture: "amd64", Action: "none"}) ||
		!ch.Architectures[1].Added || ch.Architectures[1].Action != "reboot" || ch.Architectures[1].DownloadBytes <= 0 || ch.Action != "reboot" {
		t.Errorf("status.change %+v", ch)
	}
	if p := platform(t, ch, "bootc"); p.Action != "reboot" || !strings.HasPrefix(p.Why, "arm64: not in the published image") {
		t.Errorf("status.change platform bootc %+v", p)
	}
	if p := pi.Status.Published; p.Image != pi.Status.Image || p.Decision != v1alpha1.DecisionBuilt {
		t.Errorf("status.published %+v, want the index %s (Built)", p, pi.Status.Image)
	}
}

// checkDiffCLI: oslayer diff of two multi-platform images compares each
// architecture, says so, shows arm64's result (the reboot) and gates on
// it; with --arch amd64 it compares amd64 alone.
func checkDiffCLI(t *testing.T, from, to string) {
	t.Helper()
	out := runOslayer(t, 1, "diff", from, to, "--fail-on", "reboot")
	t.Logf("oslayer diff:\n%s", out)
	if !strings.Contains(out, "compared each architecture OLD has too (amd64 none, arm64 reboot); shown: arm64") || !strings.Contains(out, "predicted action reboot is at least --fail-on reboot") {
		t.Errorf("oslayer diff %s %s:\n%s", from, to, out)
	}
	checkDiffJSON(t, from, to)
	out = runOslayer(t, 0, "diff", from, to, "--arch", "amd64", "--fail-on", "soft-reboot")
	if strings.Contains(out, "compared each architecture") {
		t.Errorf("oslayer diff --arch amd64 %s %s:\n%s", from, to, out)
	}
}

// checkDiffJSON: -o json of the same two images lists each architecture's
// action and marks arm64's, the most disruptive, as the result shown.
func checkDiffJSON(t *testing.T, from, to string) {
	t.Helper()
	out, err := exec.Command(oslayerCmd(t), "diff", from, to, "-o", "json").Output()
	if err != nil {
		t.Fatalf("oslayer diff -o json: %v", err)
	}
	var res diff.Result
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("oslayer diff -o json: %v\n%s", err, out)
	}
	as := res.Architectures
	if len(as) != 2 || as[0].Architecture != "amd64" || as[0].Action != diff.None || as[0].Shown ||
		as[1].Architecture != "arm64" || as[1].Action != diff.Reboot || !as[1].Shown || as[1].DownloadBytes <= 0 || res.Action != diff.Reboot {
		t.Errorf("oslayer diff -o json: action %s, architectures %+v", res.Action, as)
	}
}
