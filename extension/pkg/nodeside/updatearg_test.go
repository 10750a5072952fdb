package nodeside

import (
	"os"
	"strings"
	"testing"

	"go.podman.io/image/v5/docker/reference"
)

// bootcImageOK is what bootc and rpm-ostree accept as IMAGE: they hand
// "docker://IMAGE" to containers/image, whose docker transport
// (docker/docker_transport.go ParseReference) parses it with
// reference.ParseNormalizedNamed; the update command wants it by a sha256
// digest.
func bootcImageOK(image string) bool {
	r, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return false
	}
	c, ok := r.(reference.Canonical)
	return ok && c.Digest().Algorithm() == "sha256" && strings.HasSuffix(image, "@"+c.Digest().String())
}

// TestUpdateRefusesOptionLikeImage: an IMAGE that bootc would read as an
// option (`bootc switch --apply -h@sha256:…` exits 0), or any other
// reference containers/image refuses, is invalid arguments before any
// tool runs.
func TestUpdateRefusesOptionLikeImage(t *testing.T) {
	hex := strings.TrimPrefix(testDigest, "sha256:")
	for _, image := range []string{
		"-h@sha256:" + hex,
		"--apply@sha256:" + hex,
		"-registry.example/pools/worker@sha256:" + hex,
		"registry.example/-pools/worker@sha256:" + hex,
		"registry.example/Pools/worker@sha256:" + hex,
		"registry.example//worker@sha256:" + hex,
		"registry.example/pools/worker/@sha256:" + hex,
		"registry.example/pools/worker\n@sha256:" + hex,
		"registry.example/pools/" + strings.Repeat("w", 250) + "@sha256:" + hex,
	} {
		if bootcImageOK(image) {
			t.Fatalf("the oracle accepts %q", image)
		}
		n := newNode(t, "bootc", "rpm-ostree", "systemctl")
		out, code := n.run(image)
		expectClass(t, out, code, 64, "fatal")
		if !strings.Contains(out, "invalid arguments") {
			t.Errorf("%q: output %q", image, out)
		}
		expectCalls(t, n)
	}
}

// TestUpdateLeavesNoTempFile: failed attempts, retried or not, leave
// nothing in the node's TMPDIR.
func TestUpdateLeavesNoTempFile(t *testing.T) {
	n := newNode(t, "bootc")
	n.set("bootc.status", bootcStatus(otherDigest, otherDigest))
	n.set("bootc.stderr", "dial tcp 10.0.0.5:5000: connect: connection refused\n")
	n.set("bootc.failures", "3")
	if out, code := n.run("--retry", testImage); code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if err := os.Remove(n.dir + "/bootc.failures"); err != nil {
		t.Fatal(err)
	}
	n.set("bootc.exit", "1")
	n.set("bootc.stderr", "error: signature rejected\n")
	out, code := n.run("--retry", testImage)
	expectClass(t, out, code, 70, "fatal")
	entries, err := os.ReadDir(n.tmp)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("left in TMPDIR: %s", e.Name())
	}
}

// FuzzUpdateImageArg: the update command accepts IMAGE exactly when
// containers/image does (by a sha256 digest); everything else is invalid
// arguments (64) and runs no tool. On a node without bootc and rpm-ostree
// an accepted IMAGE ends in system failure (70).
func FuzzUpdateImageArg(f *testing.F) {
	hex := strings.TrimPrefix(testDigest, "sha256:")
	for _, s := range []string{
		testImage, "-h@sha256:" + hex, "worker@sha256:" + hex, "localhost/w@sha256:" + hex,
		"Reg.Example/w:t@sha256:" + hex, "r.example/a__b/c-d@sha256:" + hex, "[::1]:5000/w@sha256:" + hex,
	} {
		f.Add(s)
	}
	n := newNode(f)
	f.Fuzz(func(t *testing.T, image string) {
		if image == "" || strings.ContainsRune(image, 0) {
			return
		}
		out, code, err := n.exec(image)
		if err != nil {
			t.Fatal(err)
		}
		want := 64
		if bootcImageOK(image) {
			want = 70
		}
		if code != want {
			t.Fatalf("IMAGE %q: exit %d, want %d (containers/image accepts it: %v)\n%s", image, code, want, want == 70, out)
		}
	})
}
