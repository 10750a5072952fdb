package sign

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/sigstore/cosign/v2/pkg/oci"
	"github.com/sigstore/cosign/v2/pkg/oci/mutate"
	ociremote "github.com/sigstore/cosign/v2/pkg/oci/remote"
	"github.com/sigstore/cosign/v2/pkg/oci/static"
	ctypes "github.com/sigstore/cosign/v2/pkg/types"
	"github.com/sigstore/sigstore/pkg/signature/dsse"
	sigopts "github.com/sigstore/sigstore/pkg/signature/options"

	"github.com/oslayer/oslayer/assemble"
	"github.com/oslayer/oslayer/internal/registry"
)

// Provenance constants.
const (
	// StatementType is the in-toto statement type.
	StatementType = "https://in-toto.io/Statement/v1"
	// PredicateType is the SLSA provenance v1 predicate type
	// (cosign's "slsaprovenance1").
	PredicateType = "https://slsa.dev/provenance/v1"
	// BuilderID identifies oslayer as the builder.
	BuilderID = "https://github.com/oslayer/oslayer"
	// BuildType identifies how oslayer builds a pool image.
	BuildType = "https://github.com/oslayer/oslayer/buildtypes/pool-image/v1"
	// ParamSBOM is the internal parameter that records the SBOM attached
	// with the provenance (its predicate type); images signed before it
	// was recorded have none and no SBOM.
	ParamSBOM = "sbom"
)

// Statement is an in-toto v1 statement with a SLSA provenance v1 predicate.
type Statement struct {
	Type          string               `json:"_type"`
	Subject       []ResourceDescriptor `json:"subject"`
	PredicateType string               `json:"predicateType"`
	Predicate     Provenance           `json:"predicate"`
}

// Provenance is the SLSA provenance v1 predicate.
type Provenance struct {
	BuildDefinition BuildDefinition `json:"buildDefinition"`
	RunDetails      RunDetails      `json:"runDetails"`
}

// BuildDefinition says what was built from what.
type BuildDefinition struct {
	BuildType            string               `json:"buildType"`
	ExternalParameters   ExternalParameters   `json:"externalParameters"`
	InternalParameters   map[string]string    `json:"internalParameters,omitempty"`
	ResolvedDependencies []ResourceDescriptor `json:"resolvedDependencies"`
}

// ExternalParameters are what the user chose: the pool, the base reference
// and the flags that change the output.
type ExternalParameters struct {
	Pool  string            `json:"pool"`
	Base  string            `json:"base"`
	Flags map[string]string `json:"flags,omitempty"`
}

// RunDetails names the builder and what it produced besides the image.
type RunDetails struct {
	Builder    Builder              `json:"builder"`
	Byproducts []ResourceDescriptor `json:"byproducts,omitempty"`
}

// Builder identifies the builder.
type Builder struct {
	ID      string            `json:"id"`
	Version map[string]string `json:"version,omitempty"`
}

// ResourceDescriptor is an in-toto resource descriptor.
type ResourceDescriptor struct {
	Name        string            `json:"name,omitempty"`
	URI         string            `json:"uri,omitempty"`
	Digest      map[string]string `json:"digest,omitempty"`
	MediaType   string            `json:"mediaType,omitempty"`
	Annotations map[string]any    `json:"annotations,omitempty"`
}

// Annotation keys on resolved dependencies and byproducts.
const (
	AnnotationRole   = "oslayer.role"   // "base", "input" or "layer"
	AnnotationKind   = "oslayer.kind"   // input kind
	AnnotationDiffID = "oslayer.diffID" // layer diffID
	AnnotationSize   = "oslayer.size"   // layer size
	AnnotationSource = "oslayer.source" // what rendered the layer
)

