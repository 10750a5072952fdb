package sign

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/sigstore/cosign/v2/pkg/cosign"
	"github.com/sigstore/cosign/v2/pkg/oci"
	colayout "github.com/sigstore/cosign/v2/pkg/oci/layout"
	ociremote "github.com/sigstore/cosign/v2/pkg/oci/remote"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/payload"

	"github.com/oslayer/oslayer/internal/field"
	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/publish"
)

// Verification is what Verify found. Err fields are empty on success.
type Verification struct {
	// Ref is the verified digested reference.
	Ref string `json:"ref"`
	// Digest is the single-arch manifest digest that was verified.
	Digest string `json:"digest"`
	// Index is the digest of the multi-platform index the reference
	// named (a multi-arch pool image), whose signature is checked too: a
	// node that resolves the tag to the index verifies that signature.
	Index string `json:"index,omitempty"`
	// IndexSignatures counts valid signatures of Index by the key.
	IndexSignatures int `json:"indexSignatures,omitempty"`
	// IndexSignatureError says why the index's signature check failed.
	IndexSignatureError string `json:"indexSignatureError,omitempty"`
	// Signatures counts valid signatures by the key.
	Signatures int `json:"signatures"`
	// SignedIdentity is the docker-reference the signature names.
	SignedIdentity string `json:"signedIdentity,omitempty"`
	// SignatureError says why the signature check failed.
	SignatureError string `json:"signatureError,omitempty"`
	// Attestations counts valid SLSA provenance attestations by the key.
	Attestations int `json:"attestations"`
	// AttestationError says why the attestation check failed.
	AttestationError string `json:"attestationError,omitempty"`
	// Provenance is the statement of the first valid attestation.
	Provenance *Statement `json:"provenance,omitempty"`
	// Inputs are the input documents the provenance names.
	Inputs []ResourceDescriptor `json:"inputs,omitempty"`
	// Base is the base image the provenance names.
	Base *ResourceDescriptor `json:"base,omitempty"`
	// SBOM is the SPDX document of the first SBOM attestation by the key
	// (nil: none); SBOMError says what is wrong with it.
	SBOM      *SPDX  `json:"sbom,omitempty"`
	SBOMError string `json:"sbomError,omitempty"`
}

// OK reports whether every check passed (the signatures, the provenance
// and, when one is attached, the SBOM).
func (v *Verification) OK() bool {
	return v.SignatureError == "" && v.AttestationError == "" && v.IndexSignatureError == "" && v.SBOMError == "" &&
		v.Signatures > 0 && v.Attestations > 0
}

// ErrVerify is wrapped by every verification failure (not by errors reaching
// the registry).
var ErrVerify = errors.New("verification failed")

// Verify checks ref (a tag or digest reference; tags are resolved, index
// references select linux/amd64, and the index's own signature is
// checked too) with the public key pub:
//
//   - the manifest the registry serves must hash to the digest;
//   - a cosign signature by pub whose payload names that exact digest and
//     the image's repository (what a node's sigstoreSigned policy with
//     matchRepository accepts);
//   - a DSSE attestation by pub of a SLSA provenance v1 statement whose
//     subject is that digest;
//   - when an SPDX SBOM attestation is attached, one by pub that describes
//     that digest: one that fails verification (an edited statement) is
//     an error, not an absent SBOM.
//
// No transparency log or certificate is consulted. The Verification is
// returned with an error wrapping ErrVerify when a check fails.
func Verify(ctx context.Context, ref string, pub signature.Verifier, opts ...Option) (*Verification, error) {
	return verify(ctx, ref, pub, makeOptions(opts))
}

// verification is the state of one Verify: what the reference resolved
// to, the cosign options, and what the signature and attestation checks
// returned, reduced into v step by step.
type verification struct {
	ctx    context.Context
	ref    string
	o      *options
	res    registry.Resolved
	co     *cosign.CheckOpts
	v      *Verification
	sigs   []oci.Signature
	atts   []oci.Signature
	sigErr error
	attErr error
}

