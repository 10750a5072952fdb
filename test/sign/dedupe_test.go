package sign_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/sign"
	"github.com/oslayer/oslayer/test/regtest"
)

// attachedLayers returns the number of layers and the manifest digest of
// the cosign attachment tag (".sig" or ".att") of d.
func attachedLayers(t *testing.T, d name.Digest, suffix string) (int, v1.Hash) {
	t.Helper()
	tag, err := name.NewTag(d.Context().Name() + ":" + tagOf(d) + suffix)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(tag)
	if err != nil {
		t.Fatalf("%s: %v", tag, err)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	h, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return len(m.Layers), h
}

// TestResignDedupe: signing and attesting the same digest again (a rebuild
// with unchanged inputs) leaves exactly one signature layer and one
// provenance attestation layer, and the signature manifest is unchanged.
func TestResignDedupe(t *testing.T) {
	ctx := context.Background()
	key, d := signable(t)
	kf := keyFile(key.priv)

	out1, err := runStages(ctx, sign.Stages(kf), fakeBuild(t, d), d)
	if err != nil {
		t.Fatal(err)
	}
	sigN, sigH := attachedLayers(t, d, ".sig")
	attN, attH := attachedLayers(t, d, ".att")
	// Two attestation layers: the provenance and the SBOM.
	if sigN != 1 || attN != 2 {
		t.Fatalf("after one signing: %d signature layers, %d attestation layers; want 1 and 2", sigN, attN)
	}
	if sr := out1[0].(*sign.SignResult); sr.Existing || sr.Signatures != 1 {
		t.Fatalf("first sign result = %+v", sr)
	}

	for i := 0; i < 2; i++ {
		out, err := runStages(ctx, sign.Stages(kf), fakeBuild(t, d), d)
		if err != nil {
			t.Fatal(err)
		}
		sr := out[0].(*sign.SignResult)
		if !sr.Existing || sr.Signatures != 1 {
			t.Fatalf("re-sign %d: result %+v, want Existing with 1 signature", i, sr)
		}
		ar := out[1].(*sign.AttestResult)
		if !ar.Existing || ar.Replaced != 0 || ar.Attestations != 2 || ar.SBOM == nil || !ar.SBOM.Existing {
			t.Fatalf("re-attest %d: result %+v, want Existing with 2 attestations (provenance and SBOM)", i, ar)
		}
		n, h := attachedLayers(t, d, ".sig")
		if n != 1 || h != sigH {
			t.Fatalf("re-sign %d: %d signature layers (manifest %s, was %s); want 1, unchanged", i, n, h, sigH)
		}
		n, h = attachedLayers(t, d, ".att")
		if n != 2 || h != attH {
			t.Fatalf("re-attest %d: %d attestation layers (manifest %s, was %s); want 2, unchanged", i, n, h, attH)
		}
	}

	// A different statement for the same digest (another oslayer version)
	// replaces the provenance instead of adding a second one.
	out, err := runStages(ctx, sign.Stages(kf, sign.WithVersion("v9")), fakeBuild(t, d), d)
	if err != nil {
		t.Fatal(err)
	}
	if ar := out[1].(*sign.AttestResult); ar.Existing || ar.Replaced != 1 || ar.Attestations != 2 || ar.SBOM == nil || ar.SBOM.Replaced != 1 {
		t.Fatalf("new statement: result %+v, want the provenance and the SBOM each replaced, 2 left", ar)
	}
	if n, h := attachedLayers(t, d, ".att"); n != 2 || h == attH {
		t.Fatalf("new statement: %d attestation layers, manifest %s (was %s); want 2, changed", n, h, attH)
	}

	// A second key adds its own signature next to the first.
	other := sharedKey(t, 1)
	if _, err := runStages(ctx, sign.Stages(keyFile(other.priv))[:1], fakeBuild(t, d), d); err != nil {
		t.Fatal(err)
	}
	if n, _ := attachedLayers(t, d, ".sig"); n != 2 {
		t.Fatalf("after signing with a second key: %d signature layers, want 2", n)
	}
	v := verifyWith(t, ctx, key, d.String())
	if v.Signatures != 1 || v.Attestations != 1 {
		t.Fatalf("verify: %d signatures, %d attestations by the key; want 1 and 1", v.Signatures, v.Attestations)
	}
}

// TestReferrers: with WithReferrers the signature is also an OCI 1.1
// referrer (through the referrers tag schema on this registry, which has no
// referrers API), the .sig tag is still written, and re-signing does not
// add a second referrer.
func TestReferrers(t *testing.T) {
	ctx := context.Background()
	key, d := signable(t)
	kf := keyFile(key.priv)
	for i := 0; i < 2; i++ {
		out, err := runStages(ctx, sign.Stages(kf, sign.WithReferrers(true), sign.WithRegistry(&registry.Options{})), fakeBuild(t, d), d)
		if err != nil {
			t.Fatal(err)
		}
		if sr := out[0].(*sign.SignResult); !sr.Referrer {
			t.Fatalf("sign %d: result %+v, want Referrer", i, sr)
		}
		idx, err := remote.Referrers(d)
		if err != nil {
			t.Fatal(err)
		}
		m, err := idx.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Manifests) != 1 {
			t.Fatalf("sign %d: %d referrers, want 1: %+v", i, len(m.Manifests), m.Manifests)
		}
		if got, want := m.Manifests[0].ArtifactType, "application/vnd.dev.cosign.artifact.sig.v1+json"; got != want {
			t.Fatalf("referrer artifactType %q, want %q", got, want)
		}
		if n, _ := attachedLayers(t, d, ".sig"); n != 1 {
			t.Fatalf("sign %d: %d .sig layers, want 1", i, n)
		}
	}

	// The referrer alone is enough for cosign's OCI 1.1 mode: delete the
	// .sig tag's manifest and verify through the referrers only.
	cosignBin := regtest.Require(t, "cosign")
	_, sigManifest := attachedLayers(t, d, ".sig")
	if err := remote.Delete(d.Context().Digest(sigManifest.String())); err != nil {
		t.Fatal(err)
	}
	env := toolEnv(t)
	if out, ok := run(t, env, cosignBin, "verify", "--key", key.pub, "--insecure-ignore-tlog", "--allow-http-registry", d.String()); ok {
		t.Fatalf("cosign verify without the .sig tag and without OCI 1.1 mode succeeded:\n%s", out)
	}
	if out, ok := run(t, env, cosignBin, "verify", "--key", key.pub, "--insecure-ignore-tlog", "--allow-http-registry", "--experimental-oci11", d.String()); !ok {
		t.Fatalf("cosign verify --experimental-oci11 of the referrer:\n%s", out)
	}
}