// NewStatement describes b, published at d, built by oslayer version.
// It has no timestamps: the same build gives the same statement.
func NewStatement(b *assemble.Built, d name.Digest, version string) (*Statement, error) {
	if b == nil {
		return nil, fmt.Errorf("provenance: no build")
	}
	h := strings.TrimPrefix(d.DigestStr(), "sha256:")
	st := &Statement{
		Type:          StatementType,
		Subject:       []ResourceDescriptor{{Name: d.Context().Name(), Digest: map[string]string{"sha256": h}}},
		PredicateType: PredicateType,
	}
	bd := &st.Predicate.BuildDefinition
	bd.BuildType = BuildType
	flags := b.Flags
	if base, ok := flags["base"]; ok {
		flags = maps.Clone(flags)
		flags["base"] = relRef(base)
	}
	bd.ExternalParameters = ExternalParameters{Pool: b.Pool, Base: relRef(b.Base.Ref), Flags: flags}
	// oslayer attaches an SBOM to every image it signs; the provenance says
	// so, and verify tells a stripped SBOM from an image signed before.
	bd.InternalParameters = map[string]string{ParamSBOM: SBOMPredicateType}
	if b.InputsDigest != "" {
		bd.InternalParameters["inputsDigest"] = b.InputsDigest
	}
	base := ResourceDescriptor{Name: "base", Annotations: map[string]any{AnnotationRole: "base"}}
	if b.Base.Digest.Hex != "" {
		base.Digest = map[string]string{b.Base.Digest.Algorithm: b.Base.Digest.Hex}
		base.URI = baseURI(relRef(b.Base.Ref), b.Base.Digest.String())
	}
	bd.ResolvedDependencies = append(bd.ResolvedDependencies, base)
	uris := inputURIs(b.Inputs)
	for i, in := range b.Inputs {
		rd := ResourceDescriptor{
			Name:        in.Name,
			URI:         uris[i],
			Annotations: map[string]any{AnnotationRole: "input", AnnotationKind: in.Kind},
		}
		if in.SHA256 != "" {
			rd.Digest = map[string]string{"sha256": strings.TrimPrefix(in.SHA256, "sha256:")}
		}
		bd.ResolvedDependencies = append(bd.ResolvedDependencies, rd)
	}
	rd := &st.Predicate.RunDetails
	rd.Builder = Builder{ID: BuilderID, Version: map[string]string{"oslayer": version}}
	for _, l := range b.Added {
		rd.Byproducts = append(rd.Byproducts, ResourceDescriptor{
			Name:   l.Source,
			Digest: map[string]string{l.Digest.Algorithm: l.Digest.Hex},
			Annotations: map[string]any{
				AnnotationRole: "layer", AnnotationDiffID: l.DiffID.String(),
				AnnotationSize: l.Size, AnnotationSource: l.Source,
			},
		})
	}
	return st, nil
}

// relPath is p relative to the working directory when p is absolute, so
// the provenance does not record where on the build machine the inputs
// were (relative paths stay as they were given).
func relPath(p string) string {
	if !filepath.IsAbs(p) {
		return p
	}
	wd, err := os.Getwd()
	if err != nil {
		return p
	}
	if r, err := filepath.Rel(wd, p); err == nil {
		return filepath.ToSlash(r)
	}
	return p
}

// relRef is an OCI layout reference with its directory made relative by
// relPath; registry references are returned as they are.
func relRef(ref string) string {
	if !registry.IsLayout(ref) {
		return ref
	}
	l, err := registry.ParseLayout(ref)
	if err != nil {
		return ref
	}
	out := registry.LayoutPrefix + relPath(l.Dir)
	switch {
	case l.Digest.Hex != "":
		out += "@" + l.Digest.String()
	case l.Tag != "":
		out += ":" + l.Tag
	}
	return out
}

// baseURI names the base by digest: "docker://REG/REPO@sha256:..." or,
// for an OCI layout, "oci:DIR@sha256:...".
func baseURI(ref, digest string) string {
	if registry.IsLayout(ref) {
		if l, err := registry.ParseLayout(ref); err == nil {
			return registry.LayoutPrefix + l.Dir + "@" + digest
		}
		return ref + "@" + digest
	}
	if i := strings.Index(ref, "@"); i >= 0 {
		ref = ref[:i]
	}
	if r, err := name.ParseReference(ref); err == nil {
		return "docker://" + r.Context().Name() + "@" + digest
	}
	return "docker://" + ref + "@" + digest
}

// AttestResult says what Attest wrote.
type AttestResult struct {
	Ref            string `json:"ref"`
	AttestationTag string `json:"attestationTag"`
	PredicateType  string `json:"predicateType"`
	// Replaced counts earlier attestations of the same predicate type that
	// the new one replaced.
	Replaced int `json:"replaced"`
	// Attestations counts the attestation layers afterwards.
	Attestations int `json:"attestations"`
	// Existing is true when the same statement, signed by the same key, was
	// already attached: nothing was written.
	Existing bool `json:"existing"`
	// Writes counts the writes of AttestationTag: more than one when
	// another writer replaced it meanwhile.
	Writes int `json:"writes,omitempty"`
	// Readded lists what the final check with our key found missing and
	// added again ("signature", "attestation"): other writers replaced a
	// tag after it was written.
	Readded []string `json:"readded,omitempty"`
	// SBOM is what attaching the SPDX SBOM attestation wrote (registry
	// targets; in an OCI layout both are in one attestations image).
	SBOM *AttestResult `json:"sbom,omitempty"`
}

