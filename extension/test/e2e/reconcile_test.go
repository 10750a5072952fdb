package e2e

import (
	"archive/tar"
	"context"
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"

	"github.com/oslayer/oslayer/extension/pkg/nodeside"
	"github.com/oslayer/oslayer/test/regtest"
	"github.com/oslayer/oslayer/test/synth"

	configv1alpha1 "github.com/oslayer/oslayer/extension/pkg/apis/config/v1alpha1"
	"github.com/oslayer/oslayer/extension/test/exttest"
)

// TestReconcile: an OSC of the extension's type is Succeeded with the
// pool image built from its units and files, pushed under the version's
// tag, signed (cosign verifies it), recorded in status.providerStatus,
// the pool-image extension file and inPlaceUpdates.osUpdate; a changed
// OSC gives a new image; an OSC of another type in the same namespace is
// left alone.
func TestReconcile(t *testing.T) {
	e := exttest.New(t, exttest.Options{})
	e.StartManager(t, 2)
	ns := e.Shoot(t, "worker", "43.1")
	other := exttest.OSC(ns, "other-type", "worker", extensionsv1alpha1.OperatingSystemConfigPurposeReconcile, e.Config(), "other")
	other.Spec.Type = "gardenlinux"
	e.Create(t, other)
	osc := exttest.OSC(ns, "osc-worker-original", "worker", extensionsv1alpha1.OperatingSystemConfigPurposeReconcile, e.Config(), "one")
	e.Create(t, osc)

	got := wait(t, e, osc, "Succeeded", succeeded)
	first := checkImage(t, e, got, ns, "one")

	// The OSC of another type: no finalizer, no status.
	if o, err := e.Get(other); err != nil || len(o.Finalizers) > 0 || o.Status.LastOperation != nil {
		t.Errorf("the OSC of type gardenlinux was reconciled: finalizers %v, %s (%v)", o.Finalizers, state(o), err)
	}

	// gardenlet changes the OSC (and annotates it): a new image.
	update(t, e, osc, func(o *extensionsv1alpha1.OperatingSystemConfig) {
		o.Spec.Files[1].Content.Inline.Data = "two\n"
	})
	got = wait(t, e, osc, "Succeeded with a new image", func(o *extensionsv1alpha1.OperatingSystemConfig) bool {
		return succeeded(o) && status(t, o).Image != first
	})
	second := checkImage(t, e, got, ns, "two")
	if second == first {
		t.Fatalf("the changed OSC kept image %s", first)
	}
}

// update changes the OSC as gardenlet does: the spec and the operation
// annotation.
func update(t *testing.T, e *exttest.Env, osc *extensionsv1alpha1.OperatingSystemConfig, f func(*extensionsv1alpha1.OperatingSystemConfig)) {
	t.Helper()
	o, err := e.Get(osc)
	if err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(o.DeepCopy())
	f(o)
	o.Annotations["gardener.cloud/operation"] = "reconcile"
	if err := e.Client.Patch(e.Ctx, o, patch); err != nil {
		t.Fatal(err)
	}
}

func status(t *testing.T, o *extensionsv1alpha1.OperatingSystemConfig) *configv1alpha1.OperatingSystemConfigurationStatus {
	t.Helper()
	if o.Status.ProviderStatus == nil {
		return &configv1alpha1.OperatingSystemConfigurationStatus{}
	}
	st, err := configv1alpha1.DecodeStatus(o.Status.ProviderStatus.Raw)
	if err != nil {
		t.Fatalf("status.providerStatus: %v", err)
	}
	return st
}

// checkImage checks a reconciled OSC's image and status and returns the
// image.
func checkImage(t *testing.T, e *exttest.Env, o *extensionsv1alpha1.OperatingSystemConfig, ns, body string) string {
	t.Helper()
	return checkImageIn(t, e, o, e.Host+"/os/"+ns+"/worker", e.Base, body, e.Key.Public)
}

