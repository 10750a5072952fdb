package publish_test

import (
	"net/http"
	"os/exec"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/oslayer/oslayer/assemble"
	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/publish"
	"github.com/oslayer/oslayer/test/regtest"
)

// fleetOpts are the options of a fleet run's publishers: a new run has a
// fresh set of known blobs and sessions.
func fleetOpts() []publish.Option {
	return []publish.Option{publish.WithSessions(&publish.Sessions{}), publish.WithKnownBlobs(&publish.KnownBlobs{}),
		publish.WithSoleWriter(), publish.WithSingleRequestUploads(), publish.WithManifestByTag()}
}

// builtAdding is built(img) with the layers the build added.
func builtAdding(t *testing.T, img v1.Image, added ...v1.Layer) *assemble.Built {
	t.Helper()
	b := built(t, img)
	for _, l := range added {
		d, err := l.Digest()
		if err != nil {
			t.Fatal(err)
		}
		b.Added = append(b.Added, assemble.AddedLayer{Digest: d})
	}
	return b
}

func digests(t *testing.T, ls []v1.Layer) []string {
	t.Helper()
	var out []string
	for _, l := range ls {
		d, err := l.Digest()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, d.String())
	}
	return out
}

// blobWrites counts the requests that check, mount or write blob d.
func blobWrites(reqs []regtest.Request, d string) (heads, writes int) {
	for _, r := range reqs {
		switch {
		case r.Method == http.MethodHead && strings.HasSuffix(r.Path, "/blobs/"+d):
			heads++
		case r.Method != http.MethodHead && r.Method != http.MethodGet && strings.Contains(r.Query, strings.TrimPrefix(d, "sha256:")):
			writes++
		}
	}
	return heads, writes
}

// validImage has crane read every blob of ref from the registry itself
// and check them against the manifest: the repository holds the whole
// image.
func validImage(t *testing.T, ref string) {
	t.Helper()
	crane := regtest.Require(t, "crane")
	if out, err := exec.Command(crane, "validate", "--remote", ref, "--insecure").CombinedOutput(); err != nil {
		t.Errorf("crane validate %s: %v\n%s", ref, err, out)
	}
}

// A new fleet run (fresh known blobs) writes a changed image to a tag that
// names an older image on the same base: the sole writer reads the old
// manifest once and neither checks nor mounts nor uploads a blob it
// references (the base layers, a layer both images have); only the
// changed layer and the config go up, and the tag ends on the new image.
// A second changed image of the same run into the repository, whose base
// layers are known by then, does not read its old manifest (it would save
// nothing). Without the read, every base layer costs a HEAD.
func TestSoleWriterLearnsBlobsOfTaggedImage(t *testing.T) {
	r, px := startProxied(t)
	reg := &registry.Options{Retry: fastRetry, Jobs: 4}
	const nBase = 12
	baseLayers := mkLayers(t, "base", nBase, 2048)
	base := pushBase(t, reg, px.Host, baseLayers)
	kept := mkLayers(t, "kept", 1, 3000)
	pools := []string{"worker", "infra"}
	var old []*assemble.Built
	for _, pool := range pools {
		changing := mkLayers(t, "old-"+pool, 1, 3100)
		img := mkImage(t, base, append(kept, changing...)...)
		b := builtAdding(t, img, append(kept, changing...)...)
		writeCommit(t, newPublisher(t, px.Host+"/pools/learn:"+pool, reg, fleetOpts()...), b)
		old = append(old, b)
	}

	opts := fleetOpts()
	for i, pool := range pools {
		changed := mkLayers(t, "new-"+pool, 1, 3200)
		img := mkImage(t, base, append(kept, changed...)...)
		b := builtAdding(t, img, append(kept, changed...)...)
		p := newPublisher(t, px.Host+"/pools/learn:"+pool, reg, opts...)
		px.Reset()
		pub := writeCommit(t, p, b)
		reqs := px.Requests()
		wantTag(t, r.Host+"/pools/learn:"+pool, b)
		validImage(t, r.Host+"/pools/learn:"+pool)

		gets := count(reqs, http.MethodGet, "/manifests/"+old[i].Digest.String())
		if want := map[int]int{0: 1, 1: 0}[i]; gets != want {
			t.Errorf("%s: %d GETs of the old manifest, want %d:\n%s", pool, gets, want, px.Dump())
		}
		if n := count(reqs, http.MethodGet, "/tags/list"); n != 0 {
			t.Errorf("%s: %d tag lists, want none (the tag names an image)", pool, n)
		}
		if n := px.Mounts(); n != 0 {
			t.Errorf("%s: %d mounts, want none:\n%s", pool, n, px.Dump())
		}
		for _, d := range append(digests(t, baseLayers), digests(t, kept)...) {
			if heads, writes := blobWrites(reqs, d); heads != 0 || writes != 0 {
				t.Errorf("%s: blob %s of the old image checked %d times, written %d times, want neither", pool, d, heads, writes)
			}
		}
		// The changed layer and the config: an upload each, no check
		// (small blobs of the image's own).
		if n := px.Uploads(); n != 2 {
			t.Errorf("%s: %d uploads, want 2 (the changed layer and the config):\n%s", pool, n, px.Dump())
		}
		if n := count(reqs, http.MethodHead, "/blobs/"); n != 0 {
			t.Errorf("%s: %d blob checks, want none:\n%s", pool, n, px.Dump())
		}
		if want := layersSize(t, changed) + configSize(t, img); pub.Uploaded != want {
			t.Errorf("%s: uploaded %d, want %d", pool, pub.Uploaded, want)
		}
		if want := layersSize(t, baseLayers) + layersSize(t, kept); pub.Skipped != want {
			t.Errorf("%s: skipped %d, want %d (the base and the kept layer)", pool, pub.Skipped, want)
		}
	}
}

