package e2e

import (
	"archive/tar"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/oslayer/oslayer/assemble"
	"github.com/oslayer/oslayer/test/regtest"
	"github.com/oslayer/oslayer/test/synth"
)

// oslayer build --arch: all and a list give the same pool index (every
// platform on its own base), a single --arch gives that platform's image
// as one manifest, and bad lists and a platform the base lacks tag
// nothing.
func TestCLIMultiArch(t *testing.T) {
	reg := regtest.Start(t, regtest.Config{})
	idx, err := synth.MultiArchBase(0.0002, "amd64", "arm64")
	if err != nil {
		t.Fatal(err)
	}
	base := reg.Host + "/fcos/multi:stable"
	if _, err := synth.PushIndex(ctxT(t), idx, base); err != nil {
		t.Fatal(err)
	}
	runCLI := func(target string, args ...string) (string, string, int) {
		t.Helper()
		return cli(t, append([]string{"build", "--base", base, "--pool", "worker",
			"--osc", "examples/gardener/worker-osc.yaml", "--push", target}, args...)...)
	}

	stdout, stderr, code := runCLI(reg.Host+"/pools/worker:v1", "--arch", "all", "-o", "json")
	if code != 0 {
		t.Fatalf("--arch all: exit %d\n%s\n%s", code, stdout, stderr)
	}
	t.Logf("--arch all (2 platforms, signed nothing): wall %v, peak RSS %d KiB", lastWall.Round(time.Millisecond), lastRSSKiB)
	var res assemble.Result
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("-o json: %v\n%s", err, stdout)
	}
	if !res.Tagged || len(res.Platforms) != 2 || res.Image != reg.Host+"/pools/worker@"+res.Digest.String() {
		t.Fatalf("--arch all: %+v", res)
	}
	got, err := remote.Index(mustRef(t, reg.Host+"/pools/worker:v1"))
	if err != nil {
		t.Fatal(err)
	}
	im, err := got.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for i, arch := range []string{"amd64", "arm64"} {
		p := res.Platforms[i]
		if im.Manifests[i].Platform.Architecture != arch || im.Manifests[i].Digest != p.Digest || p.Tagged {
			t.Fatalf("entry %d: %+v, platform build %s (tagged %v)", i, im.Manifests[i], p.Digest, p.Tagged)
		}
	}

	// The list gives the same index; text mode prints it last.
	stdout, stderr, code = runCLI(reg.Host+"/pools/worker:v2", "--arch", "x86_64,aarch64")
	if code != 0 || lastLine(stdout) != res.Image || !strings.Contains(stderr, "(2 platforms)") {
		t.Fatalf("--arch x86_64,aarch64: exit %d, %q, want %s\n%s", code, lastLine(stdout), res.Image, stderr)
	}

	// One --arch: one manifest, the index's arm64 image.
	stdout, stderr, code = runCLI(reg.Host+"/pools/worker-arm:v1", "--arch", "arm64")
	if want := reg.Host + "/pools/worker-arm@" + im.Manifests[1].Digest.String(); code != 0 || lastLine(stdout) != want {
		t.Fatalf("--arch arm64: exit %d, %q, want %s\n%s", code, lastLine(stdout), want, stderr)
	}
	t.Logf("--arch arm64 (base index cached): wall %v, peak RSS %d KiB", lastWall.Round(time.Millisecond), lastRSSKiB)

	// Refused before anything is written.
	layout := filepath.Join(t.TempDir(), "out")
	for _, c := range []struct {
		target string
		args   []string
		want   string
	}{
		{reg.Host + "/pools/bad:v1", []string{"--arch", "amd64,amd64"}, "amd64 given twice"},
		{reg.Host + "/pools/bad:v1", []string{"--arch", "all,arm64"}, `"all" stands alone`},
		{reg.Host + "/pools/bad:v1", []string{"--arch", "amd64,s390x"}, "platform linux/s390x"},
		{"oci:" + layout, []string{"--arch", "all", "--sign-key", "no-such.key", "--sign-identity", reg.Host + "/pools/worker"}, "not supported"},
	} {
		stdout, stderr, code := runCLI(c.target, c.args...)
		if code == 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, want an error with %q\n%s\n%s", c.args, code, c.want, stdout, stderr)
		}
	}
	if _, err := remote.Head(mustRef(t, reg.Host+"/pools/bad:v1")); err == nil {
		t.Error("pools/bad:v1 was tagged")
	}
	if _, err := os.Stat(layout); !os.IsNotExist(err) {
		t.Errorf("refused layout build wrote %s: %v", layout, err)
	}
}

func mustRef(t *testing.T, s string) name.Reference {
	t.Helper()
	r, err := name.ParseReference(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// An imageRef file of a multi-arch build comes from each platform's image
// of a multi-platform source: the amd64 pool image has the amd64 kubelet,
// the arm64 one the arm64 kubelet.
func TestCLIMultiArchImageRef(t *testing.T) {
	reg := regtest.Start(t, regtest.Config{})
	base, err := synth.MultiArchBase(0.0002, "amd64", "arm64")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := synth.PushIndex(ctxT(t), base, reg.Host+"/fcos/multi:stable"); err != nil {
		t.Fatal(err)
	}
	tools := synth.FileIndex(t, "kubelet", map[string]string{"amd64": "kubelet for amd64\n", "arm64": "kubelet for arm64\n"}, "amd64", "arm64")
	if _, err := synth.PushIndex(ctxT(t), tools, reg.Host+"/tools/kubelet:v1"); err != nil {
		t.Fatal(err)
	}
	osc := imageRefOSC(t, t.TempDir(), reg.Host+"/tools/kubelet:v1")
	stdout, stderr, code := cli(t, "build", "--base", reg.Host+"/fcos/multi:stable", "--pool", "pool", "--osc", osc,
		"--push", reg.Host+"/pools/pool:v1", "--arch", "amd64,arm64")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	idx, err := remote.Index(mustRef(t, reg.Host+"/pools/pool:v1"))
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for i, arch := range []string{"amd64", "arm64"} {
		img, err := idx.Image(im.Manifests[i].Digest)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := fileInLayers(t, img, "bin/kubelet"), "kubelet for "+arch+"\n"; got != want {
			t.Errorf("%s image: kubelet %q, want %q", arch, got, want)
		}
	}
}

// fileInLayers returns the content of the last regular file whose path
// ends in suffix among img's layers.
func fileInLayers(t *testing.T, img v1.Image, suffix string) string {
	t.Helper()
	found := ""
	synth.WalkLayers(t, img, func(h *tar.Header, b []byte) {
		if h.Typeflag == tar.TypeReg && strings.HasSuffix(h.Name, suffix) {
			found = string(b)
		}
	})
	return found
}
