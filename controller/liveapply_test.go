package controller_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"os/exec"
	"strings"
	"testing"

	mcfgv1 "github.com/openshift/api/machineconfiguration/v1"
	opv1 "github.com/openshift/api/operator/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/oslayer/oslayer/api/v1alpha1"
	"github.com/oslayer/oslayer/controller"
	"github.com/oslayer/oslayer/pipeline/settings"
)

// replaceFile is the Ignition config raw with the contents of the file at
// path replaced.
func replaceFile(t *testing.T, raw runtime.RawExtension, path, content string) runtime.RawExtension {
	t.Helper()
	var cfg map[string]any
	if err := json.Unmarshal(raw.Raw, &cfg); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, f := range cfg["storage"].(map[string]any)["files"].([]any) {
		if f := f.(map[string]any); f["path"] == path {
			f["contents"] = map[string]any{"source": "data:," + url.PathEscape(content)}
			found = true
		}
	}
	if !found {
		t.Fatalf("the config has no file %s", path)
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return runtime.RawExtension{Raw: b}
}

// withSSHKey is the Ignition config raw with core's SSH keys set to key.
func withSSHKey(t *testing.T, raw runtime.RawExtension, key string) runtime.RawExtension {
	t.Helper()
	var cfg map[string]any
	if err := json.Unmarshal(raw.Raw, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["passwd"] = map[string]any{"users": []any{map[string]any{"name": "core", "sshAuthorizedKeys": []any{key}}}}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return runtime.RawExtension{Raw: b}
}

// changePool changes the pool's MachineConfig 00-POOL and renders it.
func (e *env) changePool(t *testing.T, mco *fakeMCO, mod func(*mcfgv1.MachineConfigSpec)) {
	t.Helper()
	var src mcfgv1.MachineConfig
	if err := e.c.Get(context.Background(), client.ObjectKey{Name: "00-" + mco.pool}, &src); err != nil {
		t.Fatal(err)
	}
	mod(&src.Spec)
	if err := e.c.Update(context.Background(), &src); err != nil {
		t.Fatal(err)
	}
	mco.render(t)
}

// newBuild waits for a new build (not one of seen) whose change is
// analysed and for which ok holds, and returns the PoolImage.
func (e *env) newBuild(t *testing.T, name, what string, seen []string, ok func(*v1alpha1.PoolImage) bool) *v1alpha1.PoolImage {
	t.Helper()
	return e.wait(t, name, what, func(pi *v1alpha1.PoolImage) bool {
		for _, s := range seen {
			if pi.Status.Image == s {
				return false
			}
		}
		return ready(pi) && pi.Status.Published != nil && pi.Status.Change != nil && pi.Status.Change.To == pi.Status.Image && ok(pi)
	})
}

func platform(t *testing.T, ch *v1alpha1.ImageChange, name string) v1alpha1.PlatformAction {
	t.Helper()
	for _, p := range ch.Platforms {
		if p.Platform == name {
			return p
		}
	}
	t.Fatalf("status.change has no platform %s: %+v", name, ch.Platforms)
	return v1alpha1.PlatformAction{}
}

func changedPath(ch *v1alpha1.ImageChange, path string) *v1alpha1.ChangedPath {
	for i := range ch.Paths {
		if ch.Paths[i].Path == path {
			return &ch.Paths[i]
		}
	}
	return nil
}

func decided(decision string) func(*v1alpha1.PoolImage) bool {
	return func(pi *v1alpha1.PoolImage) bool { return pi.Status.Published.Decision == decision }
}

// TestLiveApply runs an OpenShift pool with spec.publish.machineConfig
// (the real MachineConfig, MachineConfigPool and MachineConfiguration
// CRDs, a real registry, the controller as its ServiceAccount): a new SSH
// key builds an image that changes no node path (NoNodeChange: nothing
// new published); a rotated pull secret (the daemon's policy: None) builds and signs a new
// image but the osImageURL MachineConfig and the ConfigMap keep the first
// (status.published LiveApplied, status.change with the action per
// platform, the download and the path with its source, an Event
// PublishHeld); a MachineConfiguration "cluster" policy that makes a
// directory None is honoured for a file under it; a file no policy names
// (reboot) publishes at once, and so do new kernel arguments. oslayer
// history lists the builds and the pin command, and oslayer diff compares
// two of its entries read from the cluster; an index past the history
// exits 2 naming it.
func TestLiveApply(t *testing.T) {
	e := newEnv(t)
	e.runManagerAs(t, e.asServiceAccount(t), nil)
	pool := e.ns
	mco, _ := e.openShiftPool(t, pool, realRendered(t))
	mcName := controller.PublishedMachineConfigName(pool)
	pi := e.poolImage("pool", v1alpha1.Source{OpenShift: &v1alpha1.OpenShiftSource{MachineConfigPool: pool}})
	pi.Spec.Publish = &v1alpha1.Publish{MachineConfig: &v1alpha1.PublishMachineConfig{}, ConfigMap: "pool-image"}
	pi.Spec.Preflight = &settings.Preflight{AllowSecrets: []string{kubeletSecret}}
	e.create(t, pi)
	pi = e.wait(t, "pool", "the first image", func(pi *v1alpha1.PoolImage) bool { return ready(pi) && pi.Status.Published != nil })
	first := pi.Status.Image
	if p := pi.Status.Published; p.Image != first || p.Decision != v1alpha1.DecisionBuilt {
		t.Fatalf("status.published %+v, want %s", p, first)
	}
	e.published(t, mcName, pool, first)

	// A new SSH key for core: the daemon writes it (policy None) and no
	// image carries it: a new image (its inputs digest covers the pool's
	// MachineConfigs) without a changed path, not published.
	e.changePool(t, mco, func(s *mcfgv1.MachineConfigSpec) {
		s.Config = withSSHKey(t, s.Config, "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOslayerLiveApply core@new")
	})
	pi = e.newBuild(t, "pool", "an SSH key build", []string{first}, decided(v1alpha1.DecisionNoNodeChange))
	sshKey := pi.Status.Image
	t.Logf("SSH key: built %s, published %s (%s)", sshKey, pi.Status.Published.Image, pi.Status.Published.Message)
	if pi.Status.Published.Image != first || pi.Status.Change.PathsTotal != 0 || len(pi.Status.Builds) != 2 {
		t.Errorf("an SSH key change: published %+v, change %+v", pi.Status.Published, pi.Status.Change)
	}
	liveHeadline(t, "an SSH key", pi.Status.Change)
	e.published(t, mcName, pool, first)

	// The cluster's pull secret rotates: built and signed, not published.
	e.changePool(t, mco, func(s *mcfgv1.MachineConfigSpec) {
		s.Config = replaceFile(t, s.Config, "/var/lib/kubelet/config.json", `{"auths":{"quay.io":{"auth":"cm90YXRlZDpzZWNyZXQ="}}}`)
	})
	pi = e.newBuild(t, "pool", "a held build", []string{first, sshKey}, decided(v1alpha1.DecisionLiveApplied))
	second := pi.Status.Image
	ch := pi.Status.Change
	t.Logf("held: %s\nchange: %+v", pi.Status.Published.Message, *ch)
	if pi.Status.Published.Image != first || ch.From != first || ch.To != second || ch.DownloadBytes <= 0 || ch.DownloadLayers < 1 {
		t.Errorf("status.published %+v, change %+v", pi.Status.Published, ch)
	}
	if p := platform(t, ch, "openshift"); p.Action != "none" || !p.Applies {
		t.Errorf("openshift prediction %+v, want none", p)
	}
	if p := platform(t, ch, "openshift-image"); p.Action != "reboot" {
		t.Errorf("openshift-image prediction %+v, want reboot", p)
	}
	liveHeadline(t, "a pull secret", ch)
	if cp := changedPath(ch, "/var/lib/kubelet/config.json"); cp == nil || cp.Change != "changed" ||
		!strings.Contains(cp.Source, "(MachineConfig 00-"+pool+")") || !strings.Contains(cp.Source, "spec.config.storage.files[") {
		t.Errorf("changed paths %+v: no /var/lib/kubelet/config.json with its source", ch.Paths)
	}
	e.verify(t, second)
	e.published(t, mcName, pool, first)
	held := false
	for _, ev := range e.events(t, "pool")["PublishHeld"] {
		held = held || strings.Contains(ev.Note, "keeps "+first+": built "+second+"; the machine-config daemon applies the change in place")
	}
	if !held {
		t.Errorf("no PublishHeld Event for %s: %+v", second, e.events(t, "pool")["PublishHeld"])
	}

	// The cluster's policy makes /etc/oslayer-live None: a file there is
	// held too; the change since the published image has both files.
	policy := &opv1.MachineConfiguration{ObjectMeta: metav1.ObjectMeta{Name: controller.ClusterPolicyName},
		Spec: opv1.MachineConfigurationSpec{StaticPodOperatorSpec: opv1.StaticPodOperatorSpec{OperatorSpec: opv1.OperatorSpec{ManagementState: opv1.Managed}},
			NodeDisruptionPolicy: opv1.NodeDisruptionPolicyConfig{Files: []opv1.NodeDisruptionPolicySpecFile{{Path: "/etc/oslayer-live",
				Actions: []opv1.NodeDisruptionPolicySpecAction{{Type: opv1.NoneSpecAction}}}},
				SSHKey: opv1.NodeDisruptionPolicySpecSSHKey{Actions: []opv1.NodeDisruptionPolicySpecAction{{Type: opv1.NoneSpecAction}}}}}}
	e.create(t, policy)
	t.Cleanup(func() { _ = e.c.Delete(context.Background(), policy) })
	e.changePool(t, mco, func(s *mcfgv1.MachineConfigSpec) {
		s.Config = withFile(t, s.Config, "/etc/oslayer-live/pool.conf", "live")
	})
	pi = e.newBuild(t, "pool", "a build held by the cluster's policy", []string{first, sshKey, second}, decided(v1alpha1.DecisionLiveApplied))
	third, ch := pi.Status.Image, pi.Status.Change
	if p := platform(t, ch, "openshift"); ch.From != first || changedPath(ch, "/etc/oslayer-live/pool.conf") == nil || changedPath(ch, "/var/lib/kubelet/config.json") == nil ||
		p.Action != "none" || !strings.Contains(p.Why, "MachineConfiguration cluster") || pi.Status.Published.Image != first {
		t.Errorf("status.published %+v, change %+v", pi.Status.Published, ch)
	}
	e.published(t, mcName, pool, first)
	seen := []string{first, sshKey, second, third}

	// policy.json (the daemon reloads crio) and a registries.conf mirror
	// that pulls by digest only (reload crio, no drain): held, and the
	// headline is the daemon's reload, not the reboot of a new osImageURL.
	for _, c := range []struct{ what, path, content string }{
		{"policy.json", "/etc/containers/policy.json", `{"default":[{"type":"reject"}],"transports":{"docker":{"quay.io":[{"type":"insecureAcceptAnything"}]}}}`},
		{"a registries.conf mirror", "/etc/containers/registries.conf", "unqualified-search-registries = ['registry.access.redhat.com', 'docker.io']\n\n" +
			"[[registry]]\nlocation = \"quay.io/openshift-release-dev\"\n\n[[registry.mirror]]\nlocation = \"mirror.example.com/ocp\"\npull-from-mirror = \"digest-only\"\n"},
	} {
		e.changePool(t, mco, func(s *mcfgv1.MachineConfigSpec) { s.Config = replaceFile(t, s.Config, c.path, c.content) })
		pi = e.newBuild(t, "pool", c.what+" build", seen, decided(v1alpha1.DecisionLiveApplied))
		seen = append(seen, pi.Status.Image)
		liveHeadline(t, c.what, pi.Status.Change)
		if p := platform(t, pi.Status.Change, "openshift"); p.Action != "reload" || changedPath(pi.Status.Change, c.path) == nil {
			t.Errorf("%s: openshift %+v, paths %+v", c.what, p, pi.Status.Change.Paths)
		}
	}
	e.published(t, mcName, pool, first)

	// A file no policy names: the daemon reboots, published at once.
	e.changePool(t, mco, func(s *mcfgv1.MachineConfigSpec) {
		s.Config = withFile(t, s.Config, "/etc/oslayer-reboot.conf", "reboot")
	})
	pi = e.newBuild(t, "pool", "a build published at once", seen, decided(v1alpha1.DecisionBuilt))
	fourth := pi.Status.Image
	if c := pi.Status.Change; c.Action != "reboot" || c.ActionPlatform != "openshift" {
		t.Errorf("a reboot-class change's headline: action %q on %q, want reboot on openshift", c.Action, c.ActionPlatform)
	}
	if p := platform(t, pi.Status.Change, "openshift"); pi.Status.Published.Image != fourth || p.Action != "reboot" ||
		changedPath(pi.Status.Change, "/etc/oslayer-reboot.conf") == nil || !strings.Contains(pi.Status.Published.Message, "reboots") {
		t.Errorf("status.published %+v, openshift %+v", pi.Status.Published, p)
	}
	e.published(t, mcName, pool, fourth)

	// New kernel arguments: published at once.
	e.changePool(t, mco, func(s *mcfgv1.MachineConfigSpec) { s.KernelArguments = append(s.KernelArguments, "oslayer.live=1") })
	pi = e.newBuild(t, "pool", "a kernel arguments build", append(seen, fourth), decided(v1alpha1.DecisionBuilt))
	fifth := pi.Status.Image
	if !pi.Status.Change.KernelArgs || pi.Status.Published.Image != fifth || !strings.Contains(pi.Status.Published.Message, "kernel arguments") {
		t.Errorf("status.published %+v, change %+v", pi.Status.Published, pi.Status.Change)
	}
	e.published(t, mcName, pool, fifth)
	if pi := e.get(t, "pool"); !strings.Contains(pi.Status.Published.Message, "kernel arguments") {
		t.Errorf("after publishing, status.published lost its reason: %+v", pi.Status.Published)
	}
	e.historyCLI(t, []string{fifth, fourth, seen[5], seen[4], third})
}

// liveHeadline checks that a change the machine-config daemon applies in
// place has its live action as status.change.action (on openshift, the
// platform spec.publish.machineConfig hands the image to), not the
// reboot of the openshift-image platform.
func liveHeadline(t *testing.T, what string, ch *v1alpha1.ImageChange) {
	t.Helper()
	p := platform(t, ch, "openshift")
	if ch.Action != p.Action || ch.ActionPlatform != "openshift" || ch.Action == "reboot" {
		t.Errorf("%s: status.change.action %q on %q, want the daemon's %q on openshift", what, ch.Action, ch.ActionPlatform, p.Action)
	}
}

// historyCLI runs oslayer history and oslayer diff on the PoolImage
// "pool" whose status.builds are images (newest first).
func (e *env) historyCLI(t *testing.T, images []string) {
	t.Helper()
	kc := e.kubeconfig(t)
	out := runOslayer(t, 0, "history", e.ns+"/pool", "--kubeconfig", kc)
	t.Logf("oslayer history:\n%s", out)
	for _, want := range []string{digestOf(images[0]) + "  ", "built, published", "action reboot on openshift", "kubectl -n " + e.ns + " patch poolimage pool --type merge -p '{\"spec\":{\"pin\":\"" + digestOf(images[1]) + "\"}}'"} {
		if !strings.Contains(out, want) {
			t.Errorf("oslayer history does not say %q", want)
		}
	}
	ref := func(i string) string { return "poolimage:" + e.ns + "/pool@" + i }
	out = runOslayer(t, 0, "diff", ref("4"), ref("3"), "--kubeconfig", kc, "-o", "json")
	var res struct {
		Old, New struct{ Digest string }
		Paths    []struct{ Path, Change string }
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("oslayer diff -o json: %v\n%s", err, out)
	}
	if res.Old.Digest != digestOf(images[4]) || res.New.Digest != digestOf(images[3]) || len(res.Paths) == 0 {
		t.Errorf("oslayer diff %s %s: %s", ref("4"), ref("3"), out)
	}
	found := false
	for _, p := range res.Paths {
		found = found || p.Path == "/etc/containers/policy.json" && p.Change == "changed"
	}
	if !found {
		t.Errorf("oslayer diff of entries 4 and 3 does not change /etc/containers/policy.json: %+v", res.Paths)
	}
	out = runOslayer(t, 2, "diff", ref("9"), ref("0"), "--kubeconfig", kc)
	if !strings.Contains(out, "PoolImage "+e.ns+"/pool: status.builds[9]: the history has 5 entries") {
		t.Errorf("a bad index: %s", out)
	}
}

func digestOf(ref string) string { return ref[strings.LastIndex(ref, "@")+1:] }

// runOslayer runs the oslayer binary and returns its output (stdout and
// stderr); its exit code must be code.
func runOslayer(t *testing.T, code int, args ...string) string {
	t.Helper()
	out, err := exec.Command(oslayerCmd(t), args...).CombinedOutput()
	got := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		got = ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	if got != code {
		t.Fatalf("oslayer %s: exit %d, want %d\n%s", strings.Join(args, " "), got, code, out)
	}
	return string(out)
}