// When the old manifest cannot be read, or the tag names an index, the
// sole writer checks the blobs as without it (each base layer is looked
// at, none is written again) and the push succeeds.
func TestSoleWriterLearnFallsBack(t *testing.T) {
	r, px := startProxied(t)
	fp := regtest.NewFaultProxy(t, px.Host)
	reg := &registry.Options{Retry: fastRetry, Jobs: 4}
	const nBase = 6
	baseLayers := mkLayers(t, "base", nBase, 2048)
	base := pushBase(t, reg, fp.Host, baseLayers)

	// "failing": the old image's manifest answers 500; "index": the tag
	// names an index of the old image.
	for _, tag := range []string{"failing", "index"} {
		oldImg := mkImage(t, base, mkLayers(t, "old-"+tag, 1, 3000)...)
		writeCommit(t, newPublisher(t, fp.Host+"/pools/fallback:"+tag, reg, fleetOpts()...), built(t, oldImg))
		oldDigest, err := oldImg.Digest()
		if err != nil {
			t.Fatal(err)
		}
		if tag == "index" {
			idx := mutate.AppendManifests(empty.Index, mutate.IndexAddendum{Add: oldImg})
			ref, err := name.ParseReference(r.Host + "/pools/fallback:" + tag)
			if err != nil {
				t.Fatal(err)
			}
			if err := remote.WriteIndex(ref, idx); err != nil {
				t.Fatal(err)
			}
		}
		fp.SetFault(func(r *http.Request) regtest.Fault {
			if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/manifests/"+oldDigest.String()) {
				return regtest.Fault{Status: http.StatusInternalServerError}
			}
			return regtest.Fault{}
		})
		img := mkImage(t, base, mkLayers(t, "new-"+tag, 1, 3000)...)
		b := built(t, img)
		px.Reset()
		injected := len(fp.Injected())
		writeCommit(t, newPublisher(t, fp.Host+"/pools/fallback:"+tag, reg, fleetOpts()...), b)
		fp.SetFault(nil)
		injected = len(fp.Injected()) - injected
		reqs := px.Requests()
		wantTag(t, r.Host+"/pools/fallback:"+tag, b)
		validImage(t, r.Host+"/pools/fallback:"+tag)
		for _, d := range digests(t, baseLayers) {
			if heads, writes := blobWrites(reqs, d); heads != 1 || writes != 0 {
				t.Errorf("%s: base blob %s checked %d times, written %d times, want once and never:\n%s", tag, d, heads, writes, px.Dump())
			}
		}
		// The failing read is tried (and retried); an index is not read.
		if n := count(reqs, http.MethodGet, "/manifests/"); n != 0 {
			t.Errorf("%s: %d manifest reads reached the registry, want none:\n%s", tag, n, px.Dump())
		}
		if want := map[string]int{"failing": fastRetry.Attempts, "index": 0}[tag]; injected != want {
			t.Errorf("%s: %d failed reads of the old manifest, want %d: %v", tag, injected, want, fp.Injected())
		}
	}
}
