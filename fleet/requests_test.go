package fleet_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/oslayer/oslayer/fleet"
	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/test/regtest"
)

// requestsPerPool builds a plan of one cluster with n pools into one
// repository (each pool with content of its own; signed with signKey when
// it is set) after a first pool went there already, and returns the
// requests the n pools sent, then those of the same plan unchanged.
func (e *env) requestsPerPool(t *testing.T, n int, signKey string) (changed, unchanged []regtest.Request) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "defaults: {base: %s, target: \"%s/os/one:{pool}\", signKey: %q}\nclusters:\n- name: c\n  pools:\n", e.base, e.host, signKey)
	for p := 0; p <= n; p++ {
		e.osc(t, fmt.Sprintf("p%d.yaml", p), fmt.Sprintf("pool %d", p))
		fmt.Fprintf(&b, "  - {name: p%d, osc: [p%d.yaml]}\n", p, p)
	}
	pools := e.plan(t, b.String())
	e.runRequests(t, pools[:1])
	return e.runRequests(t, pools[1:]), e.runRequests(t, pools[1:])
}

// runRequests builds pools in one run (3 at once), failing the test unless
// every pool was built, and returns the requests the run sent.
func (e *env) runRequests(t *testing.T, pools []fleet.Pool) []regtest.Request {
	t.Helper()
	e.proxy.Reset()
	sum, err := fleet.Run(ctxT(t), pools, fleet.Options{Registry: &registry.Options{}, Jobs: 3, Version: "test",
		IndexCacheDir: filepath.Join(e.dir, "cache")})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Built != len(pools) {
		t.Fatalf("built %d of %d: %+v", sum.Built, len(pools), sum.Pools)
	}
	return e.proxy.Requests()
}

func dumpRequests(reqs []regtest.Request) string {
	var b strings.Builder
	for _, r := range reqs {
		fmt.Fprintf(&b, "  %s %s?%s %d\n", r.Method, r.Path, r.Query, r.Status)
	}
	return b.String()
}

// TestFleetRequestsPerPool counts what a pool costs the registry once the
// base is in its repository: an image of its own is a look at its tag and
// digest, its blobs and its manifest, put once, by tag (no second ping,
// no read-back of what was written, no second look at the tag); an
// unchanged pool is one look at its tag.
func TestFleetRequestsPerPool(t *testing.T) {
	e := newEnv(t)
	const n = 6
	changed, unchanged := e.requestsPerPool(t, n, "")
	t.Logf("changed: %.1f requests per pool\n%s", float64(len(changed))/n, dumpRequests(changed))
	t.Logf("unchanged: %.1f requests per pool\n%s", float64(len(unchanged))/n, dumpRequests(unchanged))
	count := func(reqs []regtest.Request, match func(r regtest.Request) bool) int {
		c := 0
		for _, r := range reqs {
			if match(r) {
				c++
			}
		}
		return c
	}
	isPing := func(r regtest.Request) bool { return r.Path == "/v2/" }
	// One ping of the registry for the run (the base's, the push
	// session's and the base index lookup's).
	if p := count(changed, isPing); p != 1 {
		t.Errorf("%d pings for %d pools into one repository, want 1", p, n)
	}
	for p := 1; p <= n; p++ {
		tag := fmt.Sprintf("/v2/os/one/manifests/p%d", p)
		heads := count(changed, func(r regtest.Request) bool { return r.Method == "HEAD" && r.Path == tag })
		puts := count(changed, func(r regtest.Request) bool { return r.Method == "PUT" && r.Path == tag })
		if heads != 1 || puts != 1 {
			t.Errorf("%s: %d HEADs and %d PUTs, want 1 and 1", tag, heads, puts)
		}
		if c := count(unchanged, func(r regtest.Request) bool { return r.Path == tag }); c != 1 {
			t.Errorf("unchanged: %d requests for %s, want one HEAD", c, tag)
		}
	}
	if c := count(changed, func(r regtest.Request) bool {
		return r.Method == "GET" && strings.HasPrefix(r.Path, "/v2/os/one/manifests/sha256:")
	}); c != 0 {
		t.Errorf("%d written images read back, want none", c)
	}
	if c := count(changed, func(r regtest.Request) bool {
		return r.Method == "PUT" && strings.HasPrefix(r.Path, "/v2/os/one/manifests/sha256:")
	}); c != 0 {
		t.Errorf("%d manifests put by digest, want each put once, by tag", c)
	}
	if c := count(changed, func(r regtest.Request) bool { return r.Method == "PATCH" }); c != 0 {
		t.Errorf("%d PATCH requests, want every blob in one PUT", c)
	}
	if w := count(unchanged, func(r regtest.Request) bool { return r.Method != "GET" && r.Method != "HEAD" }); w != 0 {
		t.Errorf("unchanged fleet: %d writes, want none", w)
	}
	// Per unchanged pool one HEAD of its tag; shared: the base and its
	// index (two pings, its manifest, config and index) and the session's
	// ping.
	if len(unchanged) > n+6 {
		t.Errorf("unchanged fleet of %d pools: %d requests, want at most %d", n, len(unchanged), n+6)
	}
}