// TestProvenance: the attestation names the builder, the base by digest,
// every input (path or Secret name, kind, sha256), the pool, the flags and
// the produced layers; Verify returns the inputs.
func TestProvenance(t *testing.T) {
	ctx := context.Background()
	key, d := signable(t)
	b := fakeBuild(t, d)
	if _, err := runStages(ctx, sign.Stages(keyFile(key.priv), sign.WithVersion("v1.2.3")), b, d); err != nil {
		t.Fatal(err)
	}
	v := verifyWith(t, ctx, key, d.String())
	want, err := sign.NewStatement(b, d, "v1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	// The statement went through JSON: compare JSON-shaped values.
	if !reflect.DeepEqual(jsonRoundTrip(t, want), jsonRoundTrip(t, v.Provenance)) {
		t.Fatalf("provenance\n got %+v\nwant %+v", v.Provenance, want)
	}
	p := v.Provenance
	if p.Type != "https://in-toto.io/Statement/v1" || p.PredicateType != "https://slsa.dev/provenance/v1" {
		t.Fatalf("types %q %q", p.Type, p.PredicateType)
	}
	if p.Subject[0].Name != d.Context().Name() || "sha256:"+p.Subject[0].Digest["sha256"] != d.DigestStr() {
		t.Fatalf("subject %+v, want %s", p.Subject, d)
	}
	rd := p.Predicate.RunDetails
	if rd.Builder.ID != "https://github.com/oslayer/oslayer" || rd.Builder.Version["oslayer"] != "v1.2.3" {
		t.Fatalf("builder %+v", rd.Builder)
	}
	if len(rd.Byproducts) != 1 || rd.Byproducts[0].Digest["sha256"] != b.Added[0].Digest.Hex {
		t.Fatalf("byproducts %+v", rd.Byproducts)
	}
	ep := p.Predicate.BuildDefinition.ExternalParameters
	if ep.Pool != "worker-a" || ep.Flags["bake-secrets"] != "false" || ep.Base != b.Base.Ref {
		t.Fatalf("externalParameters %+v", ep)
	}
	if v.Base == nil || v.Base.URI != "docker://quay.io/fedora/fedora-coreos@"+b.Base.Digest.String() || v.Base.Digest["sha256"] != b.Base.Digest.Hex {
		t.Fatalf("base %+v", v.Base)
	}
	if len(v.Inputs) != len(b.Inputs) {
		t.Fatalf("%d inputs, want %d", len(v.Inputs), len(b.Inputs))
	}
	for i, in := range b.Inputs {
		got := v.Inputs[i]
		if got.URI != in.Path || got.Name != in.Name || got.Digest["sha256"] != in.SHA256 || got.Annotations[sign.AnnotationKind] != in.Kind {
			t.Fatalf("input %d: %+v, want %+v", i, got, in)
		}
	}
}

// TestSoleWriterMerges: a sole writer (a fleet) still merges into
// signature and attestation tags that exist: signing with a second key as
// the sole writer keeps the first key's signature and attestations, and
// both keys verify; signing again with it writes nothing.
func TestSoleWriterMerges(t *testing.T) {
	ctx := context.Background()
	key, d := signable(t)
	signBoth(t, ctx, key, d)
	other := sharedKey(t, 1)
	reg := &registry.Options{Shared: &registry.Connections{}}
	signBoth(t, ctx, other, d, sign.WithSoleWriter(), sign.WithRegistry(reg))
	if n, _ := attachedLayers(t, d, ".sig"); n != 2 {
		t.Fatalf("after the sole writer signed with a second key: %d signature layers, want 2", n)
	}
	for _, k := range []keyFiles{key, other} {
		if v := verifyWith(t, ctx, k, d.String()); v.Signatures != 1 || v.Attestations != 1 || v.SBOM == nil {
			t.Errorf("verify with %s: %d signatures, %d attestations, SBOM %v; want 1, 1 and one", k.pub, v.Signatures, v.Attestations, v.SBOM != nil)
		}
	}
	_, sigH := attachedLayers(t, d, ".sig")
	_, attH := attachedLayers(t, d, ".att")
	out, err := runStages(ctx, sign.Stages(keyFile(other.priv), sign.WithSoleWriter(), sign.WithRegistry(reg)), fakeBuild(t, d), d)
	if err != nil {
		t.Fatal(err)
	}
	if sr := out[0].(*sign.SignResult); !sr.Existing {
		t.Errorf("sole writer signing again: %+v, want Existing", sr)
	}
	if _, h := attachedLayers(t, d, ".sig"); h != sigH {
		t.Errorf("signing again changed the signature manifest")
	}
	if _, h := attachedLayers(t, d, ".att"); h != attH {
		t.Errorf("attesting again changed the attestation manifest")
	}
}