// Attest DSSE-signs st and attaches it to d the way `cosign attest` does
// (the "sha256-HEX.att" tag). When the same statement signed by the same
// key is already attached nothing is written (a rebuild with unchanged
// inputs uploads nothing); otherwise our own earlier attestations of the
// same predicate type are replaced, so they never pile up, and every other
// attestation (other predicate types, other signers) is kept. Like Sign it
// reads the tag back after writing and merges again when another writer
// replaced it meanwhile (at most MaxMergeAttempts writes).
func (s *Signer) Attest(ctx context.Context, d name.Digest, st *Statement) (*AttestResult, error) {
	stm, err := newStatement(st.PredicateType, st)
	if err != nil {
		return nil, fmt.Errorf("encoding statement for %s: %w", d, err)
	}
	rs, err := s.attest(ctx, d, []statement{stm})
	if err != nil {
		return nil, err
	}
	return rs[0], nil
}

// AttestSBOM attaches the SBOM statement st to d like Attest.
func (s *Signer) AttestSBOM(ctx context.Context, d name.Digest, st *SBOMStatement) (*AttestResult, error) {
	stm, err := newStatement(st.PredicateType, st)
	if err != nil {
		return nil, fmt.Errorf("encoding SBOM for %s: %w", d, err)
	}
	rs, err := s.attest(ctx, d, []statement{stm})
	if err != nil {
		return nil, err
	}
	return rs[0], nil
}

// statement is an encoded in-toto statement and its predicate type.
type statement struct {
	predicateType string
	payload       []byte
}

func newStatement(predicateType string, v any) (statement, error) {
	b, err := json.Marshal(v)
	return statement{predicateType: predicateType, payload: b}, err
}

// envelope DSSE-signs stm into an attestation layer.
func (s *Signer) envelope(ctx context.Context, stm statement) (oci.Signature, error) {
	env, err := dsse.WrapSigner(s.sv, ctypes.IntotoPayloadType).SignMessage(bytes.NewReader(stm.payload), sigopts.WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("signing %s statement: %w", stm.predicateType, err)
	}
	return static.NewAttestation(env, static.WithLayerMediaType(ctypes.DssePayloadType),
		static.WithAnnotations(map[string]string{"predicateType": stm.predicateType}))
}

// attestBoth attaches the provenance st and the SBOM sbom to d like
// Attest and AttestSBOM, with one read of the attestation tag (each
// envelope read once) and, when either is missing, one write holding both:
// an unchanged image costs the read, a new one the read and the write.
func (s *Signer) attestBoth(ctx context.Context, d name.Digest, st *Statement, sbom *SBOMStatement) (*AttestResult, error) {
	stp, sbp, err := statements(d, st, sbom)
	if err != nil {
		return nil, err
	}
	rs, err := s.attest(ctx, d, []statement{stp, sbp})
	if err != nil {
		return nil, err
	}
	rs[0].SBOM = rs[1]
	return rs[0], nil
}

// attestation names oci.Signature as a field (its method Signature would
// clash with the embedded field's name).
type attestation = oci.Signature

// statements encodes the provenance st and the SBOM sbom of d.
func statements(d name.Digest, st *Statement, sbom *SBOMStatement) (stp, sbp statement, err error) {
	if stp, err = newStatement(st.PredicateType, st); err != nil {
		return stp, sbp, fmt.Errorf("encoding statement for %s: %w", d, err)
	}
	if sbp, err = newStatement(sbom.PredicateType, sbom); err != nil {
		return stp, sbp, fmt.Errorf("encoding SBOM for %s: %w", d, err)
	}
	return stp, sbp, nil
}

// payloadOnce reads an attestation's envelope once, however often it is
// asked for.
type payloadOnce struct {
	attestation
	once sync.Once
	p    []byte
	err  error
}

func (p *payloadOnce) Payload() ([]byte, error) {
	p.once.Do(func() { p.p, p.err = p.attestation.Payload() })
	return p.p, p.err
}

// readOnce is the attestations image existing whose layers read their
// envelopes once (payloadOnce), for all the checks of one merge.
func readOnce(existing oci.Signatures) (oci.Signatures, []oci.Signature, error) {
	l, err := existing.Get()
	if err != nil {
		return nil, nil, err
	}
	once := make([]oci.Signature, len(l))
	for i, a := range l {
		once[i] = &payloadOnce{attestation: a}
	}
	return fixed{Signatures: existing, l: once}, once, nil
}