// TestFleetSignedRequestsPerPool: with signing, the signer shares the
// run's connections (no ping per call) and, as the sole writer of the
// signature tags, reads each tag once to merge into it and does not read
// it back or verify again after writing; an unchanged signed pool reads
// each tag once.
func TestFleetSignedRequestsPerPool(t *testing.T) {
	e := newEnv(t)
	keyFile, _ := e.signingKey(t)
	const n = 6
	changed, unchanged := e.requestsPerPool(t, n, keyFile)
	t.Logf("changed: %.1f requests per pool\n%s", float64(len(changed))/n, dumpRequests(changed))
	t.Logf("unchanged: %.1f requests per pool\n%s", float64(len(unchanged))/n, dumpRequests(unchanged))
	pings, sigReads := 0, 0
	for _, r := range changed {
		switch {
		case r.Path == "/v2/":
			pings++
		case r.Method == "GET" && strings.HasSuffix(r.Path, ".sig") && r.Status == 200:
			sigReads++
		}
	}
	// One for the base's registry, the push session, the base index and
	// the signer's connections (reads and writes).
	if pings != 1 {
		t.Errorf("%d pings for %d signed pools into one repository, want 1", pings, n)
	}
	// Each new image's signature tag is looked at before it exists, and
	// not read back after it was written.
	if sigReads != 0 {
		t.Errorf("%d signature tags read back after writing, want none", sigReads)
	}
	// Each new image's signature and attestation tags and its build
	// record's signature tag: one read (finding nothing), one write of the
	// manifest (the provenance and the SBOM together), no second look at
	// the tag.
	perTag := map[string]map[string]int{}
	for _, r := range changed {
		if strings.HasSuffix(r.Path, ".sig") || strings.HasSuffix(r.Path, ".att") {
			if perTag[r.Path] == nil {
				perTag[r.Path] = map[string]int{}
			}
			perTag[r.Path][r.Method]++
		}
	}
	// (The third tag of each pool: the signature of its build record.)
	if len(perTag) != 3*n {
		t.Errorf("%d signature and attestation tags touched for %d new pools, want %d", len(perTag), n, 3*n)
	}
	for tag, m := range perTag {
		if m["GET"] != 1 || m["PUT"] != 1 || len(m) != 2 {
			t.Errorf("%s: %v, want one GET and one PUT", tag, m)
		}
	}
	// Unchanged: the provenance and the SBOM are found with one read of
	// the attestation tag (each envelope read once), the signature with
	// one of the signature tag.
	attReads, sigTagReads := 0, 0
	for _, r := range unchanged {
		switch {
		case r.Method == "GET" && strings.HasSuffix(r.Path, ".att"):
			attReads++
		case r.Method == "GET" && strings.HasSuffix(r.Path, ".sig"):
			sigTagReads++
		}
	}
	if attReads != n || sigTagReads != n {
		t.Errorf("unchanged: %d attestation and %d signature tag reads for %d pools, want one each per pool", attReads, sigTagReads, n)
	}
	if len(unchanged) > 6*n+6 {
		t.Errorf("unchanged signed fleet of %d pools: %d requests, want at most %d", n, len(unchanged), 6*n+6)
	}
}

