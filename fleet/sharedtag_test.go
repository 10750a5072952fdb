package fleet_test

import (
	"fmt"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/oslayer/oslayer/fleet"
	"github.com/oslayer/oslayer/test/regtest"
)

// sharedPlan is a signed plan of one cluster whose pools worker and
// followers (each with worker's content) go into os/images:{pool}, plus a
// pool other with content of its own.
func (e *env) sharedPlan(t *testing.T, followers ...string) []fleet.Pool {
	t.Helper()
	e.osc(t, "same.yaml", "the same")
	e.osc(t, "other.yaml", "other")
	var b strings.Builder
	fmt.Fprintf(&b, "defaults: {base: %s, target: \"%s/os/images:{pool}\", signKey: cosign.key}\nclusters:\n- name: c\n  pools:\n", e.base, e.host)
	b.WriteString("  - {name: worker, osc: [same.yaml]}\n")
	for _, f := range followers {
		fmt.Fprintf(&b, "  - {name: %s, osc: [same.yaml]}\n", f)
	}
	b.WriteString("  - {name: other, osc: [other.yaml]}\n")
	return e.plan(t, b.String())
}

// split sorts the proxy's requests into those for the tags of pools
// (method and status, by tag) and the others (requestKey).
func (e *env) split(tags []string) (mine map[string][]string, others []string) {
	mine = map[string][]string{}
	for _, r := range e.proxy.Requests() {
		if tag, ok := strings.CutPrefix(r.Path, "/v2/os/images/manifests/"); ok && slices.Contains(tags, tag) {
			mine[tag] = append(mine[tag], fmt.Sprintf("%s %d", r.Method, r.Status))
			continue
		}
		others = append(others, requestKey(r))
	}
	slices.Sort(others)
	return mine, others
}

// TestFleetSharedImageTagOnly: three single-image pools in one repository
// with worker's content, base and options (signed) get worker's image by
// moving their tags only: each follower's requests are one look at its tag
// and one PUT of it, and everything else the run sends is what the same
// run without them sends (the tag moves share the push session of the
// first pool's write: no ping); cosign verifies every tag. Unchanged,
// each follower costs one look at its tag and nothing is written.
func TestFleetSharedImageTagOnly(t *testing.T) {
	crane := regtest.Require(t, "crane")
	cosign := regtest.Require(t, "cosign")
	followers := []string{"edge", "infra", "gpu"}

	// The same run without the followers: what worker and other cost.
	alone := newEnv(t)
	alone.signingKey(t)
	alonePools := alone.sharedPlan(t)
	alone.proxy.Reset()
	if sum := alone.run(t, alonePools); sum.Built != 2 {
		t.Fatalf("%+v", sum.Pools)
	}
	_, aloneReqs := alone.split(nil)
	alone.proxy.Reset()
	alone.run(t, alonePools)
	_, aloneAgain := alone.split(nil)

	e := newEnv(t)
	_, pubFile := e.signingKey(t)
	pools := e.sharedPlan(t, followers...)
	e.proxy.Reset()
	sum := e.run(t, pools)
	if sum.Built != len(pools) || sum.Failed != 0 {
		t.Fatalf("built %d, failed %d: %+v", sum.Built, sum.Failed, sum.Pools)
	}
	worker := sum.Pools[0]
	if worker.SameImageAs != "" || worker.BytesUploaded == 0 || worker.Signature == "" {
		t.Errorf("worker: %+v", worker)
	}
	for _, f := range sum.Pools[1 : 1+len(followers)] {
		var phases []string
		for _, ph := range f.Phases {
			phases = append(phases, ph.Name)
		}
		if f.SameImageAs != worker.Path || f.Digest != worker.Digest || f.Image != worker.Image || f.BytesUploaded != 0 ||
			f.Signature != worker.Signature || f.InputsDigest == "" || f.BaseDigest != worker.BaseDigest ||
			!slices.Equal(phases, []string{"render", "tag"}) {
			t.Errorf("%s: %+v (phases %v); want worker's image %s with render and tag only", f.Pool, f, phases, worker.Digest)
		}
	}
	if other := sum.Pools[len(pools)-1]; other.SameImageAs != "" || other.Digest == worker.Digest {
		t.Errorf("other content shares the image: %+v", other)
	}

	mine, others := e.split(followers)
	t.Logf("requests: %d for worker and other, %d with %d followers", len(aloneReqs), len(e.proxy.Requests()), len(followers))
	for _, f := range followers {
		if !slices.Equal(mine[f], []string{"HEAD 404", "PUT 201"}) {
			t.Errorf("follower %s's tag: %v, want one HEAD (not found) and one PUT", f, mine[f])
		}
	}
	// Besides their tags, nothing: the tag moves use the session the
	// first pool's write opened (no ping of their own).
	if extra := without(others, aloneReqs); len(extra) != 0 {
		t.Errorf("besides their tags, the followers sent %v", extra)
	}
	if missing := without(aloneReqs, others); len(missing) != 0 {
		t.Errorf("the run with followers lacks requests of the run without them: %v", missing)
	}
	e.taggedAndSigned(t, crane, cosign, pubFile, worker.Digest, append([]string{"worker"}, followers...)...)

	// Unchanged: nothing written (unchanged), a look at each follower's
	// tag, and what the run without them sends.
	e.unchanged(t, pools, sum)
	mine, others = e.split(followers)
	for _, f := range followers {
		if !slices.Equal(mine[f], []string{"HEAD 200"}) {
			t.Errorf("unchanged: follower %s's tag: %v, want one HEAD", f, mine[f])
		}
	}
	if extra := without(others, aloneAgain); len(extra) != 0 {
		t.Errorf("unchanged: besides their tags, the followers sent %v", extra)
	}
}