// attest attaches the statements stms to d (one result per statement, in
// their order): it reads the attestation tag once, and when any of them is
// missing writes them all in one image (replacing our own earlier
// attestations of their predicate types, keeping every other one). As
// Sign does, it reads the tag back after writing and merges again while
// another writer keeps replacing it, unless the signer is the sole writer.
func (s *Signer) attest(ctx context.Context, d name.Digest, stms []statement) ([]*AttestResult, error) {
	oo := s.ociOpts(ctx)
	at, err := ociremote.AttestationTag(d, oo...)
	if err != nil {
		return nil, err
	}
	r := &attestRun{s: s, d: d, at: at, oo: oo, stms: stms, rs: make([]*AttestResult, len(stms)), envs: make([]oci.Signature, len(stms))}
	for i, stm := range stms {
		r.rs[i] = &AttestResult{Ref: d.String(), AttestationTag: at.String(), PredicateType: stm.predicateType}
	}
	// Merge, never replace: as in Sign, read, add ours, write, read back,
	// and merge again while another writer keeps replacing the tag.
	for attempt := 0; ; attempt++ {
		existing, l, err := r.read()
		if err != nil {
			return nil, err
		}
		missing := r.missing(l)
		if len(missing) == 0 {
			r.present(ctx, attempt, len(l))
			return r.rs, nil
		}
		done, err := r.write(ctx, attempt, existing, len(l), missing)
		if err != nil {
			return nil, err
		}
		if done {
			return r.rs, nil
		}
	}
}

// attestRun is the state of one attest: the attestation tag, the
// statements, their results and envelopes (made once), and the writes
// so far.
type attestRun struct {
	s      *Signer
	d      name.Digest
	at     name.Tag
	oo     []ociremote.Option
	stms   []statement
	rs     []*AttestResult
	envs   []oci.Signature
	writes int
}

// read reads the attestations attached to d now.
func (r *attestRun) read() (oci.Signatures, []oci.Signature, error) {
	raw, err := ociremote.SignedUnknown(r.d, r.oo...).Attestations()
	if err != nil {
		return nil, nil, fmt.Errorf("reading attestations %s: %w", r.at, err)
	}
	existing, l, err := readOnce(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("reading attestations %s: %w", r.at, err)
	}
	return existing, l, nil
}

// missing are the indexes of the statements none of l attests.
func (r *attestRun) missing(l []oci.Signature) []int {
	var missing []int
	for i, stm := range r.stms {
		found := slices.ContainsFunc(l, func(a oci.Signature) bool { return r.s.sameAttestation(a, stm.payload) })
		if !found {
			missing = append(missing, i)
		}
	}
	return missing
}

// present fills the results once every statement is attested (n
// attestations attached), at attempt.
func (r *attestRun) present(ctx context.Context, attempt, n int) {
	for _, res := range r.rs {
		res.Existing, res.Attestations, res.Writes = attempt == 0, n, r.writes
	}
	if attempt == 0 {
		r.s.o.log.InfoContext(ctx, "attestation already present", "ref", r.d.String(), "tag", r.at.String())
	} else {
		r.s.o.log.InfoContext(ctx, "attested", "ref", r.d.String(), "tag", r.at.String(), "writes", r.writes)
	}
}

// write adds the missing statements to what was read (existing, n
// attestations) and writes the merge; done when the sole writer wrote it
// (nothing is read back).
func (r *attestRun) write(ctx context.Context, attempt int, existing oci.Signatures, n int, missing []int) (done bool, err error) {
	s := r.s
	if err := s.nextWrite(ctx, "attestation", r.at, attempt); err != nil {
		return false, err
	}
	ro, err := r.replaceOp(ctx, missing)
	if err != nil {
		return false, err
	}
	wrote, err := r.writeMerged(ctx, ro, existing)
	if err != nil {
		return false, err
	}
	total := 0
	for i, stm := range r.stms {
		r.rs[i].Replaced = ro.replaced[stm.predicateType]
		total += r.rs[i].Replaced
	}
	if s.o.sole && wrote {
		for _, res := range r.rs {
			res.Writes, res.Attestations = 1, n+len(missing)-total
		}
		s.o.log.InfoContext(ctx, "attested", "ref", r.d.String(), "tag", r.at.String(), "replaced", total, "writes", 1)
		return true, nil
	}
	if wrote {
		r.writes++
	} else {
		s.o.log.InfoContext(ctx, "attestation tag moved since it was read, or the registry refused its manifest while another writer wrote a blob it names; merging again", "tag", r.at.String())
	}
	return false, nil
}

