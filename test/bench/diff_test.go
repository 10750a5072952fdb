package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/oslayer/oslayer/assemble/baseindex"
	"github.com/oslayer/oslayer/diff"
)

// diffExtraMC is a MachineConfig NEW adds to the AWS worker pool.
const diffExtraMC = `apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: 99-worker-bench
  labels:
    machineconfiguration.openshift.io/role: worker
spec:
  config:
    ignition:
      version: 3.5.0
    storage:
      files:
      - path: /etc/containers/registries.d/bench.yaml
        mode: 420
        contents:
          source: data:,docker%3A%0A
`

// BenchmarkDiff measures oslayer diff of two builds of the real AWS worker
// pool (NEW adds a file under /etc/containers/registries.d) on the
// synthetic base (-bench.gb: ~1 GB): wall time (median of -bench.reps),
// peak RSS, bytes downloaded, and the base bytes read, which must be 0:
// the base index and the images' metadata layers serve.
//
// Run: test/bench/run.sh -bench.diff -bench.gb
func BenchmarkDiff(b *testing.B) {
	if *gb {
		*scale = 1.5
	}
	e, img, root := newEnv(b)
	cacheEnv := baseindex.CacheEnv + "=" + filepath.Join(e.dir, "baseindex")
	pool := filepath.Join(root, "test", "fixtures", "testdata", "mco", "aws", "worker")
	extra := filepath.Join(e.dir, "99-worker-bench.yaml")
	if err := os.WriteFile(extra, []byte(diffExtraMC), 0o644); err != nil {
		b.Fatal(err)
	}
	repo := e.proxy.Host + "/pools/worker"
	build := func(inputs ...string) string {
		args := append([]string{"build", "--base", e.base, "--pool", "worker", "--allow-secret",
			"/usr/lib/oslayer/var/var/lib/kubelet/config.json", "--push", repo}, inputs...)
		var out strings.Builder
		e.execOut(&out, e.oslayer, args, "SOURCE_DATE_EPOCH=1700000000", cacheEnv)
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		return lines[len(lines)-1]
	}
	old := build("--machineconfig", pool)
	newRef := build("--machineconfig", pool, "--machineconfig", extra)
	base := baseBlobs(b, img)

	b.ResetTimer()
	var out strings.Builder
	var baseRead int64
	r := e.median("diff", func(int) (time.Duration, int64) {
		out.Reset()
		wall, rss := e.execOut(&out, e.oslayer, []string{"diff", old, newRef, "-o", "json"}, cacheEnv)
		baseRead += baseBytesRead(e, base)
		return wall, rss
	})
	b.StopTimer()
	var res diff.Result
	if err := json.Unmarshal([]byte(out.String()), &res); err != nil {
		b.Fatal(err)
	}
	if baseRead != 0 {
		b.Errorf("diff read %d bytes of base layers", baseRead)
	}
	if a := res.Platform(diff.PlatformOpenShift).Action; a != diff.Reload {
		b.Errorf("openshift action %s, want reload (registries.d)", a)
	}
	b.ReportMetric(float64(r.wall.Milliseconds()), "ms/diff")
	b.ReportMetric(float64(r.rss), "KiB-rss")
	b.ReportMetric(float64(r.down), "B-down")
	b.ReportMetric(float64(baseRead), "B-base-read")
	fmt.Printf("diff on a %.1f MB base (scale %g): wall %v, peak RSS %d KiB, downloaded %d B, base bytes read %d; %d paths, NEW downloads %d B in %d layers\n",
		float64(sizeOf(base))/1e6, *scale, r.wall.Round(time.Millisecond), r.rss, r.down, baseRead, len(res.Paths), res.Download.Bytes, res.Download.Layers)
}

// baseBlobs maps the base's layer digests to their sizes.
func baseBlobs(b *testing.B, img interface {
	Manifest() (*v1.Manifest, error)
}) map[string]int64 {
	m, err := img.Manifest()
	if err != nil {
		b.Fatal(err)
	}
	out := map[string]int64{}
	for _, l := range m.Layers {
		out[l.Digest.String()] = l.Size
	}
	return out
}

func sizeOf(blobs map[string]int64) int64 {
	var n int64
	for _, s := range blobs {
		n += s
	}
	return n
}

// baseBytesRead sums the base layers the proxy served since its reset.
func baseBytesRead(e *env, base map[string]int64) int64 {
	var n int64
	for _, req := range e.proxy.Requests() {
		if i := strings.Index(req.Path, "/blobs/"); i >= 0 && req.Method == "GET" {
			n += base[req.Path[i+len("/blobs/"):]]
		}
	}
	return n
}
