package fleet_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oslayer/oslayer/fleet"
	"github.com/oslayer/oslayer/test/regtest"
	"github.com/oslayer/oslayer/test/synth"
)

// TestFleetSharedImage: three pools in one repository with the same
// content (two named worker in two clusters, one named edge) become one
// image with three tags, pushed once and signed once (cosign verifies it
// by every tag); a pool with other content gets its own image.
func TestFleetSharedImage(t *testing.T) {
	crane := regtest.Require(t, "crane")
	cosign := regtest.Require(t, "cosign")
	e := newEnv(t)
	_, pubFile := e.signingKey(t)
	e.osc(t, "a/same.yaml", "the same")
	e.osc(t, "b/same.yaml", "the same")
	e.osc(t, "other.yaml", "other")
	pools := e.plan(t, fmt.Sprintf(`
defaults: {base: %[1]s, target: "%[2]s/os/images:{cluster}-{pool}", signKey: cosign.key}
clusters:
- name: a
  pools:
  - {name: worker, osc: [a/same.yaml]}
  - {name: edge, osc: [a/same.yaml]}
  - {name: other, osc: [other.yaml]}
- name: b
  pools:
  - {name: worker, osc: [b/same.yaml]}
`, e.base, e.host))
	sum := e.run(t, pools)
	if sum.Built != 4 {
		t.Fatalf("%+v", sum.Pools)
	}
	shared := sum.Pools[0].Digest
	for _, i := range []int{1, 3} {
		if sum.Pools[i].Digest != shared || sum.Pools[i].SameImageAs != "clusters[0].pools[0]" || sum.Pools[i].BytesUploaded != 0 {
			t.Errorf("%s: digest %s same as %q, uploaded %d; want %s, the first pool's",
				sum.Pools[i].Path, sum.Pools[i].Digest, sum.Pools[i].SameImageAs, sum.Pools[i].BytesUploaded, shared)
		}
	}
	if sum.Pools[2].Digest == shared || sum.Pools[2].SameImageAs != "" {
		t.Errorf("other content shares the image: %+v", sum.Pools[2])
	}
	// One signature written for the three pools, and the manifest once
	// per tag (the first put publishes the image: none by digest).
	manifestPuts, tagPuts, sigPuts := 0, 0, 0
	hex := strings.TrimPrefix(shared, "sha256:")
	for _, r := range e.proxy.Requests() {
		if r.Method != http.MethodPut {
			continue
		}
		switch r.Path {
		case "/v2/os/images/manifests/" + shared:
			manifestPuts++
		case "/v2/os/images/manifests/a-worker", "/v2/os/images/manifests/a-edge", "/v2/os/images/manifests/b-worker":
			tagPuts++
		case "/v2/os/images/manifests/sha256-" + hex + ".sig":
			sigPuts++
		}
	}
	if manifestPuts != 0 || tagPuts != 3 || sigPuts != 1 {
		t.Errorf("shared image: %d manifest PUTs by digest, %d by tag, %d signature PUTs; want 0, 3 and 1", manifestPuts, tagPuts, sigPuts)
	}
	e.taggedAndSigned(t, crane, cosign, pubFile, shared, "a-worker", "a-edge", "b-worker")
	out, err := exec.Command(crane, "config", e.host+"/os/images:b-worker").Output()
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Config struct{ Labels map[string]string }
	}
	if err := json.Unmarshal(out, &cfg); err != nil {
		t.Fatal(err)
	}
	if got := cfg.Config.Labels["io.oslayer.pool"]; got != "edge,worker" {
		t.Errorf("pool label %q, want the pools the image serves: edge,worker", got)
	}
}

