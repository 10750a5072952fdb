package fleet_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/oslayer/oslayer/fleet"
	"github.com/oslayer/oslayer/sign"
	"github.com/oslayer/oslayer/test/regtest"
	"github.com/oslayer/oslayer/test/synth"
)

// signingKey writes a new cosign key pair to cosign.key and cosign.pub
// in the plan's directory.
func (e *env) signingKey(t *testing.T) (keyFile, pubFile string) {
	t.Helper()
	kp, err := sign.GenerateKeyPair(nil)
	if err != nil {
		t.Fatal(err)
	}
	keyFile, pubFile = filepath.Join(e.dir, "cosign.key"), filepath.Join(e.dir, "cosign.pub")
	if err := os.WriteFile(keyFile, kp.Private, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pubFile, kp.Public, 0o644); err != nil {
		t.Fatal(err)
	}
	return keyFile, pubFile
}

// multiEnv is env with a two-platform base (amd64, arm64) at
// fcos/multi:stable and a signing key pair in its directory; on the
// in-memory registry unless the test counts requests.
func multiEnv(t *testing.T, counting bool) (e *env, base, pubFile string) {
	t.Helper()
	if counting {
		e = newEnv(t)
	} else {
		e = newMemoryEnv(t)
	}
	idx, err := synth.MultiArchBase(0.0002, "amd64", "arm64")
	if err != nil {
		t.Fatal(err)
	}
	base = e.host + "/fcos/multi:stable"
	if _, err := synth.PushIndex(ctxT(t), idx, base); err != nil {
		t.Fatal(err)
	}
	_, pubFile = e.signingKey(t)
	return e, base, pubFile
}

var digestRE = regexp.MustCompile(`sha256[:-][0-9a-f]{64}`)

// requestKey is a request without what differs between two registries and
// two pool labels (upload session IDs, queries, digests).
func requestKey(r regtest.Request) string {
	p := r.Path
	if i := strings.Index(p, "/blobs/uploads/"); i >= 0 {
		p = p[:i] + "/blobs/uploads/"
	}
	return fmt.Sprintf("%s %s %d", r.Method, digestRE.ReplaceAllString(p, "DIGEST"), r.Status)
}