// taggedAndSigned checks that each tag of os/images names digest (crane)
// and that cosign verifies its signature with the public key pubFile.
func (e *env) taggedAndSigned(t *testing.T, crane, cosign, pubFile, digest string, tags ...string) {
	t.Helper()
	for _, tag := range tags {
		ref := e.host + "/os/images:" + tag
		out, err := exec.Command(crane, "digest", ref).CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != digest {
			t.Errorf("%s: %s %v, want %s", ref, out, err, digest)
		}
		if out, err := exec.Command(cosign, "verify", "--key", pubFile, "--insecure-ignore-tlog", "--allow-http-registry", ref).CombinedOutput(); err != nil {
			t.Errorf("cosign verify %s: %v\n%s", ref, err, out)
		}
	}
}

// without returns the requests of a that are not in b (each of b matches
// one of a); both are sorted.
func without(a, b []string) []string {
	var out []string
	i := 0
	for _, r := range a {
		for i < len(b) && b[i] < r {
			i++
		}
		if i < len(b) && b[i] == r {
			i++
			continue
		}
		out = append(out, r)
	}
	return out
}

// TestFleetSharedImageFailure: when the first of three single-image pools
// that are one image fails a preflight check, the others fail with its
// step and kind, naming it, and none of their tags is written.
func TestFleetSharedImageFailure(t *testing.T) {
	e := newEnv(t)
	e.osc(t, "secret.yaml", "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----\n")
	pools := e.plan(t, fmt.Sprintf(`
defaults: {base: %s, target: "%s/os/images:{pool}", osc: [secret.yaml]}
clusters:
- name: c
  pools:
  - {name: worker}
  - {name: edge}
  - {name: infra}
`, e.base, e.host))
	sum := e.run(t, pools)
	lead := sum.Pools[0]
	if lead.Status != "failed" || lead.Step != "preflight" || lead.Kind != fleet.KindInput {
		t.Fatalf("first pool: %+v, want failed at preflight (input)", lead)
	}
	for _, f := range sum.Pools[1:] {
		if f.Status != "failed" || f.Step != lead.Step || f.Kind != lead.Kind || f.SameImageAs != lead.Path ||
			!strings.Contains(f.Error, "the same image as "+lead.Path) {
			t.Errorf("%s: %+v, want failed at %s as the same image as %s", f.Pool, f, lead.Step, lead.Path)
		}
	}
	if sum.ExitCode() != 2 {
		t.Errorf("exit code %d, want 2 (a preflight check refused the pools' input)", sum.ExitCode())
	}
	for _, r := range e.proxy.Requests() {
		if strings.HasPrefix(r.Path, "/v2/os/images/") && r.Method != http.MethodGet && r.Method != http.MethodHead {
			t.Errorf("a failed pool wrote %s %s", r.Method, r.Path)
		}
	}
}
