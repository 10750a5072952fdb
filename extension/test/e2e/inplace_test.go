package e2e

import (
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"

	"github.com/oslayer/oslayer/extension/pkg/nodeside"

	configv1alpha1 "github.com/oslayer/oslayer/extension/pkg/apis/config/v1alpha1"
	"github.com/oslayer/oslayer/extension/test/exttest"
)

// TestVersions: the machine image version picks the base. During an
// in-place update (spec.inPlaceUpdates.operatingSystemVersion) the
// version's entry of images is built and the image tagged with it; the
// pool's version from the shoot (43.1) takes the base rule, whose image
// does not exist: lastError names the providerConfig's base and nothing
// of that pool is pushed; a pool the shoot does not have has no version
// for the rule: lastError names spec.inPlaceUpdates.operatingSystemVersion.
func TestVersions(t *testing.T) {
	e := exttest.New(t, exttest.Options{})
	e.StartManager(t, 2)
	ns := e.Shoot(t, "worker", "43.1")
	cfg := e.Config()
	cfg.Images = []configv1alpha1.MachineImage{{Version: "43.2", Base: e.Base}}
	cfg.Base = e.Host + "/fcos/base:{version}"

	update := exttest.OSC(ns, "osc-worker-original", "worker", extensionsv1alpha1.OperatingSystemConfigPurposeReconcile, cfg, "in place")
	update.Spec.InPlaceUpdates = &extensionsv1alpha1.InPlaceUpdates{OperatingSystemVersion: "43.2", KubeletVersion: "1.36.0"}
	e.Create(t, update)
	ns2 := e.Shoot(t, "worker", "43.1")
	rule := exttest.OSC(ns2, "osc-worker-original", "worker", extensionsv1alpha1.OperatingSystemConfigPurposeReconcile, cfg, "rule")
	e.Create(t, rule)
	noVersion := exttest.OSC(ns, "osc-other-original", "other", extensionsv1alpha1.OperatingSystemConfigPurposeReconcile, cfg, "other")
	e.Create(t, noVersion)

	st := status(t, wait(t, e, update, "Succeeded", succeeded))
	if st.Version != "43.2" || st.Base != e.Base {
		t.Fatalf("status.providerStatus %+v: want version 43.2 on %s", st, e.Base)
	}
	d, err := name.NewDigest(st.Image)
	if err != nil {
		t.Fatal(err)
	}
	if desc, err := remote.Head(d.Context().Tag("43.2")); err != nil || desc.Digest.String() != d.DigestStr() {
		t.Errorf("tag 43.2: %v (%v), want %s", desc, err, d.DigestStr())
	}
	got, _ := e.Get(update)
	if ip := got.Status.InPlaceUpdates; ip == nil || ip.OSUpdate == nil ||
		ip.OSUpdate.Command != nodeside.UpdateCommand || !strings.Contains(strings.Join(ip.OSUpdate.Args, " "), st.Image) {
		t.Errorf("status.inPlaceUpdates %+v: want %s with %s", ip, nodeside.UpdateCommand, st.Image)
	}
	cosignVerify(t, e, st.Image)

	le := wait(t, e, rule, "lastError", failed).Status.LastError
	t.Logf("base rule: %s", le.Description)
	if !strings.Contains(le.Description, "spec.providerConfig.base") || !strings.Contains(le.Description, "fcos/base:43.1") {
		t.Errorf("status.lastError %q: want spec.providerConfig.base and the missing fcos/base:43.1", le.Description)
	}
	le = wait(t, e, noVersion, "lastError", failed).Status.LastError
	if !strings.Contains(le.Description, "spec.inPlaceUpdates.operatingSystemVersion") {
		t.Errorf("status.lastError %q: want spec.inPlaceUpdates.operatingSystemVersion", le.Description)
	}
	for _, repo := range e.Catalog(t) {
		if strings.Contains(repo, ns2) || strings.HasSuffix(repo, "/other") {
			t.Errorf("a failed build pushed %s", repo)
		}
	}
}