func verify(ctx context.Context, ref string, pub signature.Verifier, o *options) (*Verification, error) {
	// The registry verifies nothing: reading the manifest through
	// go-containerregistry checks its bytes against a requested digest.
	_, res, err := o.reg.Image(ctx, ref, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrVerify, err)
	}
	vr := &verification{ctx: ctx, ref: ref, o: o, res: res, co: &cosign.CheckOpts{
		RegistryClientOpts: []ociremote.Option{ociremote.WithRemoteOptions(o.remoteOpts(ctx)...)},
		SigVerifier:        pub,
		IgnoreTlog:         true,
		IgnoreSCT:          true,
	}}
	if res.Ref == nil {
		if err := vr.readLayout(); err != nil {
			return vr.v, err
		}
	} else {
		vr.readRegistry()
	}
	vr.signatures()
	if vr.attErr != nil {
		vr.v.AttestationError = vr.attErr.Error()
	} else {
		vr.attestations()
		vr.missingSBOM()
	}
	vr.v.provenanceDependencies()
	return vr.v, vr.v.failure()
}

// readLayout reads the signatures and attestations of an OCI layout as
// `cosign save` writes it: those of the image whose entry has the kind
// annotation.
func (vr *verification) readLayout() error {
	l, err := registry.ParseLayout(vr.ref)
	if err != nil {
		return err
	}
	d := vr.res.Digest.String()
	vr.v = &Verification{Ref: registry.LayoutPrefix + l.Dir + "@" + d, Digest: d}
	if err := layoutSignedImage(l.Dir, vr.res.Digest); err != nil {
		return fmt.Errorf("%w for %s: %v", ErrVerify, vr.v.Ref, err)
	}
	vr.co.ClaimVerifier = cosign.SimpleClaimVerifier
	vr.sigs, _, vr.sigErr = cosign.VerifyLocalImageSignatures(vr.ctx, l.Dir, vr.co)
	vr.co.ClaimVerifier = cosign.IntotoSubjectClaimVerifier
	vr.atts, _, vr.attErr = cosign.VerifyLocalImageAttestations(vr.ctx, l.Dir, vr.co)
	return nil
}

// readRegistry reads the signatures (of the image and of the index the
// reference named, if any) and the attestations from the registry.
func (vr *verification) readRegistry() {
	d := vr.res.Ref.Context().Digest(vr.res.Digest.String())
	vr.v = &Verification{Ref: d.String(), Digest: vr.res.Digest.String()}
	vr.co.ClaimVerifier = repositoryClaim(vr.ref, d)
	vr.sigs, _, vr.sigErr = cosign.VerifyImageSignatures(vr.ctx, d, vr.co)
	if vr.res.IndexDigest != nil {
		vr.indexSignatures()
	}
	vr.co.ClaimVerifier = cosign.IntotoSubjectClaimVerifier
	vr.atts, _, vr.attErr = cosign.VerifyImageAttestations(vr.ctx, d, vr.co)
}

// repositoryClaim checks a signature's digest and that it names the
// repository a node pulls (the given reference's, before any mirror
// rewriting).
func repositoryClaim(ref string, d name.Digest) func(oci.Signature, v1.Hash, map[string]interface{}) error {
	want := d.Context().Name()
	if given, err := name.ParseReference(ref); err == nil {
		want = given.Context().Name()
	}
	return func(sig oci.Signature, h v1.Hash, ann map[string]interface{}) error {
		if err := cosign.SimpleClaimVerifier(sig, h, ann); err != nil {
			return err
		}
		id, err := signedIdentity(sig)
		if err != nil {
			return err
		}
		if !sameRepository(id, want) {
			return fmt.Errorf("signature names %q, not repository %q", id, want)
		}
		return nil
	}
}

// indexSignatures checks the signature of the index the reference named.
func (vr *verification) indexSignatures() {
	v := vr.v
	v.Index = vr.res.IndexDigest.String()
	isigs, _, err := cosign.VerifyImageSignatures(vr.ctx, vr.res.Ref.Context().Digest(v.Index), vr.co)
	if err != nil {
		v.IndexSignatureError = err.Error()
	} else if v.IndexSignatures = len(isigs); len(isigs) == 0 {
		v.IndexSignatureError = "no signature by this key"
	}
}

