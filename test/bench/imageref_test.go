package bench

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/oslayer/oslayer/test/oslayerbin"
	"github.com/oslayer/oslayer/test/regtest"
	"github.com/oslayer/oslayer/test/synth"
)

var (
	imagerefBin   = flag.String("bench.imageref-oslayer", "", "oslayer binary to measure in BenchmarkImageRef (default: built from this tree)")
	imagerefScale = flag.Float64("bench.imageref-scale", 1, "BenchmarkImageRef: the files' sizes as a fraction of 900 MiB (zeros) and 256 MiB (random)")
)

// BenchmarkImageRef measures oslayer render of a Gardener OSC whose imageRef
// files come from hostile or large images in a loopback registry: wall
// time, peak RSS and the outcome.
//
//   - zero-900MiB: one 900 MiB file of zeros (a layer of under 1 MiB);
//   - zero-3x900MiB: three such files;
//   - random-256MiB: a 256 MiB incompressible file (legitimate content).
//
// Run: go test -run '^$' -bench BenchmarkImageRef -benchtime 1x ./test/bench/
// (-args -bench.imageref-oslayer BIN measures another build of oslayer).
func BenchmarkImageRef(b *testing.B) {
	regtest.Require(b, "docker-registry")
	ctx := context.Background()
	dir := b.TempDir()
	bin := *imagerefBin
	if bin == "" {
		bin = oslayerbin.Path(b)
	}
	reg := regtest.Start(b, regtest.Config{Filesystem: true})

	// Layers are written to files, not memory: a child's peak RSS as the
	// kernel reports it starts from what this process holds when it
	// starts the child.
	n := 0
	layerOf := func(name string, size int64, src io.Reader) v1.Layer {
		n++
		p := filepath.Join(dir, fmt.Sprintf("layer%d.tar.gz", n))
		f, err := os.Create(p)
		if err != nil {
			b.Fatal(err)
		}
		zw, _ := gzip.NewWriterLevel(f, gzip.BestSpeed)
		tw := tar.NewWriter(zw)
		if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o755, Size: size}); err != nil {
			b.Fatal(err)
		}
		if _, err := io.CopyN(tw, src, size); err != nil {
			b.Fatal(err)
		}
		for _, c := range []io.Closer{tw, zw, f} {
			if err := c.Close(); err != nil {
				b.Fatal(err)
			}
		}
		l, err := tarball.LayerFromFile(p)
		if err != nil {
			b.Fatal(err)
		}
		return l
	}
	pushOne := func(repo string, ls ...v1.Layer) string {
		img, err := mutate.AppendLayers(empty.Image, ls...)
		if err != nil {
			b.Fatal(err)
		}
		ref := reg.Host + "/" + repo + ":1"
		if _, err := synth.Push(ctx, img, ref); err != nil {
			b.Fatal(err)
		}
		var size int64
		for _, l := range ls {
			s, _ := l.Size()
			size += s
		}
		b.Logf("%s: %d bytes of layers in the registry", ref, size)
		return ref
	}
	zeroSize := max(int64(float64(900<<20)**imagerefScale), 1)
	randSize := max(int64(float64(256<<20)**imagerefScale), 1)
	zero := layerOf("kubelet", zeroSize, zeroReader{})
	zeroRef := pushOne("hostile/zero", zero)
	zero3Ref := pushOne("hostile/zero3", zero, layerOf("kubectl", zeroSize, zeroReader{}), layerOf("otelcol", zeroSize, zeroReader{}))
	randRef := pushOne("large/random", layerOf("kubelet", randSize, rand.Reader))

	osc := func(name, image string, files ...string) string {
		var items string
		for _, f := range files {
			items += synth.ImageRefFile("/opt/bin/"+f, image, "/"+f)
		}
		p := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(p, []byte(synth.OSCFiles(items)), 0o644); err != nil {
			b.Fatal(err)
		}
		return p
	}
	for _, c := range []struct{ name, osc string }{
		{"zero-900MiB", osc("zero", zeroRef, "kubelet")},
		{"zero-3x900MiB", osc("zero3", zero3Ref, "kubelet", "kubectl", "otelcol")},
		{"random-256MiB", osc("random", randRef, "kubelet")},
	} {
		out := filepath.Join(dir, "out-"+c.name)
		args := []string{"render", "--osc", c.osc, "--output-dir", out}
		// GNU time reports the peak RSS of the command alone; this
		// process's own rusage of a child also counts what it held at
		// the fork (the test images).
		rssFile := filepath.Join(dir, "rss")
		cmd := exec.Command(bin, args...)
		if tm, err := exec.LookPath("/usr/bin/time"); err == nil {
			cmd = exec.Command(tm, append([]string{"-f", "%M", "-o", rssFile, bin}, args...)...)
		}
		var stderr strings.Builder
		cmd.Stdout, cmd.Stderr = io.Discard, &stderr
		start := time.Now()
		err := cmd.Run()
		wall := time.Since(start)
		if cmd.ProcessState == nil {
			b.Fatalf("%s: %v", c.name, err)
		}
		rss := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss
		if b, err := os.ReadFile(rssFile); err == nil {
			fmt.Sscan(string(b), &rss)
		}
		msg := "ok"
		if err != nil {
			msg = strings.TrimSpace(stderr.String())
		}
		b.Logf("| %s | exit %d | %.2fs | peak RSS %d MiB | %s |", c.name, cmd.ProcessState.ExitCode(), wall.Seconds(), rss>>10, msg)
		os.RemoveAll(out)
	}
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) { clear(p); return len(p), nil }
