// Package preflight_test runs `oslayer preflight` and the preflight package
// against images built by real tools (buildah, a real registry) the way a
// customer or a central pipeline builds them.
package preflight_test

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/oslayer/oslayer/preflight"
	"github.com/oslayer/oslayer/test/fixtures"
	"github.com/oslayer/oslayer/test/oslayerbin"
	"github.com/oslayer/oslayer/test/synth"
)

// shBin is the static stand-in for /bin/sh, built once in TestMain.
var shBin string

func TestMain(m *testing.M) {
	os.Exit(mainWithBinaries(m))
}

func mainWithBinaries(m *testing.M) int {
	dir, err := os.MkdirTemp("", "oslayer-preflight-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	root, err := fixtures.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "repo root:", err)
		return 1
	}
	shBin = filepath.Join(dir, "sh")
	cmd := exec.Command("go", "build", "-o", shBin, "./test/preflight/testdata/sh")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build ./test/preflight/testdata/sh: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// cli runs oslayer with args and returns stdout, stderr and the exit code.
func cli(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, oslayerbin.Path(t), args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Env = append(os.Environ(), "DOCKER_CONFIG="+t.TempDir())
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run oslayer: %v", err)
	}
	return out.String(), errb.String(), code
}

// preflightJSON runs `oslayer preflight ... -o json` and decodes the report.
func preflightJSON(t *testing.T, args ...string) (*preflight.Report, int, string) {
	t.Helper()
	out, errOut, code := cli(t, append(append([]string{"preflight"}, args...), "-o", "json")...)
	var rep preflight.Report
	if code == 0 || code == 1 {
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("preflight %v: exit %d, output is not a JSON report: %v\nstdout:\n%s\nstderr:\n%s", args, code, err, out, errOut)
		}
	}
	return &rep, code, errOut
}

type entry struct {
	name string
	body []byte
	mode int64
	dir  bool
}

func gzLayer(t testing.TB, ents []entry) v1.Layer {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	mt := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for _, e := range ents {
		h := &tar.Header{Name: e.name, Mode: e.mode, ModTime: mt, Typeflag: tar.TypeReg, Size: int64(len(e.body))}
		if e.dir {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if !e.dir {
			if _, err := tw.Write(e.body); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	data := b.Bytes()
	return synth.TarLayer(t, data)
}

const (
	kernel  = "6.18.13-200.fc43.x86_64"
	version = "43.20260301.20.dev1"
)

// officialBase builds a small ostree-shaped base: a root layer with the
// static sh (so buildah RUN works) and the usual directories, then three
// "chunk" layers; labels as Fedora CoreOS has them. flavor changes the
// content so that a "rebuilt" base shares no layer.
func officialBase(t testing.TB, flavor string) v1.Image {
	t.Helper()
	sh, err := os.ReadFile(shBin)
	if err != nil {
		t.Fatal(err)
	}
	root := []entry{{name: "bin/", dir: true, mode: 0o755}, {name: "bin/sh", body: sh, mode: 0o755}}
	for _, d := range []string{"etc/", "usr/", "usr/share/", "usr/lib/", "usr/lib/systemd/", "usr/lib/systemd/system/", "var/", "var/log/", "run/", "tmp/", "proc/", "sys/", "dev/", "boot/", "sysroot/"} {
		root = append(root, entry{name: d, dir: true, mode: 0o755})
	}
	root = append(root, entry{name: "usr/lib/os-release", body: []byte("NAME=Synthetic CoreOS\nVERSION_ID=43\nBUILD=" + flavor + "\n"), mode: 0o644})
	layers := []v1.Layer{gzLayer(t, root)}
	for i := 1; i <= 3; i++ {
		layers = append(layers, gzLayer(t, []entry{{name: fmt.Sprintf("usr/share/chunk-%d", i), body: []byte(strings.Repeat(flavor, 100*i)), mode: 0o644}}))
	}
	layers = append(layers, gzLayer(t, []entry{
		{name: "usr/lib/modules/", dir: true, mode: 0o755},
		{name: "usr/lib/modules/" + kernel + "/", dir: true, mode: 0o755},
		{name: "usr/lib/modules/" + kernel + "/vmlinuz", body: []byte("kernel " + flavor), mode: 0o644},
	}))
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	var adds []mutate.Addendum
	for i, l := range layers {
		adds = append(adds, mutate.Addendum{Layer: l, History: v1.History{CreatedBy: fmt.Sprintf("rpm-ostree chunk %d", i), Created: v1.Time{Time: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)}}})
	}
	img, err = mutate.Append(img, adds...)
	if err != nil {
		t.Fatal(err)
	}
	last, err := layers[len(layers)-1].DiffID()
	if err != nil {
		t.Fatal(err)
	}
	return synth.WithConfig(t, img, func(cf *v1.ConfigFile) {
		cf.OS, cf.Architecture = "linux", "amd64"
		cf.Created = v1.Time{Time: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)}
		cf.Config.Labels = map[string]string{
			"containers.bootc":                 "1",
			"ostree.bootable":                  "1",
			"ostree.linux":                     kernel,
			"ostree.final-diffid":              last.String(),
			"org.opencontainers.image.version": version,
		}
	})
}

func push(t testing.TB, img v1.Image, ref string) string {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	return ref
}

func pull(t testing.TB, ref string) v1.Image {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(r)
	if err != nil {
		t.Fatalf("pull %s: %v", ref, err)
	}
	return img
}

// buildah runs the buildah CLI with vfs storage in a per-test directory.
type buildah struct {
	t         *testing.T
	bin, root string
}

func newBuildah(t *testing.T, bin string) *buildah {
	b := &buildah{t: t, bin: bin, root: t.TempDir()}
	// An empty auth file keeps buildah away from the host's credentials.
	if err := os.WriteFile(filepath.Join(b.root, "auth.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	return b
}

func (b *buildah) run(args ...string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	full := append([]string{"--storage-driver", "vfs", "--root", filepath.Join(b.root, "storage"), "--runroot", filepath.Join(b.root, "run")}, args...)
	cmd := exec.CommandContext(ctx, b.bin, full...)
	cmd.Env = append(os.Environ(), "BUILDAH_ISOLATION=chroot", "REGISTRY_AUTH_FILE="+filepath.Join(b.root, "auth.json"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.t.Fatalf("buildah %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// build runs `buildah bud` on a Containerfile with the given files in the
// context and pushes the result to ref.
func (b *buildah) build(ref, containerfile string, files map[string]string) {
	b.t.Helper()
	dir := b.t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "Containerfile"), []byte(containerfile), 0o644); err != nil {
		b.t.Fatal(err)
	}
	for n, c := range files {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(c), 0o644); err != nil {
			b.t.Fatal(err)
		}
	}
	b.run("bud", "--isolation", "chroot", "--tls-verify=false", "--format", "oci", "-t", ref, dir)
	b.run("push", "--tls-verify=false", ref)
}