// replaceOp adds the envelopes of the missing statements (made once) in
// place of our own earlier attestations of their predicate types.
func (r *attestRun) replaceOp(ctx context.Context, missing []int) (*replaceOp, error) {
	ro := &replaceOp{ours: r.s.ownAttestation, replaced: map[string]int{}}
	for _, i := range missing {
		if r.envs[i] == nil {
			var err error
			if r.envs[i], err = r.s.envelope(ctx, r.stms[i]); err != nil {
				return nil, fmt.Errorf("%s: %w", r.d, err)
			}
		}
		ro.add = append(ro.add, r.envs[i])
		ro.predicateTypes = append(ro.predicateTypes, r.stms[i].predicateType)
	}
	return ro, nil
}

// writeMerged composes the new attestations image from exactly what was
// read, as Sign does (see Signer.writeMerged), and writes it; wrote is
// false when the tag moved meanwhile.
func (r *attestRun) writeMerged(ctx context.Context, ro *replaceOp, existing oci.Signatures) (bool, error) {
	replaced, err := ro.Replace(existing, nil)
	if err != nil {
		return false, fmt.Errorf("reading attestations %s: %w", r.at, err)
	}
	merged, err := mutate.ReplaceSignatures(replaced)
	if err != nil {
		return false, fmt.Errorf("reading attestations %s: %w", r.at, err)
	}
	wrote, err := r.s.writeMerged(ctx, r.at, merged, existing)
	if err != nil {
		return false, fmt.Errorf("writing attestation %s: %w", r.at, err)
	}
	return wrote, nil
}

// ownAttestation reports whether a is a DSSE envelope signed by s's key.
func (s *Signer) ownAttestation(a oci.Signature) bool {
	env, err := a.Payload()
	if err != nil {
		return false
	}
	return dsse.WrapVerifier(s.sv).VerifySignature(bytes.NewReader(env), nil) == nil
}

// sameAttestation reports whether a is a DSSE envelope of exactly payload
// with a valid signature by s's key.
func (s *Signer) sameAttestation(a oci.Signature, payload []byte) bool {
	env, err := a.Payload()
	if err != nil {
		return false
	}
	var e struct {
		PayloadType string `json:"payloadType"`
		Payload     string `json:"payload"`
	}
	if err := json.Unmarshal(env, &e); err != nil || e.PayloadType != ctypes.IntotoPayloadType {
		return false
	}
	if p, err := base64.StdEncoding.DecodeString(e.Payload); err != nil || !bytes.Equal(p, payload) {
		return false
	}
	return s.ownAttestation(a)
}

// replaceOp keeps every existing attestation except our own earlier ones
// (ours reports whether our key signed one) of the predicate types of the
// attestations it adds: other signers' provenance survives. Replace puts
// add (or, when add is empty, o) first. replaced counts what it dropped
// per predicate type.
type replaceOp struct {
	predicateTypes []string
	add            []oci.Signature
	ours           func(oci.Signature) bool
	replaced       map[string]int
}

func (r *replaceOp) Replace(existing oci.Signatures, o oci.Signature) (oci.Signatures, error) {
	l, err := existing.Get()
	if err != nil {
		return nil, err
	}
	keep := append([]oci.Signature(nil), r.add...)
	if len(keep) == 0 {
		keep = append(keep, o)
	}
	r.replaced = map[string]int{}
	for _, s := range l {
		if pt, _ := attestationPredicateType(s); slices.Contains(r.predicateTypes, pt) && r.ours(s) {
			r.replaced[pt]++
			continue
		}
		keep = append(keep, s)
	}
	return fixed{Signatures: existing, l: keep}, nil
}

type fixed struct {
	oci.Signatures
	l []oci.Signature
}

func (f fixed) Get() ([]oci.Signature, error) { return f.l, nil }

// attestationPredicateType reads the predicate type of a DSSE attestation
// layer ("" when it is not one).
func attestationPredicateType(s oci.Signature) (string, error) {
	if a, err := s.Annotations(); err == nil && a["predicateType"] != "" {
		return a["predicateType"], nil
	}
	st, err := decodeStatement(s)
	if err != nil {
		return "", err
	}
	return st.PredicateType, nil
}

// decodeStatement decodes the in-toto statement in a DSSE attestation layer.
func decodeStatement(s oci.Signature) (*Statement, error) {
	p, err := s.Payload()
	if err != nil {
		return nil, err
	}
	var env struct {
		PayloadType string `json:"payloadType"`
		Payload     string `json:"payload"`
	}
	if err := json.Unmarshal(p, &env); err != nil {
		return nil, fmt.Errorf("attestation is not a DSSE envelope: %v", err)
	}
	b, err := base64.StdEncoding.DecodeString(env.Payload)
	if err != nil {
		return nil, fmt.Errorf("attestation payload: %v", err)
	}
	var st Statement
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("attestation statement: %v", err)
	}
	return &st, nil
}
