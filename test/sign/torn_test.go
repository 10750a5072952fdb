package sign_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/sign"
	"github.com/oslayer/oslayer/test/regtest"
)

// tornPut is what docker-registry answers a manifest PUT while another
// writer rewrites the link of a blob the manifest names.
const tornPut = `{"errors":[{"code":"DIGEST_INVALID","message":"provided digest did not match uploaded content"},` +
	`{"code":"MANIFEST_BLOB_UNKNOWN","message":"blob unknown to registry"}]}`

// TestSignRetriesTornManifestPut: a signature or attestation manifest PUT
// answered DIGEST_INVALID / MANIFEST_BLOB_UNKNOWN (concurrent signers
// uploading the same blobs) is merged and written again, as after a moved
// tag, by oslayer build's signer and by a fleet's sole writer; a registry
// that keeps answering so fails the stage after the bounded attempts,
// naming the tag. Before, the first such answer failed the sign stage.
func TestSignRetriesTornManifestPut(t *testing.T) {
	ctx := context.Background()
	for _, sole := range []bool{false, true} {
		r := regtest.Start(t, regtest.Config{})
		fp := regtest.NewFaultProxy(t, r.Host)
		key := sharedKey(t, 0)
		d := pushRandom(t, fp.Host, "pool")
		var mu sync.Mutex
		refused := map[string]int{}
		always := false
		fp.SetFault(func(q *http.Request) regtest.Fault {
			if q.Method != http.MethodPut || !strings.Contains(q.URL.Path, "/manifests/sha256-") {
				return regtest.Fault{}
			}
			mu.Lock()
			defer mu.Unlock()
			if refused[q.URL.Path] > 0 && !always {
				return regtest.Fault{}
			}
			refused[q.URL.Path]++
			return regtest.Fault{Status: http.StatusBadRequest, Body: tornPut,
				Header: http.Header{"Content-Type": {"application/json"}}}
		})
		opts := []sign.Option{}
		if sole {
			opts = append(opts, sign.WithSoleWriter(), sign.WithRegistry(&registry.Options{Shared: &registry.Connections{}}))
		}
		out, err := runStages(ctx, sign.Stages(keyFile(key.priv), opts...), fakeBuild(t, d), d)
		if err != nil {
			t.Fatalf("sole %t: a torn manifest PUT failed signing: %v", sole, err)
		}
		if len(refused) != 2 {
			t.Errorf("sole %t: refused PUTs of %v, want the .sig and .att tags once each", sole, refused)
		}
		if sr := out[0].(*sign.SignResult); sr.Signatures != 1 {
			t.Errorf("sole %t: %+v, want one signature", sole, sr)
		}
		fp.SetFault(nil)
		if v := verifyWith(t, ctx, key, d.String()); v.Signatures != 1 || v.Attestations != 1 || v.SBOM == nil {
			t.Errorf("sole %t: verify: %d signatures, %d attestations, SBOM %v", sole, v.Signatures, v.Attestations, v.SBOM != nil)
		}

		// Always refused: bounded, and the error names the tag.
		d2 := pushRandom(t, fp.Host, "pool")
		mu.Lock()
		always = true
		mu.Unlock()
		fp.SetFault(func(q *http.Request) regtest.Fault {
			if q.Method == http.MethodPut && strings.Contains(q.URL.Path, "/manifests/sha256-") {
				return regtest.Fault{Status: http.StatusBadRequest, Body: tornPut,
					Header: http.Header{"Content-Type": {"application/json"}}}
			}
			return regtest.Fault{}
		})
		_, err = runStages(ctx, sign.Stages(keyFile(key.priv), opts...), fakeBuild(t, d2), d2)
		if err == nil || !strings.HasPrefix(err.Error(), "sign: ") || !strings.Contains(err.Error(), ".sig") {
			t.Errorf("sole %t: a registry refusing every signature manifest: %v, want the sign stage to fail naming the tag", sole, err)
		}
		fp.SetFault(nil)
		if !tagMissing(t, d2.Context().Name()+":"+tagOf(d2)+".sig") {
			t.Errorf("sole %t: the signature tag exists after every PUT was refused", sole)
		}
	}
}