// TestFleetMultiArchSharedIndex: two multi-platform pools in one
// repository with the same content, base and options become one signed
// index under both tags: the index, each platform image and each
// signature are put once, and the second pool's requests are only the
// look at its tag and the move of it (the same run without that pool
// sends exactly the other requests). A single-arch pool with the same
// content in the same repository gets its own image.
func TestFleetMultiArchSharedIndex(t *testing.T) {
	crane := regtest.Require(t, "crane")
	cosign := regtest.Require(t, "cosign")
	plan := func(e *env, base string, withEdge bool) []fleet.Pool {
		e.osc(t, "same.yaml", "the same on every platform")
		edge := ""
		if withEdge {
			edge = "  - {name: edge, osc: [same.yaml]}\n"
		}
		return e.plan(t, fmt.Sprintf(`
defaults: {base: %s, target: "%s/os/images:{cluster}-{pool}", signKey: cosign.key, arch: "amd64,arm64"}
clusters:
- name: a
  pools:
  - {name: worker, osc: [same.yaml]}
%s  - {name: single, osc: [same.yaml], arch: amd64}
`, base, e.host, edge))
	}

	// The same run without the second pool: what the first costs.
	alone, aloneBase, _ := multiEnv(t, true)
	alone.proxy.Reset()
	aloneSum := alone.run(t, plan(alone, aloneBase, false))
	if aloneSum.Built != 2 {
		t.Fatalf("%+v", aloneSum.Pools)
	}

	e, base, pubFile := multiEnv(t, true)
	e.proxy.Reset()
	pools := plan(e, base, true)
	sum := e.run(t, pools)
	if sum.Built != 3 || sum.Failed != 0 {
		t.Fatalf("built %d, failed %d: %+v", sum.Built, sum.Failed, sum.Pools)
	}
	worker, edge, single := sum.Pools[0], sum.Pools[1], sum.Pools[2]
	if edge.Digest != worker.Digest || edge.SameImageAs != worker.Path || edge.BytesUploaded != 0 || worker.BytesUploaded == 0 {
		t.Errorf("edge: digest %s same as %q, uploaded %d; want %s, the same as %s (uploaded %d)",
			edge.Digest, edge.SameImageAs, edge.BytesUploaded, worker.Digest, worker.Path, worker.BytesUploaded)
	}
	if edge.InputsDigest == "" || edge.Signature == "" || edge.Signature != worker.Signature || len(edge.Platforms) != 2 {
		t.Errorf("edge summary: %+v", edge)
	}
	for i := range edge.Platforms {
		if i < len(worker.Platforms) && edge.Platforms[i] != worker.Platforms[i] {
			t.Errorf("edge platform %d: %+v, worker's %+v", i, edge.Platforms[i], worker.Platforms[i])
		}
	}
	if single.SameImageAs != "" || single.Digest == worker.Digest || len(single.Platforms) != 0 {
		t.Errorf("the single-arch pool shares the index: %+v", single)
	}

	// One index, each platform image and each signature put once: the
	// first pool's; the second's only look at its tag and move it.
	indexHex := strings.TrimPrefix(worker.Digest, "sha256:")
	puts := map[string]int{}
	var mine, others []string
	for _, r := range e.proxy.Requests() {
		if r.Path == "/v2/os/images/manifests/a-edge" {
			mine = append(mine, fmt.Sprintf("%s %d", r.Method, r.Status))
			continue
		}
		others = append(others, requestKey(r))
		if r.Method == http.MethodPut && strings.HasPrefix(r.Path, "/v2/os/images/manifests/") {
			puts[strings.TrimPrefix(r.Path, "/v2/os/images/manifests/")]++
		}
	}
	want := []string{worker.Digest, "sha256-" + indexHex + ".sig", "a-worker"}
	for _, pl := range worker.Platforms {
		want = append(want, pl.Digest, strings.Replace(pl.Digest, ":", "-", 1)+".sig")
	}
	for _, m := range want {
		if puts[m] != 1 {
			t.Errorf("manifest %s put %d times, want once", m, puts[m])
		}
	}
	if !slices.Equal(mine, []string{"HEAD 404", "PUT 201"}) {
		t.Errorf("the second pool's tag: %v, want one HEAD (not found) and one PUT", mine)
	}
	var aloneReqs []string
	for _, r := range alone.proxy.Requests() {
		aloneReqs = append(aloneReqs, requestKey(r))
	}
	t.Logf("requests: %d for the first pool and the single-arch one, %d with the second pool too", len(aloneReqs), len(others)+len(mine))
	slices.Sort(aloneReqs)
	slices.Sort(others)
	if !slices.Equal(aloneReqs, others) {
		t.Errorf("besides its tag, the second pool sent requests: %d without it, %d with it\nwithout:\n  %s\nwith:\n  %s",
			len(aloneReqs), len(others), strings.Join(aloneReqs, "\n  "), strings.Join(others, "\n  "))
	}

	e.taggedAndSigned(t, crane, cosign, pubFile, worker.Digest, "a-worker", "a-edge")
	// Each platform image names the pools the index serves.
	out, err := exec.Command(crane, "config", e.host+"/os/images@"+worker.Platforms[1].Digest).Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), `"io.oslayer.pool":"edge,worker"`) {
		t.Errorf("arm64 image config: %s, want the pool label edge,worker", out)
	}

	e.unchanged(t, pools, sum)
}