// checkImageIn checks a reconciled OSC's image (of version 43.1, in
// repository repo, on base, signed with the key of public key pub) and
// status and returns the image.
func checkImageIn(t *testing.T, e *exttest.Env, o *extensionsv1alpha1.OperatingSystemConfig, repo, base, body string, pub []byte) string {
	t.Helper()
	st := status(t, o)
	if !strings.HasPrefix(st.Image, repo+"@sha256:") || st.Version != "43.1" || st.Base != base {
		t.Fatalf("status.providerStatus image %s, version %s, base %s: want %s@sha256:..., version 43.1, base %s", st.Image, st.Version, st.Base, repo, base)
	}
	r := nodeside.Reconcile{Image: st.Image, Version: st.Version}
	if !reflect.DeepEqual(o.Status.ExtensionFiles, nodeside.ExtensionFiles(r)) {
		t.Errorf("status.extensionFiles %+v: want nodeside's %+v", o.Status.ExtensionFiles, nodeside.ExtensionFiles(r))
	}
	if !reflect.DeepEqual(o.Status.ExtensionUnits, nodeside.ExtensionUnits(r)) {
		t.Errorf("status.extensionUnits %+v: want nodeside's %+v", o.Status.ExtensionUnits, nodeside.ExtensionUnits(r))
	}
	if ip := o.Status.InPlaceUpdates; ip == nil || !reflect.DeepEqual(ip.OSUpdate, nodeside.OSUpdate(r)) {
		t.Errorf("status.inPlaceUpdates %+v: want osUpdate %+v", ip, nodeside.OSUpdate(r))
	}
	d, err := name.NewDigest(st.Image)
	if err != nil {
		t.Fatal(err)
	}
	// The version's tag names the image.
	desc, err := remote.Head(d.Context().Tag("43.1"), append(e.RegistryAuth(), remote.WithContext(context.Background()))...)
	if err != nil || desc.Digest.String() != d.DigestStr() {
		t.Errorf("tag 43.1: %v (%v), want %s", desc, err, d.DigestStr())
	}
	t.Logf("pool image %s (%s)", st.Image, body)
	checkContent(t, d, body, e.RegistryAuth()...)
	if out, err := cosignVerifyKey(t, e, st.Image, pub); err != nil {
		t.Fatalf("cosign verify %s: %v\n%s", st.Image, err, out)
	}
	return st.Image
}

// checkContent finds the OSC's file and unit in the image's layers.
func checkContent(t *testing.T, d name.Digest, body string, opts ...remote.Option) {
	t.Helper()
	img, err := remote.Image(d, opts...)
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]string{}
	synth.WalkLayers(t, img, func(h *tar.Header, content []byte) {
		found[strings.TrimPrefix(h.Name, "./")] = string(content)
	})
	if got := found["etc/hello.conf"]; got != body+"\n" {
		t.Errorf("etc/hello.conf in the image: %q, want %q", got, body+"\n")
	}
	if !strings.Contains(found["etc/systemd/system/hello.service"], "ExecStart=/usr/local/bin/hello") {
		t.Errorf("hello.service not in the image")
	}
	// The staging unit is baked and enabled (on a node of the image it
	// finds the image booted); the pool-image record is not baked.
	unit := nodeside.ExtensionUnits(nodeside.Reconcile{})[0]
	if got := found["etc/systemd/system/"+unit.Name]; got != *unit.Content {
		t.Errorf("%s in the image: %q", unit.Name, got)
	}
	if _, ok := found["etc/systemd/system/multi-user.target.wants/"+unit.Name]; !ok {
		t.Errorf("%s not enabled in the image", unit.Name)
	}
	if _, ok := found[strings.TrimPrefix(nodeside.PoolImageFile, "/")]; ok {
		t.Errorf("%s is in the image", nodeside.PoolImageFile)
	}
}

// cosignVerify verifies the image with the cosign CLI and the public key.
func cosignVerify(t *testing.T, e *exttest.Env, image string) {
	t.Helper()
	if out, err := cosignVerifyKey(t, e, image, e.Key.Public); err != nil {
		t.Fatalf("cosign verify %s: %v\n%s", image, err, out)
	}
}

// cosignVerifyKey runs cosign verify of the image with the public key pub
// (and the registry's credentials, when it has auth).
func cosignVerifyKey(t *testing.T, e *exttest.Env, image string, pub []byte) (string, error) {
	t.Helper()
	bin := regtest.Require(t, "cosign")
	home := t.TempDir()
	pubFile := filepath.Join(home, "cosign.pub")
	if err := os.WriteFile(pubFile, pub, 0o644); err != nil {
		t.Fatal(err)
	}
	docker := filepath.Join(home, "docker")
	if e.User != "" {
		if err := os.MkdirAll(docker, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(docker, "config.json"), dockerConfig(e), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(e.Ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "verify", "--key", pubFile, "--insecure-ignore-tlog", "--allow-http-registry", image)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "TUF_ROOT=" + filepath.Join(home, "tuf"),
		"DOCKER_CONFIG=" + docker, "NO_PROXY=*", "no_proxy=*"}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// dockerConfig is a Docker config.json (a dockerconfigjson Secret's data)
// with the registry's credentials.
func dockerConfig(e *exttest.Env) []byte {
	auth := base64.StdEncoding.EncodeToString([]byte(e.User + ":" + e.UserPassword))
	return []byte(`{"auths":{"` + e.Host + `":{"auth":"` + auth + `"}}}`)
}