// signatures records the image's signature check.
func (vr *verification) signatures() {
	v := vr.v
	if vr.sigErr != nil {
		v.SignatureError = vr.sigErr.Error()
		return
	}
	v.Signatures = len(vr.sigs)
	if len(vr.sigs) > 0 {
		v.SignedIdentity, _ = signedIdentity(vr.sigs[0])
	}
}

// attestations counts the provenance attestations that verified, keeps
// the first one's statement and checks the first SBOM.
func (vr *verification) attestations() {
	v := vr.v
	for _, a := range vr.atts {
		st, err := decodeStatement(a)
		if err == nil && st.PredicateType == SBOMPredicateType && v.SBOM == nil {
			v.SBOM, v.SBOMError = checkSBOM(a, v.Digest)
		}
		if err != nil || st.PredicateType != PredicateType {
			continue
		}
		v.Attestations++
		if v.Provenance == nil {
			v.Provenance = st
		}
	}
	if v.Attestations == 0 {
		v.AttestationError = fmt.Sprintf("no attestation of type %s by this key", PredicateType)
	}
}

// missingSBOM tells an image without an SBOM from one whose SBOM does not
// verify: cosign keeps the attestations that verify and drops the others
// silently, so an SBOM whose statement was edited would read as no SBOM
// at all. Only an image with no SBOM attestation, whose provenance does
// not record one (signed before oslayer attached SBOMs), has none.
func (vr *verification) missingSBOM() {
	v := vr.v
	if v.SBOM != nil || v.SBOMError != "" {
		return
	}
	n, err := unverifiedSBOMs(vr.ctx, vr.res.Ref, vr.ref, v.Digest, vr.o)
	switch {
	case err != nil:
		v.SBOMError = "reading the attestations again: " + err.Error()
	case n > 0:
		v.SBOMError = fmt.Sprintf("%d SBOM attestation(s) of %s attached, none verifies with this key (its statement or signature was changed, it names another image, or another key signed it)", n, v.Digest)
	case v.Provenance != nil && v.Provenance.Predicate.BuildDefinition.InternalParameters[ParamSBOM] != "":
		v.SBOMError = fmt.Sprintf("no SBOM attestation of %s, but its provenance (internalParameters.%s) says oslayer attached one when it signed it: the SBOM was removed", v.Digest, ParamSBOM)
	}
}

// provenanceDependencies fills Base and Inputs from the provenance.
func (v *Verification) provenanceDependencies() {
	if v.Provenance == nil {
		return
	}
	deps := v.Provenance.Predicate.BuildDefinition.ResolvedDependencies
	for i, rd := range deps {
		switch rd.Annotations[AnnotationRole] {
		case "base":
			v.Base = &deps[i]
		case "input":
			v.Inputs = append(v.Inputs, rd)
		}
	}
}

// failure is the error wrapping ErrVerify that names every failed check
// (nil when all passed).
func (v *Verification) failure() error {
	var errs []string
	if v.SignatureError != "" {
		errs = append(errs, "signature: "+v.SignatureError)
	}
	if v.AttestationError != "" {
		errs = append(errs, "attestation: "+v.AttestationError)
	}
	if v.IndexSignatureError != "" {
		errs = append(errs, "index "+v.Index+" signature: "+v.IndexSignatureError)
	}
	if v.SBOMError != "" {
		errs = append(errs, "sbom: "+v.SBOMError)
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w for %s: %s", ErrVerify, v.Ref, strings.Join(errs, "; "))
	}
	return nil
}

func signedIdentity(sig oci.Signature) (string, error) {
	p, err := sig.Payload()
	if err != nil {
		return "", err
	}
	var ss payload.SimpleContainerImage
	if err := json.Unmarshal(p, &ss); err != nil {
		return "", fmt.Errorf("signature payload: %v", err)
	}
	return ss.Critical.Identity.DockerReference, nil
}

// sameRepository compares a signed docker-reference with a repository,
// ignoring tags and digests and docker.io spellings.
func sameRepository(signed, repo string) bool {
	a, err := name.ParseReference(signed)
	if err != nil {
		r, err2 := name.NewRepository(signed)
		if err2 != nil {
			return false
		}
		return r.Name() == repoName(repo)
	}
	return a.Context().Name() == repoName(repo)
}