// TestFleetChangedRequestsPerPool builds a plan of two clusters (a
// repository each) of three pools, changes every pool's input and builds
// it again, as a daily pipeline run does: the second run reads the image
// each repository's first pool's tag names (one GET per repository) and
// so neither checks nor mounts a base layer; it lists no tags.
func TestFleetChangedRequestsPerPool(t *testing.T) {
	e := newEnv(t)
	clusters, poolNames := []string{"eu1", "us1"}, []string{"worker", "infra", "gpu"}
	write := func(content string) []fleet.Pool {
		var b strings.Builder
		fmt.Fprintf(&b, "defaults: {base: %s, target: \"%s/os/{cluster}:{pool}\"}\nclusters:\n", e.base, e.host)
		for _, c := range clusters {
			fmt.Fprintf(&b, "- name: %s\n  pools:\n", c)
			for _, p := range poolNames {
				e.osc(t, c+"/"+p+".yaml", content+" of "+c+"/"+p)
				fmt.Fprintf(&b, "  - {name: %s, osc: [%s/%s.yaml]}\n", p, c, p)
			}
		}
		return e.plan(t, b.String())
	}
	e.runRequests(t, write("content"))
	changed := e.runRequests(t, write("changed content"))
	n := len(clusters) * len(poolNames)
	t.Logf("changed: %.1f requests per pool\n%s", float64(len(changed))/float64(n), dumpRequests(changed))

	baseRef, err := name.ParseReference(e.base)
	if err != nil {
		t.Fatal(err)
	}
	base, err := remote.Image(baseRef)
	if err != nil {
		t.Fatal(err)
	}
	baseLayers, err := base.Layers()
	if err != nil {
		t.Fatal(err)
	}
	isBase := map[string]bool{}
	for _, l := range baseLayers {
		d, err := l.Digest()
		if err != nil {
			t.Fatal(err)
		}
		isBase[d.String()] = true
	}
	baseHeads, mounts, tagLists := 0, 0, 0
	oldReads := map[string]int{}
	for _, r := range changed {
		switch {
		case r.Method == "HEAD" && strings.HasPrefix(r.Path, "/v2/os/") && isBase[r.Path[strings.LastIndex(r.Path, "/")+1:]]:
			baseHeads++
		case strings.Contains(r.Query, "mount="):
			mounts++
		case strings.HasSuffix(r.Path, "/tags/list"):
			tagLists++
		case r.Method == "GET" && strings.HasPrefix(r.Path, "/v2/os/") && strings.Contains(r.Path, "/manifests/sha256:") && !strings.HasSuffix(r.Path, ".baseindex"):
			oldReads[r.Path[:strings.Index(r.Path, "/manifests/")]]++
		}
	}
	if baseHeads != 0 || mounts != 0 || tagLists != 0 {
		t.Errorf("changed fleet: %d HEADs of base layers (the base has %d), %d mounts, %d tag lists; want none", baseHeads, len(baseLayers), mounts, tagLists)
	}
	for _, c := range clusters {
		if got := oldReads["/v2/os/"+c]; got != 1 {
			t.Errorf("changed fleet: %d reads of old images in os/%s, want one (its first pool's)", got, c)
		}
		for _, p := range poolNames {
			tag := "/v2/os/" + c + "/manifests/" + p
			heads, puts := 0, 0
			for _, r := range changed {
				if r.Path == tag && r.Method == "HEAD" {
					heads++
				} else if r.Path == tag && r.Method == "PUT" {
					puts++
				}
			}
			if heads != 1 || puts != 1 {
				t.Errorf("%s: %d HEADs and %d PUTs, want 1 and 1", tag, heads, puts)
			}
		}
	}
}

// TestFleetPingsOncePerRegistry: a signed fleet run into several
// repositories pings the registry (which holds the base too) once, new
// and unchanged: the push sessions, the base, its index and the signer
// share the answer, however many repositories they connect to.
func TestFleetPingsOncePerRegistry(t *testing.T) {
	e := newEnv(t)
	keyFile, _ := e.signingKey(t)
	var b strings.Builder
	fmt.Fprintf(&b, "defaults: {base: %s, target: \"%s/os/{cluster}:{pool}\", signKey: %q}\nclusters:\n", e.base, e.host, keyFile)
	for c := range 4 {
		fmt.Fprintf(&b, "- name: c%d\n  pools:\n", c)
		for p := range 2 {
			e.osc(t, fmt.Sprintf("c%d/p%d.yaml", c, p), fmt.Sprintf("pool %d of %d", p, c))
			fmt.Fprintf(&b, "  - {name: p%d, osc: [c%d/p%d.yaml]}\n", p, c, p)
		}
	}
	pools := e.plan(t, b.String())
	for _, run := range []string{"new", "unchanged"} {
		reqs := e.runRequests(t, pools)
		pings := 0
		for _, r := range reqs {
			if r.Path == "/v2/" {
				pings++
			}
		}
		if pings != 1 {
			t.Errorf("%s: %d pings for 4 repositories (and the base's) on one registry, want 1\n%s", run, pings, dumpRequests(reqs))
		}
	}
}
