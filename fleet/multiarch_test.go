package fleet_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oslayer/oslayer/fleet"
	"github.com/oslayer/oslayer/test/regtest"
	"github.com/oslayer/oslayer/test/synth"
)

// TestFleetMultiArch: pools whose arch is a list or "all" build through
// builder.BuildMulti into one OCI index per pool (signed, cosign verifies
// it by its tag); each platform image is the image a single-platform pool
// of the same name and content gets; a single-arch pool next to them is a
// plain image; each platform's base is resolved once for every pool; an
// unchanged fleet writes nothing.
func TestFleetMultiArch(t *testing.T) {
	crane := regtest.Require(t, "crane")
	cosign := regtest.Require(t, "cosign")
	e, base, pubFile := multiEnv(t, false)
	e.osc(t, "worker.yaml", "worker content")
	pools := e.plan(t, fmt.Sprintf(`
defaults: {base: %s, target: "%s/os/{cluster}:{pool}", signKey: cosign.key, osc: [worker.yaml]}
clusters:
- name: multi
  pools:
  - {name: worker, arch: "amd64,aarch64"}
  - {name: every, arch: all}
- name: single
  pools:
  - {name: worker, arch: arm64}
`, base, e.host))
	sum := e.run(t, pools)
	if sum.Built != 3 || sum.Failed != 0 {
		t.Fatalf("built %d, failed %d: %+v", sum.Built, sum.Failed, sum.Pools)
	}
	type manifest struct {
		MediaType string
		Manifests []struct {
			Digest   string
			Platform struct{ Architecture string }
		}
	}
	index := func(ref string) manifest {
		t.Helper()
		out, err := exec.Command(crane, "manifest", ref).Output()
		if err != nil {
			t.Fatalf("crane manifest %s: %v", ref, err)
		}
		var m manifest
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	single := sum.Pools[2]
	if len(single.Platforms) != 0 || index(single.Target).MediaType == "application/vnd.oci.image.index.v1+json" {
		t.Errorf("single-arch pool: %+v is an index", single)
	}
	for _, p := range sum.Pools[:2] {
		m := index(p.Target)
		if m.MediaType != "application/vnd.oci.image.index.v1+json" || len(m.Manifests) != 2 {
			t.Fatalf("%s: %s with %d manifests, want an OCI index of 2", p.Target, m.MediaType, len(m.Manifests))
		}
		out, err := exec.Command(crane, "digest", p.Target).Output()
		if err != nil || strings.TrimSpace(string(out)) != p.Digest {
			t.Errorf("%s names %s, summary says %s (%v)", p.Target, out, p.Digest, err)
		}
		if len(p.Platforms) != 2 || p.Signature == "" || p.BytesUploaded == 0 {
			t.Errorf("%s: summary %+v", p.Path, p)
		}
		for i, pl := range p.Platforms {
			if pl.Digest != m.Manifests[i].Digest || pl.Platform != "linux/"+m.Manifests[i].Platform.Architecture || pl.BaseDigest == "" {
				t.Errorf("%s platform %d: summary %+v, index entry %+v", p.Path, i, pl, m.Manifests[i])
			}
		}
		if out, err := exec.Command(cosign, "verify", "--key", pubFile, "--insecure-ignore-tlog", "--allow-http-registry", p.Target).CombinedOutput(); err != nil {
			t.Errorf("cosign verify %s: %v\n%s", p.Target, err, out)
		}
	}
	// The arm64 image of multi/worker is single/worker's image: same pool
	// name, content and platform.
	if arm := sum.Pools[0].Platforms[1]; arm.Digest != single.Digest {
		t.Errorf("multi/worker's %s image %s, single/worker (arm64) %s", arm.Platform, arm.Digest, single.Digest)
	}

	// Each platform's base was resolved once for the run: amd64 for the
	// two multi-platform pools, arm64 for them and the single one.
	byArch, bases := map[string]int{}, 0
	for _, sh := range sum.Shared {
		if sh.What == "base" {
			bases++
		}
		if sh.What == "base" && sh.Ref == base {
			for i, pl := range sum.Pools[0].Platforms {
				if pl.BaseDigest == sh.Digest {
					byArch[[]string{"amd64", "arm64"}[i]] += sh.Pools
				}
			}
		}
	}
	if bases != 2 || byArch["amd64"] != 2 || byArch["arm64"] != 3 {
		t.Errorf("shared bases %+v: want amd64 resolved once for 2 pools, arm64 once for 3", sum.Shared)
	}
	// The platforms of arch: all were read from the base's index once.
	var lists []fleet.Shared
	for _, sh := range sum.Shared {
		if sh.What == "platforms" {
			lists = append(lists, sh)
		}
	}
	if len(lists) != 1 || lists[0].Ref != base || lists[0].Pools != 1 || lists[0].Error != "" {
		t.Errorf("platform lists %+v: want the base's read once, for the arch: all pool", lists)
	}

	e.unchanged(t, pools, sum)
}

// TestPlanArchLists: arch takes a list or all; bad entries name the pool.
func TestPlanArchLists(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "w.yaml"), []byte(synth.OSCFiles("")), 0o644); err != nil {
		t.Fatal(err)
	}
	plan := `defaults: {base: "127.0.0.1:5000/b:1", target: "127.0.0.1:5000/os/{cluster}:{pool}", osc: [w.yaml]}
clusters:
- name: c
  pools:
  - {name: a, arch: "amd64,mips"}
  - {name: b, arch: "all,arm64"}
  - {name: d, arch: "arm64,arm64"}
  - {name: e, arch: "x86_64,aarch64"}
`
	_, err := fleet.Parse([]byte(plan), dir, "plan.yaml")
	if err == nil {
		t.Fatal("bad arch lists accepted")
	}
	for _, want := range []string{`clusters[0].pools[0].arch: "mips"`, "clusters[0].pools[1].arch:", "clusters[0].pools[2].arch:"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not name %s:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "pools[3]") {
		t.Errorf("x86_64,aarch64 refused:\n%v", err)
	}
}