// TestFleetMultiArchNotShared: two multi-platform pools in one repository
// whose content differs on arm64 only (an imageRef file whose amd64 image
// is the same) are two indexes; with the same arm64 content too they are
// one.
func TestFleetMultiArchNotShared(t *testing.T) {
	crane := regtest.Require(t, "crane")
	e, base, _ := multiEnv(t, false)
	// kubelet:a and kubelet:c are the same; kubelet:b differs on arm64.
	for tag, arm := range map[string]string{"a": "kubelet arm64 a", "b": "kubelet arm64 b", "c": "kubelet arm64 a"} {
		tools := synth.FileIndex(t, "kubelet", map[string]string{"amd64": "kubelet amd64", "arm64": arm}, "amd64", "arm64")
		if _, err := synth.PushIndex(ctxT(t), tools, e.host+"/tools/kubelet:"+tag); err != nil {
			t.Fatal(err)
		}
		osc := synth.OSCFiles(synth.ImageRefFile("/opt/bin/kubelet", e.host+"/tools/kubelet:"+tag, "/kubelet"))
		if err := os.WriteFile(filepath.Join(e.dir, tag+".yaml"), []byte(osc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pools := e.plan(t, fmt.Sprintf(`
defaults: {base: %s, target: "%s/os/images:{pool}", arch: "amd64,arm64"}
clusters:
- name: c
  pools:
  - {name: a, osc: [a.yaml]}
  - {name: b, osc: [b.yaml]}
  - {name: c, osc: [c.yaml]}
`, base, e.host))
	sum := e.run(t, pools)
	if sum.Built != 3 || sum.Failed != 0 {
		t.Fatalf("built %d, failed %d: %+v", sum.Built, sum.Failed, sum.Pools)
	}
	a, b, c := sum.Pools[0], sum.Pools[1], sum.Pools[2]
	if b.SameImageAs != "" || b.Digest == a.Digest {
		t.Errorf("b differs from a on arm64 but shares its index: %+v", b)
	}
	if c.SameImageAs != a.Path || c.Digest != a.Digest {
		t.Errorf("c has a's content on both platforms but an index of its own: %+v", c)
	}
	// The amd64 images add the same layers: only arm64 differs.
	layers := func(digest string) []string {
		t.Helper()
		out, err := exec.Command(crane, "manifest", e.host+"/os/images@"+digest).Output()
		if err != nil {
			t.Fatalf("crane manifest %s: %v", digest, err)
		}
		var m struct{ Layers []struct{ Digest string } }
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatal(err)
		}
		var ds []string
		for _, l := range m.Layers {
			ds = append(ds, l.Digest)
		}
		return ds
	}
	if len(a.Platforms) != 2 || len(b.Platforms) != 2 {
		t.Fatalf("platforms: %+v, %+v", a.Platforms, b.Platforms)
	}
	if la, lb := layers(a.Platforms[0].Digest), layers(b.Platforms[0].Digest); !slices.Equal(la, lb) {
		t.Errorf("amd64 layers differ: %v, %v", la, lb)
	}
	if la, lb := layers(a.Platforms[1].Digest), layers(b.Platforms[1].Digest); slices.Equal(la, lb) {
		t.Errorf("arm64 layers are the same: %v", la)
	}
}

// TestFleetMultiArchSharedFailure: when the first of two multi-platform
// pools that are one index fails (a preflight check), the second fails
// with the same step and kind, naming it, and neither tag is written; the
// base's platforms (arch: all) were read once for both.
func TestFleetMultiArchSharedFailure(t *testing.T) {
	e, base, _ := multiEnv(t, true)
	e.osc(t, "secret.yaml", "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----\n")
	pools := e.plan(t, fmt.Sprintf(`
defaults: {base: %s, target: "%s/os/images:{cluster}-{pool}", arch: all, osc: [secret.yaml]}
clusters:
- name: a
  pools:
  - {name: worker}
  - {name: edge}
`, base, e.host))
	sum := e.run(t, pools)
	lead, follower := sum.Pools[0], sum.Pools[1]
	if lead.Status != "failed" || lead.Step != "preflight" || lead.Kind != fleet.KindInput {
		t.Fatalf("first pool: %+v, want failed at preflight (input)", lead)
	}
	if follower.Status != "failed" || follower.Step != lead.Step || follower.Kind != lead.Kind ||
		follower.SameImageAs != lead.Path || !strings.Contains(follower.Error, "the same image as "+lead.Path) {
		t.Errorf("second pool: %+v, want failed at %s as the same image as %s", follower, lead.Step, lead.Path)
	}
	if sum.ExitCode() != 2 {
		t.Errorf("exit code %d, want 2 (a preflight check refused the pools' input)", sum.ExitCode())
	}
	// arch: all: the base's platforms were read once for both pools.
	var lists []fleet.Shared
	for _, sh := range sum.Shared {
		if sh.What == "platforms" {
			lists = append(lists, sh)
		}
	}
	if len(lists) != 1 || lists[0].Pools != 2 {
		t.Errorf("platform lists %+v: want the base's read once for 2 pools", lists)
	}
	indexReads := 0
	for _, r := range e.proxy.Requests() {
		if r.Method == http.MethodGet && r.Path == "/v2/fcos/multi/manifests/stable" {
			indexReads++
		}
	}
	// Once for the platforms, once per platform's base (shared too).
	if indexReads > 3 {
		t.Errorf("the base's index read %d times for 2 pools of 2 platforms, want at most 3", indexReads)
	}
	for _, r := range e.proxy.Requests() {
		if strings.HasPrefix(r.Path, "/v2/os/images/manifests/a-") && r.Method != http.MethodGet && r.Method != http.MethodHead {
			t.Errorf("a failed pool's tag written: %s %s", r.Method, r.Path)
		}
	}
}
