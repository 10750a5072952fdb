package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oslayer/oslayer/assemble/baseindex"
)

// retention is a registry with the synthetic base, a signing key and
// the repository builds publish to, for prune's tests against real
// builds (the oslayer command, Debian's docker-registry with deletes on).
type retention struct {
	*env
	dir  string
	key  string
	repo string // proxy.Host + "/pools/worker"
}

func newRetention(t *testing.T) *retention {
	t.Helper()
	r := &retention{env: newEnv(t), dir: t.TempDir()}
	t.Setenv("COSIGN_PASSWORD", "")
	if _, stderr, code := cli(t, "keygen", "--output-dir", r.dir); code != 0 {
		t.Fatalf("keygen: %s", stderr)
	}
	r.key, r.repo = filepath.Join(r.dir, "cosign.key"), r.proxy.Host+"/pools/worker"
	return r
}

// exec runs oslayer with args (safe from several goroutines) and returns
// its stdout, stderr and exit code.
func (r *retention) exec(ctx context.Context, t *testing.T, args ...string) (string, string, int) {
	bin := oslayer(t)
	var out, errb bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = repoRoot(t)
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Env = append(os.Environ(), baseindex.CacheEnv+"="+filepath.Join(filepath.Dir(bin), "baseindex"))
	err := cmd.Run()
	if cmd.ProcessState == nil {
		return out.String(), errb.String() + err.Error(), -1
	}
	return out.String(), errb.String(), cmd.ProcessState.ExitCode()
}

// build builds build n of the pool (an OSC with one file saying n: each
// build another image), signed, pushed to repo:tag, and returns the
// digest it printed ("" with the exit code when it failed).
func (r *retention) build(ctx context.Context, t *testing.T, n int, tag string) (string, int, string) {
	osc := filepath.Join(r.dir, fmt.Sprintf("osc-%d.yaml", n))
	doc := "apiVersion: extensions.gardener.cloud/v1alpha1\nkind: OperatingSystemConfig\n" +
		"metadata: {name: worker, namespace: shoot}\nspec:\n  type: coreos\n  purpose: reconcile\n  files:\n" +
		fmt.Sprintf("  - path: /etc/build-number\n    permissions: 420\n    content:\n      inline: {data: \"%d\"}\n", n)
	if err := os.WriteFile(osc, []byte(doc), 0o644); err != nil {
		return "", -1, err.Error()
	}
	stdout, stderr, code := r.exec(ctx, t, "build", "--base", r.base, "--pool", "worker", "--osc", osc,
		"--push", r.repo+":"+tag, "--sign-key", r.key)
	if code != 0 {
		return "", code, stderr
	}
	_, d, ok := strings.Cut(lastLine(stdout), "@")
	if !ok {
		return "", -1, "printed " + stdout
	}
	return d, 0, stderr
}

// status is the HTTP status of the manifest ref (tag or digest) at the
// registry itself.
func (r *retention) status(t *testing.T, ref string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodHead, "http://"+r.reg.Host+"/v2/pools/worker/manifests/"+ref, nil)
	req.Header.Set("Accept", "application/vnd.oci.image.manifest.v1+json, application/vnd.oci.image.index.v1+json, application/vnd.docker.distribution.manifest.v2+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// tagDigest is the digest the registry's tag names ("" when none).
func (r *retention) tagDigest(t *testing.T, tag string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodHead, "http://"+r.reg.Host+"/v2/pools/worker/manifests/"+tag, nil)
	req.Header.Set("Accept", "application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return ""
	}
	return resp.Header.Get("Docker-Content-Digest")
}

