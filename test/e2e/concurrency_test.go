package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oslayer/oslayer/test/regtest"
	"github.com/oslayer/oslayer/test/synth"
)

// liveReader reads the live tag of repo on host over and over until stop
// is closed, with three clients: two read its manifest, one also checks
// every blob the manifest names. It returns the number of manifest reads
// and what failed.
func liveReader(host, repo, tag string, stop <-chan struct{}) (reads *atomic.Int64, errs func() []string) {
	var (
		mu  sync.Mutex
		bad []string
		n   atomic.Int64
	)
	fail := func(f string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(bad) < 20 {
			bad = append(bad, fmt.Sprintf(f, a...))
		}
	}
	c := &http.Client{Timeout: 30 * time.Second}
	get := func(method, path, accept string) ([]byte, int, error) {
		req, _ := http.NewRequest(method, "http://"+host+path, nil)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := c.Do(req)
		if err != nil {
			return nil, 0, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return b, resp.StatusCode, err
	}
	loop := func(blobs bool) {
		for {
			select {
			case <-stop:
				return
			default:
			}
			n.Add(1)
			b, code, err := get(http.MethodGet, "/v2/"+repo+"/manifests/"+tag, "application/vnd.oci.image.manifest.v1+json,application/vnd.docker.distribution.manifest.v2+json")
			if err != nil || code != http.StatusOK {
				fail("GET manifest %s: %d %v %s", tag, code, err, strings.TrimSpace(string(b)))
				continue
			}
			if !blobs {
				continue
			}
			for _, d := range digestsIn(b) {
				if _, code, err := get(http.MethodHead, "/v2/"+repo+"/blobs/"+d, ""); err != nil || code != http.StatusOK {
					fail("HEAD blob %s of %s: %d %v", d, tag, code, err)
				}
			}
		}
	}
	for client := range 3 {
		go loop(client == 0)
	}
	return &n, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), bad...) }
}

// digestsIn lists the "sha256:..." digests a manifest names.
func digestsIn(b []byte) []string {
	var out []string
	s := string(b)
	for {
		i := strings.Index(s, `"digest":"sha256:`)
		if i < 0 {
			return out
		}
		s = s[i+len(`"digest":"`):]
		if len(s) < 71 {
			return out
		}
		out = append(out, s[:71])
		s = s[71:]
	}
}

// TestConcurrentBuildsOneRepository: 20 builds at once into the repository
// that holds their base (the first build mounted it there from the base's
// own repository): half of them rebuild the image the live tag names and
// move that tag, half build other images (another version label, another
// digest) to their own tags, while three
// clients read the live tag and every blob it names. Every build succeeds
// and no reader sees an error. Before, builds failed with DIGEST_INVALID
// or MANIFEST_BLOB_UNKNOWN and readers saw HTTP 500s: base blobs the
// repository already had were mounted again, and tags already current
// were written again, and distribution's filesystem storage rewrites a
// link in place (a reader or a manifest PUT that reads it meanwhile
// fails).
//
// Tagging the digest the live tag names under another tag (by oslayer or
// by crane) still rewrites that digest's link in such a registry; that
// cannot be avoided by a client and is not part of this test.
func TestConcurrentBuildsOneRepository(t *testing.T) {
	reg := regtest.Start(t, regtest.Config{Filesystem: true})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	base := reg.Host + "/os/base:stable"
	if _, err := synth.Push(ctx, synthBase(t), base); err != nil {
		t.Fatal(err)
	}
	if _, err := buildVersion(t, base, reg.Host+"/os/pool:live", "e2e"); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	reads, readErrs := liveReader(reg.Host, "os/pool", "live", stop)
	const n = 20
	start := time.Now()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			target, version := reg.Host+"/os/pool:live", "e2e"
			if i%2 == 1 {
				target, version = fmt.Sprintf("%s/os/pool:p%d", reg.Host, i), fmt.Sprintf("e2e-%d", i)
			}
			_, errs[i] = buildVersion(t, base, target, version)
		}()
	}
	wg.Wait()
	close(stop)
	took := time.Since(start)
	failed := 0
	for i, err := range errs {
		if err != nil {
			failed++
			t.Errorf("build %d: %v", i, err)
		}
	}
	if bad := readErrs(); len(bad) > 0 {
		t.Errorf("the readers of the live tag saw %d error(s) in %d manifest reads, e.g.:\n%s", len(bad), reads.Load(), strings.Join(bad, "\n"))
	}
	t.Logf("%d concurrent builds into one repository: %d failed, %v; %d manifest reads of the live tag", n, failed, took.Round(time.Millisecond), reads.Load())
}