// TestFleetShards runs the 3 shards of a plan at once against one
// registry, as 3 pods of an Indexed Job would: every pool is built by
// exactly one shard, each tag is written once, and the pools that share an
// image (same content, one repository) share it across the fleet.
func TestFleetShards(t *testing.T) {
	e := newEnv(t)
	var b strings.Builder
	fmt.Fprintf(&b, "defaults: {base: %s, target: \"%s/os/{cluster}:{pool}\"}\nclusters:\n", e.base, e.host)
	for c := 0; c < 3; c++ {
		fmt.Fprintf(&b, "- name: c%d\n  pools:\n", c)
		for p := 0; p < 4; p++ {
			body := fmt.Sprintf("pool %d of %d", p, c)
			if p == 0 {
				body = "same in the cluster"
			}
			e.osc(t, fmt.Sprintf("c%d/p%d.yaml", c, p), body)
			fmt.Fprintf(&b, "  - {name: p%d, osc: [c%d/p%d.yaml]}\n", p, c, p)
		}
		// A second pool with p0's content in the same repository.
		fmt.Fprintf(&b, "  - {name: q0, osc: [c%d/p0.yaml]}\n", c)
	}
	pools := e.plan(t, b.String())
	const n = 3
	sums := make([]*fleet.Summary, n)
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func(i int) {
			var err error
			sums[i], err = fleet.Run(ctxT(t), fleet.Shard(pools, i, n), fleet.Options{Jobs: 2, Version: "test",
				IndexCacheDir: filepath.Join(e.dir, "cache")})
			errs <- err
		}(i)
	}
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	built := map[string]int{}
	for i, s := range sums {
		if s.Failed != 0 || s.Total == 0 {
			t.Errorf("shard %d: %d of %d failed: %+v", i, s.Failed, s.Total, s.Pools)
		}
		for _, p := range s.Pools {
			built[p.Cluster+"/"+p.Pool]++
			if strings.HasPrefix(p.Pool, "q") && p.SameImageAs == "" {
				t.Errorf("%s/%s did not share p0's image", p.Cluster, p.Pool)
			}
		}
	}
	tagPuts := map[string]int{}
	for _, r := range e.proxy.Requests() {
		if r.Method == http.MethodPut && strings.Contains(r.Path, "/manifests/") && !strings.Contains(r.Path, "/manifests/sha256") {
			tagPuts[r.Path]++
		}
	}
	for _, p := range pools {
		if built[p.ID()] != 1 {
			t.Errorf("%s built by %d shards", p.ID(), built[p.ID()])
		}
		path := "/v2/os/" + p.Cluster + "/manifests/" + p.Name
		if tagPuts[path] != 1 {
			t.Errorf("%s written %d times", path, tagPuts[path])
		}
	}
	if len(built) != len(pools) {
		t.Errorf("%d pools built, plan has %d", len(built), len(pools))
	}
}

// TestFleetBaseLayersOnce: pools into one repository check and mount the
// base layers once between them (the first image goes first; the others
// know the layers are there).
func TestFleetBaseLayersOnce(t *testing.T) {
	e := newEnv(t)
	img, err := synth.FCOSBase(0.0002)
	if err != nil {
		t.Fatal(err)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "defaults: {base: %s, target: \"%s/os/one:{pool}\"}\nclusters:\n- name: c\n  pools:\n", e.base, e.host)
	for p := 0; p < 6; p++ {
		e.osc(t, fmt.Sprintf("p%d.yaml", p), fmt.Sprintf("pool %d", p))
		fmt.Fprintf(&b, "  - {name: p%d, osc: [p%d.yaml]}\n", p, p)
	}
	sum := e.run(t, e.plan(t, b.String()))
	if sum.Built != 6 {
		t.Fatalf("%+v", sum.Pools)
	}
	base := map[string]bool{}
	for _, l := range m.Layers {
		base[l.Digest.String()] = true
	}
	heads, mounts := 0, 0
	for _, r := range e.proxy.Requests() {
		d := r.Path[strings.LastIndex(r.Path, "/")+1:]
		switch {
		case r.Method == http.MethodHead && strings.HasPrefix(r.Path, "/v2/os/one/blobs/") && base[d]:
			heads++
		case r.Method == http.MethodPost && strings.Contains(r.Query, "mount="):
			mounts++
		}
	}
	if heads > len(m.Layers) || mounts > len(m.Layers) {
		t.Errorf("6 pools into one repository: %d HEADs and %d mounts of the %d base layers, want each at most once", heads, mounts, len(m.Layers))
	}
}