// poolImageRefs writes a references file with a PoolImage whose
// status.image is d, built at (as the controller records it): the pool
// has a dated image besides the builds' records.
func (r *retention) poolImageRefs(t *testing.T, d string, at time.Time) string {
	t.Helper()
	p := filepath.Join(r.dir, "poolimage.yaml")
	doc := fmt.Sprintf("apiVersion: oslayer.dev/v1alpha1\nkind: PoolImage\nmetadata: {name: worker, namespace: ns}\n"+
		"spec: {pool: worker}\nstatus: {image: '%s@%s', lastBuildTime: '%s'}\n", r.repo, d, at.UTC().Format(time.RFC3339))
	if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// attached is the tag of d's attachment suffix (".sig", ".rec").
func attached(d, suffix string) string { return strings.Replace(d, ":", "-", 1) + suffix }

// Eight signed oslayer builds into one repository, one of them still in
// use (a Node runs build 2), then prune --keep 3: the four oldest
// unreferenced images (builds 1, 3, 4 and 5) go with their signature,
// attestation and record tags; builds 6, 7 and 8 (the newest three, 8
// tagged) and 2 (in use) stay. --grace 0: the builds are seconds old.
func TestPruneEightCLIBuilds(t *testing.T) {
	r := newRetention(t)
	ctx := ctxT(t)
	var ds []string
	for n := 1; n <= 8; n++ {
		d, code, stderr := r.build(ctx, t, n, "latest")
		if code != 0 {
			t.Fatalf("build %d: exit %d\n%s", n, code, stderr)
		}
		ds = append(ds, d)
	}
	refs := filepath.Join(r.dir, "refs.yaml")
	node := "kind: Node\nmetadata: {name: n1, annotations: {machineconfiguration.openshift.io/currentImage: '" + r.repo + "@" + ds[1] + "'}}\n"
	if err := os.WriteFile(refs, []byte(node), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := cli(t, "prune", r.repo, "--keep", "3", "--grace", "0s", "--references", refs, "--yes")
	if code != 0 {
		t.Fatalf("prune: exit %d\n%s%s", code, out, stderr)
	}
	for i, d := range ds {
		gone := i == 0 || (i >= 2 && i <= 4)
		wantManifest, wantTags := http.StatusOK, http.StatusOK
		if gone {
			wantManifest, wantTags = http.StatusNotFound, http.StatusNotFound
		}
		if s := r.status(t, d); s != wantManifest {
			t.Errorf("build %d (%s): manifest answers %d, want %d\n%s", i+1, d, s, wantManifest, out)
		}
		for _, suffix := range []string{".sig", ".att", ".rec"} {
			if s := r.status(t, attached(d, suffix)); s != wantTags {
				t.Errorf("build %d: tag %s answers %d, want %d", i+1, suffix, s, wantTags)
			}
		}
	}
	if !strings.Contains(out, "4 deleted") {
		t.Errorf("prune says:\n%s", out)
	}
}

// holdTag makes the proxy hold the PUT of repo's tag until release is
// closed (at most limit), and closes held when it arrives.
func (r *retention) holdTag(tag string, limit time.Duration) (held, release chan struct{}) {
	held, release = make(chan struct{}), make(chan struct{})
	var once sync.Once
	r.proxy.SetFail(func(req *http.Request) int {
		if req.Method == http.MethodPut && strings.HasSuffix(req.URL.Path, "/pools/worker/manifests/"+tag) {
			once.Do(func() { close(held) })
			select {
			case <-release:
			case <-time.After(limit):
			}
		}
		return 0
	})
	return held, release
}

// The window of issue 29: a build's image is written, signed and
// attested, and its tag PUT is held; prune --yes --keep 1 --grace 1h runs
// in that window, with a PoolImage that dates the previous build two
// hours back (as the controller's status does). The build's new image
// survives with its signature and record, and the build exits 0 with the
// tag on it. (Before build records, the new image was undated, counted as
// older than the dated one, and was deleted.)
func TestPruneDuringTagWindow(t *testing.T) {
	r := newRetention(t)
	ctx := ctxT(t)
	first, code, stderr := r.build(ctx, t, 1, "latest")
	if code != 0 {
		t.Fatalf("build 1: exit %d\n%s", code, stderr)
	}
	refs := r.poolImageRefs(t, first, time.Now().Add(-2*time.Hour))
	held, release := r.holdTag("latest", 60*time.Second)
	type result struct {
		d      string
		code   int
		stderr string
	}
	done := make(chan result, 1)
	go func() {
		d, code, stderr := r.build(ctx, t, 2, "latest")
		done <- result{d, code, stderr}
	}()
	select {
	case <-held:
	case res := <-done:
		t.Fatalf("build 2 ended before its tag PUT: exit %d\n%s", res.code, res.stderr)
	case <-time.After(90 * time.Second):
		t.Fatal("no tag PUT within 90 s")
	}
	out, perr, pcode := r.exec(ctx, t, "prune", r.reg.Host+"/pools/worker", "--yes", "--keep", "1", "--grace", "1h", "--references", refs)
	close(release)
	res := <-done
	if pcode != 0 || res.code != 0 {
		t.Fatalf("prune exit %d, build exit %d\n%s%s\n%s", pcode, res.code, out, perr, res.stderr)
	}
	if got := r.tagDigest(t, "latest"); got != res.d {
		t.Errorf("latest names %q, want build 2's %s\n%s", got, res.d, out)
	}
	for _, ref := range []string{res.d, attached(res.d, ".sig"), attached(res.d, ".rec"), first} {
		if s := r.status(t, ref); s != http.StatusOK {
			t.Errorf("%s answers %d after prune in the window\n%s", ref, s, out)
		}
	}
}

// Two build loops and a prune loop (--yes --keep 1 --grace 1h, a
// PoolImage dating a first build two hours back) on one repository,
// bounded in count and time: every build that exited 0 has its tag on its
// image right after it and, at the end, its image and its signature.
func TestPruneRacesBuilds(t *testing.T) {
	r := newRetention(t)
	ctx, cancel := context.WithTimeout(ctxT(t), 100*time.Second)
	defer cancel()
	first, code, stderr := r.build(ctx, t, 1, "first")
	if code != 0 {
		t.Fatalf("first build: exit %d\n%s", code, stderr)
	}
	refs := r.poolImageRefs(t, first, time.Now().Add(-2*time.Hour))
	const builds = 4 // per loop
	var mu sync.Mutex
	var published []string
	var wg sync.WaitGroup
	for loop := 0; loop < 2; loop++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tag := fmt.Sprintf("loop%d", loop)
			for i := 0; i < builds && ctx.Err() == nil; i++ {
				d, code, stderr := r.build(ctx, t, 100*(loop+1)+i, tag)
				if code != 0 {
					t.Errorf("%s build %d: exit %d\n%s", tag, i, code, stderr)
					continue
				}
				if got := r.tagDigest(t, tag); got != d {
					t.Errorf("%s build %d exited 0 but its tag names %q, not %s", tag, i, got, d)
				}
				mu.Lock()
				published = append(published, d)
				mu.Unlock()
			}
		}()
	}
	buildsDone := make(chan struct{})
	go func() { wg.Wait(); close(buildsDone) }()
	prunes := 0
	for ; prunes < 50; prunes++ {
		select {
		case <-buildsDone:
		default:
			out, stderr, code := r.exec(ctx, t, "prune", r.reg.Host+"/pools/worker", "--yes", "--keep", "1", "--grace", "1h", "--references", refs)
			if code != 0 && ctx.Err() == nil {
				t.Errorf("prune %d: exit %d\n%s%s", prunes, code, out, stderr)
			}
			continue
		}
		break
	}
	<-buildsDone
	t.Logf("%d builds, %d prune runs", len(published), prunes)
	if len(published) == 0 || prunes == 0 {
		t.Fatalf("%d builds published, %d prune runs: nothing raced", len(published), prunes)
	}
	for _, d := range published {
		for _, ref := range []string{d, attached(d, ".sig")} {
			if s := r.status(t, ref); s != http.StatusOK {
				t.Errorf("build %s exited 0; %s answers %d", d, ref, s)
			}
		}
	}
}