func repoName(s string) string {
	r, err := name.NewRepository(s)
	if err != nil {
		return s
	}
	return r.Name()
}

// layoutSignedImage checks that the image the OCI layout dir holds
// signatures for (cosign's kind annotation) is d.
func layoutSignedImage(dir string, d v1.Hash) error {
	idx, err := colayout.SignedImageIndex(dir)
	if err != nil {
		return err
	}
	si, err := idx.SignedImage(v1.Hash{})
	if err != nil {
		return err
	}
	if si == nil {
		return field.Errorf("the layout %s holds no signed image (no index.json entry with annotation kind=%s; sign it when building (%v) or with cosign save)", dir, publish.KindImage, field.Name("signing.key"))
	}
	h, err := si.Digest()
	if err != nil {
		return err
	}
	if h != d {
		return fmt.Errorf("the layout %s holds signatures for %s, not for %s", dir, h, d)
	}
	return nil
}

// checkSBOM decodes the SPDX SBOM attestation a (its signature and
// subject were verified) and checks it describes digest: its subject and
// name, every file with a SHA256 and a SHA1 checksum and the source it came
// from.
func checkSBOM(a oci.Signature, digest string) (*SPDX, string) {
	p, err := a.Payload()
	if err != nil {
		return nil, err.Error()
	}
	var env struct {
		Payload string `json:"payload"`
	}
	if err := json.Unmarshal(p, &env); err != nil {
		return nil, "not a DSSE envelope: " + err.Error()
	}
	b, err := base64.StdEncoding.DecodeString(env.Payload)
	if err != nil {
		return nil, "payload: " + err.Error()
	}
	var st SBOMStatement
	if err := json.Unmarshal(b, &st); err != nil || st.Predicate == nil {
		return nil, fmt.Sprintf("not an SPDX statement: %v", err)
	}
	doc := st.Predicate
	if len(st.Subject) != 1 || "sha256:"+st.Subject[0].Digest["sha256"] != digest || !strings.HasSuffix(doc.Name, digest) {
		return doc, "the SBOM describes another image than " + digest
	}
	if doc.SPDXVersion != "SPDX-2.3" {
		return doc, "spdxVersion " + doc.SPDXVersion + ", want SPDX-2.3"
	}
	for _, f := range doc.Files {
		algs := map[string]bool{}
		for _, c := range f.Checksums {
			algs[c.Algorithm] = c.ChecksumValue != ""
		}
		if !algs["SHA1"] || !algs["SHA256"] || !strings.HasPrefix(f.Comment, "source: ") {
			return doc, "file " + f.FileName + " lacks a SHA1 or SHA256 checksum or its source"
		}
	}
	return doc, ""
}

// unverifiedSBOMs counts the SPDX SBOM attestations attached to digest
// in the repository of repoRef or, when repoRef is nil, in the OCI layout
// ref, whether or not they verify: verify calls it when none verified.
func unverifiedSBOMs(ctx context.Context, repoRef name.Reference, ref, digest string, o *options) (int, error) {
	var atts oci.Signatures
	if repoRef == nil {
		l, err := registry.ParseLayout(ref)
		if err != nil {
			return 0, err
		}
		idx, err := colayout.SignedImageIndex(l.Dir)
		if err != nil {
			return 0, err
		}
		si, err := idx.SignedImage(v1.Hash{})
		if err != nil || si == nil {
			return 0, err
		}
		if atts, err = si.Attestations(); err != nil {
			return 0, err
		}
	} else {
		d := repoRef.Context().Digest(digest)
		var err error
		if atts, err = ociremote.SignedUnknown(d, ociremote.WithRemoteOptions(o.remoteOpts(ctx)...)).Attestations(); err != nil {
			return 0, err
		}
	}
	l, err := atts.Get()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, a := range l {
		if pt, _ := attestationPredicateType(a); pt == SBOMPredicateType {
			n++
		}
	}
	return n, nil
}
