package e2e

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/oslayer/oslayer/test/regtest"
)

// Every reference build prints goes back into oslayer as it is: the
// digested layout reference into preflight and build --base (verify says
// why it needs a registry), and the tagged one it names in "tagged ..."
// into skopeo as well.
func TestPrintedLayoutReferences(t *testing.T) {
	regtest.Require(t, "skopeo")
	t.Setenv("COSIGN_PASSWORD", "")
	dir := t.TempDir()
	out := filepath.Join(dir, "worker")
	build := func(base, target string) (string, string) {
		t.Helper()
		stdout, stderr, code := cli(t, "build", "--base", base, "--pool", "worker",
			"--osc", "examples/gardener/worker-osc.yaml", "--push", target)
		if code != 0 {
			t.Fatalf("build --base %s --push %s: exit %d\n%s", base, target, code, stderr)
		}
		return lastLine(stdout), stderr
	}
	ref, stderr := build("oci:examples/base", "oci:"+out)
	if !strings.HasPrefix(ref, "oci:"+out+"@sha256:") {
		t.Fatalf("build printed %q", ref)
	}
	tagged := "oci:" + out + ":latest"
	if !strings.Contains(stderr, "tagged "+tagged+"\n") {
		t.Errorf("the summary does not name the tag it moved (%s):\n%s", tagged, stderr)
	}
	if si := inspect(t, tagged); "oci:"+out+"@"+si.Digest != ref {
		t.Errorf("skopeo: %s is %s, build printed %s", tagged, si.Digest, ref)
	}

	if _, stderr, code := cli(t, "preflight", ref); code != 0 {
		t.Errorf("preflight %s: exit %d\n%s", ref, code, stderr)
	}
	// The digested reference as a base: pinned, so no advice to pin it.
	ref2, stderr := build(ref, "oci:"+filepath.Join(dir, "again"))
	if !strings.HasPrefix(ref2, "oci:") || strings.Contains(stderr, "resolved from a tag") {
		t.Errorf("build --base %s printed %q\n%s", ref, ref2, stderr)
	}
	if _, stderr, code := cli(t, "preflight", "oci:"+out+"@sha256:"+strings.Repeat("0", 64)); code == 0 || !strings.Contains(stderr, "no manifest sha256:000") {
		t.Errorf("preflight of a digest the layout lacks: exit %d\n%s", code, stderr)
	}

	if _, stderr, code := cli(t, "keygen", "--output-dir", dir); code != 0 {
		t.Fatalf("keygen: %s", stderr)
	}
	_, stderr, code := cli(t, "verify", ref, "--key", filepath.Join(dir, "cosign.pub"))
	// The printed layout reference is one verify reads; this layout was
	// built unsigned, so it fails saying so.
	if code != 1 || !strings.Contains(stderr, "holds no signed image") {
		t.Errorf("verify %s: exit %d, want it to say the layout holds no signed image\n%s", ref, code, stderr)
	}
}

// A signed build's summary names the tag it moved, the signature and the
// attestation, each a reference crane reads as it is printed, and the
// digested reference goes back into preflight and verify.
func TestPrintedRegistryReferences(t *testing.T) {
	regtest.Require(t, "crane")
	e := newEnv(t)
	dir := t.TempDir()
	t.Setenv("COSIGN_PASSWORD", "")
	if _, stderr, code := cli(t, "keygen", "--output-dir", dir); code != 0 {
		t.Fatalf("keygen: %s", stderr)
	}
	stdout, stderr, code := cli(t, "build", "--base", e.base, "--pool", "worker",
		"--osc", "examples/gardener/worker-osc.yaml", "--push", e.proxy.Host+"/pools/worker",
		"--sign-key", filepath.Join(dir, "cosign.key"))
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	ref := lastLine(stdout)
	_, hex, _ := strings.Cut(ref, "@sha256:")
	repo := e.proxy.Host + "/pools/worker"
	for _, want := range []string{
		"  signed " + repo + ":sha256-" + hex + ".sig\n",
		"  attest " + repo + ":sha256-" + hex + ".att\n",
		"  tagged " + repo + ":latest\n",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("summary lacks %q:\n%s", want, stderr)
			continue
		}
		run(t, "crane", "manifest", "--insecure", strings.Fields(want)[1])
	}
	if _, stderr, code := cli(t, "preflight", ref); code != 0 {
		t.Errorf("preflight %s: exit %d\n%s", ref, code, stderr)
	}
	if _, stderr, code := cli(t, "verify", ref, "--key", filepath.Join(dir, "cosign.pub")); code != 0 {
		t.Errorf("verify %s: exit %d\n%s", ref, code, stderr)
	}
}
