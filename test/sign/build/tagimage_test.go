package build_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/oslayer/oslayer/assemble"
	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/publish"
	"github.com/oslayer/oslayer/sign"
	"github.com/oslayer/oslayer/test/regtest"
	"github.com/oslayer/oslayer/test/synth"
)

// TestRetag: Retag moves another tag of the repository to a signed
// image Build wrote with a look at the tag and one PUT of the manifest by
// it (nothing assembled, checked, uploaded or signed again: the result
// keeps the build's signature and has the one phase "tag"), with the look
// only when the tag names the image already; it refuses a build that was
// not tagged and a tag of another repository without sending anything.
func TestRetag(t *testing.T) {
	cosign := regtest.Require(t, "cosign")
	r := regtest.Start(t, regtest.Config{})
	proxy := regtest.NewProxy(t, r.Host)
	base, err := synth.FCOSBase(0.0002)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := synth.Push(ctxT(t), base, r.Host+"/fcos/base:stable"); err != nil {
		t.Fatal(err)
	}
	_, _, priv, pubPath := keyPair(t)
	stages := sign.Stages(sign.KeyFile(priv, sign.Password([]byte(password))), sign.WithVersion("test"))
	built, err := buildPool(t, r.Host+"/fcos/base:stable", proxy.Host+"/pools/worker:first", stages...)
	if err != nil {
		t.Fatal(err)
	}
	requests := func() []string {
		var reqs []string
		for _, q := range proxy.Requests() {
			if q.Path != "/v2/" {
				reqs = append(reqs, fmt.Sprintf("%s %s %d", q.Method, q.Path, q.Status))
			}
		}
		return reqs
	}
	tagImage := func(target string, from *assemble.Result) (*assemble.Result, []string, error) {
		t.Helper()
		pub, err := publish.New(target, &registry.Options{})
		if err != nil {
			t.Fatal(err)
		}
		proxy.Reset()
		res, err := assemble.Retag(ctxT(t), from, pub)
		return res, requests(), err
	}

	other := proxy.Host + "/pools/worker:other"
	moved, reqs, err := tagImage(other, built)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"HEAD /v2/pools/worker/manifests/other 404", "PUT /v2/pools/worker/manifests/other 201"}
	if !slices.Equal(reqs, want) {
		t.Errorf("Retag sent %v, want %v", reqs, want)
	}
	if !moved.Tagged || moved.Digest != built.Digest || moved.Image != built.Image || moved.Target != other ||
		len(moved.Phases) != 1 || moved.Phases[0].Name != "tag" || moved.BytesUploaded != 0 ||
		moved.InputsDigest != built.InputsDigest || moved.Stages[sign.StageSign] == nil {
		t.Errorf("Retag result: %+v", moved)
	}
	if d, err := remote.Head(ref(t, other)); err != nil || d.Digest != built.Digest {
		t.Errorf("tag other: %v %v, want %s", d, err, built.Digest)
	}
	if out, ok := tool(t, nil, cosign, "verify", "--key", pubPath, "--insecure-ignore-tlog", "--allow-http-registry", other); !ok {
		t.Errorf("cosign verify %s:\n%s", other, out)
	}

	// The tag names the image already: a look at it, nothing written.
	if _, reqs, err = tagImage(other, built); err != nil {
		t.Fatal(err)
	}
	if want := want[:1]; len(reqs) != 1 || reqs[0] != "HEAD /v2/pools/worker/manifests/other 200" {
		t.Errorf("Retag of a current tag sent %v, want %v (200)", reqs, want)
	}

	// Another repository lacks the image's blobs: refused, nothing sent.
	if _, reqs, err = tagImage(proxy.Host+"/pools/edge:latest", built); err == nil || len(reqs) != 0 {
		t.Errorf("Retag into another repository: %v, sent %v", err, reqs)
	}

	// A build that failed has no image to move a tag to.
	bad := sign.Stages(sign.KeyFile(priv, sign.Password([]byte("wrong"))), sign.WithVersion("test"))
	failed, err := buildPool(t, r.Host+"/fcos/base:stable", proxy.Host+"/pools/worker:failed", bad...)
	if err == nil {
		t.Fatal("a build with a wrong key password succeeded")
	}
	if _, reqs, err = tagImage(other, failed); err == nil || len(reqs) != 0 {
		t.Errorf("Retag of a failed build: %v, sent %v", err, reqs)
	}
}
