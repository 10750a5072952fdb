package sign

import (
	"bytes"
	"context"
	"crypto"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	ggcrstatic "github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	cremote "github.com/sigstore/cosign/v2/pkg/cosign/remote"
	"github.com/sigstore/cosign/v2/pkg/oci"
	"github.com/sigstore/cosign/v2/pkg/oci/empty"
	"github.com/sigstore/cosign/v2/pkg/oci/mutate"
	ociremote "github.com/sigstore/cosign/v2/pkg/oci/remote"
	"github.com/sigstore/cosign/v2/pkg/oci/static"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	sigopts "github.com/sigstore/sigstore/pkg/signature/options"
	"github.com/sigstore/sigstore/pkg/signature/payload"

	"github.com/oslayer/oslayer/internal/registry"
)

// Option configures a Signer or Verify.
type Option func(*options)

type options struct {
	reg       *registry.Options
	log       *slog.Logger
	referrers bool
	version   string
	identity  string
	sole      bool
}

func makeOptions(opts []Option) *options {
	o := &options{}
	for _, f := range opts {
		f(o)
	}
	if o.reg == nil {
		o.reg = &registry.Options{}
	}
	if o.log == nil {
		o.log = slog.New(slog.DiscardHandler)
	}
	if o.version == "" {
		o.version = "dev"
	}
	return o
}

// WithRegistry sets how registries are reached (credentials, transport).
func WithRegistry(r *registry.Options) Option { return func(o *options) { o.reg = r } }

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithReferrers also writes the signature as an OCI 1.1 referrer (with the
// referrers tag schema fallback on registries without the referrers API),
// readable by `cosign verify --experimental-oci11`. The classic ".sig" and
// ".att" tags are always written: they are what containers/image reads.
// The attestation is not written as a referrer.
func WithReferrers(on bool) Option { return func(o *options) { o.referrers = on } }

// WithSoleWriter says nothing else writes the signature and attestation
// tags of the images signed while the signer runs (a fleet run: each image
// is signed by one pool of one process). Sign and Attest still read the
// tag and merge into what is there, but do not read it back after
// writing, and the attest stage does not verify the result again
// (Confirm): with no other writer there is nothing that could have
// dropped ours.
func WithSoleWriter() Option { return func(o *options) { o.sole = true } }

// WithVersion sets the oslayer version recorded as the builder version.
func WithVersion(v string) Option { return func(o *options) { o.version = v } }

// Signer signs and attests images with one key.
type Signer struct {
	sv signature.SignerVerifier
	o  *options
}

// NewSigner returns a Signer for sv.
func NewSigner(sv signature.SignerVerifier, opts ...Option) *Signer {
	return &Signer{sv: sv, o: makeOptions(opts)}
}

// PublicKey returns the PEM public key of the signer.
func (s *Signer) PublicKey() ([]byte, error) { return PublicKeyPEM(s.sv) }

func (s *Signer) ociOpts(ctx context.Context) []ociremote.Option {
	return []ociremote.Option{ociremote.WithRemoteOptions(s.o.reg.RemoteOptions(ctx)...)}
}

// SignResult says what Sign wrote.
type SignResult struct {
	// Ref is the signed digested reference.
	Ref string `json:"ref"`
	// SignatureTag is where the signature image lives ("REPO:sha256-HEX.sig").
	SignatureTag string `json:"signatureTag"`
	// Existing is true when a signature of this digest by this key was
	// already there: nothing was written.
	Existing bool `json:"existing"`
	// Signatures counts the signature layers under SignatureTag afterwards.
	Signatures int `json:"signatures"`
	// Referrer is true when an OCI 1.1 referrer was written too.
	Referrer bool `json:"referrer,omitempty"`
	// Writes counts the writes of SignatureTag: more than one when
	// another writer replaced it meanwhile and the signature was merged
	// again.
	Writes int `json:"writes,omitempty"`
	// RecordSignatureTag is where the signature of the image's build
	// record lives (the record is signed with the image, by the same key).
	RecordSignatureTag string `json:"recordSignatureTag,omitempty"`
}

// Payload returns the simple signing payload cosign signs for d: the
// repository as docker-reference and the manifest digest.
func Payload(d name.Digest) ([]byte, error) {
	return payload.Cosign{Image: d}.MarshalJSON()
}

// Sign signs the manifest digest d and adds the signature to the classic
// cosign signature image ("sha256-HEX.sig" tag). Signatures already there,
// by any key, are kept. A signature of d by the same key that is already
// there is kept and nothing is written, so re-signing never piles up. After
// writing, Sign reads the tag back and merges again (at most
// MaxMergeAttempts writes) when another writer replaced it meanwhile: it
// returns only once the tag holds a signature that our key verifies.
func (s *Signer) Sign(ctx context.Context, d name.Digest) (*SignResult, error) {
	sig, err := s.signature(ctx, d)
	if err != nil {
		return nil, err
	}
	oo := s.ociOpts(ctx)
	st, err := ociremote.SignatureTag(d, oo...)
	if err != nil {
		return nil, err
	}
	res := &SignResult{Ref: d.String(), SignatureTag: st.String()}
	dd := cremote.NewDupeDetector(s.sv)
	writes := 0

	// Merge, never replace: read what the tag holds, add our signature,
	// write, then read back. Another writer (a build signing the same
	// digest with another key, `cosign sign`) may have replaced the tag
	// between our read and our write; then our signature is missing from
	// what we read back and we merge again, a bounded number of times.
	for attempt := 0; ; attempt++ {
		se := ociremote.SignedUnknown(d, oo...)
		existing, err := se.Signatures()
		if err != nil {
			return nil, fmt.Errorf("reading signatures %s: %w", st, err)
		}
		dup, err := dd.Find(existing, sig)
		if err != nil {
			return nil, fmt.Errorf("reading signatures %s: %w", st, err)
		}
		if dup != nil {
			res.Existing, res.Writes = attempt == 0, writes
			res.Signatures = count(existing)
			if attempt == 0 {
				s.o.log.InfoContext(ctx, "signature already present", "ref", d.String(), "tag", st.String())
			} else {
				s.o.log.InfoContext(ctx, "signed", "ref", d.String(), "tag", st.String(), "writes", writes)
			}
			if s.o.referrers {
				if err := s.writeReferrer(ctx, d, dup); err != nil {
					return nil, err
				}
				res.Referrer = true
			}
			return res, nil
		}
		if err := s.nextWrite(ctx, "signature", st, attempt); err != nil {
			return nil, err
		}
		// Compose from exactly what was read (not from a fresh read
		// inside the write), so the guard below compares with the base.
		merged, err := mutate.AppendSignatures(existing, false, sig)
		if err != nil {
			return nil, err
		}
		wrote, err := s.writeMerged(ctx, st, merged, existing)
		if err != nil {
			return nil, fmt.Errorf("writing signature %s: %w", st, err)
		}
		if s.o.sole && wrote {
			res.Writes, res.Signatures = 1, count(existing)+1
			s.o.log.InfoContext(ctx, "signed", "ref", d.String(), "tag", st.String(), "writes", 1)
			return res, nil
		}
		if wrote {
			writes++
		} else {
			s.o.log.InfoContext(ctx, "signature tag moved since it was read, or the registry refused its manifest while another writer wrote a blob it names; merging again", "tag", st.String())
		}
	}
}

// writeMerged writes merged, the signature or attestation image made by
// adding ours to base (what tag held when read), to tag. The registry
// cannot replace a tag only if it still holds what we read, so a writer
// that read the tag and then stalled (uploading blobs, descheduled on a
// loaded machine) would drop every layer another writer added and
// confirmed meanwhile. writeMerged therefore uploads the blobs first and
// then checks, right before the manifest write, that the tag still holds
// base; when it moved, nothing is written and it returns false: the
// caller reads and merges again. That leaves one request's gap between the
// check and the write, instead of the whole read-to-write span. With
// WithSoleWriter there is no other writer: the manifest is put without
// that check. Layers base holds are not uploaded or checked again.
func (s *Signer) writeMerged(ctx context.Context, tag name.Tag, merged, base oci.Signatures) (bool, error) {
	ro := s.o.remoteOpts(ctx)
	ls, err := merged.Layers()
	if err != nil {
		return false, err
	}
	// The layers of what the tag held are in the repository already.
	there := map[v1.Hash]bool{}
	if bl, err := base.Get(); err == nil {
		for _, l := range bl {
			if h, err := l.Digest(); err == nil {
				there[h] = true
			}
		}
	}
	for _, l := range ls {
		if h, err := l.Digest(); err == nil && there[h] {
			continue
		}
		if err := remote.WriteLayer(tag.Repository, l, ro...); err != nil {
			return false, err
		}
	}
	cfg, err := merged.RawConfigFile()
	if err != nil {
		return false, err
	}
	m, err := merged.Manifest()
	if err != nil {
		return false, err
	}
	if err := remote.WriteLayer(tag.Repository, ggcrstatic.NewLayer(cfg, m.Config.MediaType), ro...); err != nil {
		return false, err
	}
	if s.o.sole {
		// The tag holds what was read: put the manifest, without looking
		// at the tag again.
		return put(tag, merged, ro)
	}
	read, err := base.Digest()
	if err != nil {
		return false, err
	}
	now := emptyDigest
	desc, err := remote.Head(tag, ro...)
	var te *transport.Error
	switch {
	case errors.As(err, &te) && te.StatusCode == http.StatusNotFound:
	case err != nil:
		return false, err
	default:
		now = desc.Digest
	}
	if now != read {
		return false, nil
	}
	return put(tag, merged, ro)
}

// put writes the manifest of merged to tag. A PUT the registry refused
// because a blob looked unknown or corrupt while another writer rewrote
// its link (registry.TornManifestPut: concurrent signers upload the same
// blobs) is reported as not written, like a moved tag: the caller reads,
// merges and writes again, a bounded number of times.
func put(tag name.Tag, merged oci.Signatures, ro []remote.Option) (bool, error) {
	err := remote.Put(tag, merged, ro...)
	if registry.TornManifestPut(err) {
		return false, nil
	}
	return err == nil, err
}

// emptyDigest is the digest of the image cosign reads for a missing tag.
var emptyDigest = func() v1.Hash {
	h, err := empty.Signatures().Digest()
	if err != nil {
		panic(err)
	}
	return h
}()

// signature signs the simple signing payload of d with s's key.
func (s *Signer) signature(ctx context.Context, d name.Digest) (oci.Signature, error) {
	pl, err := Payload(d)
	if err != nil {
		return nil, fmt.Errorf("payload for %s: %w", d, err)
	}
	raw, err := s.sv.SignMessage(bytes.NewReader(pl), sigopts.WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("signing %s: %w", d, err)
	}
	return static.NewSignature(pl, base64.StdEncoding.EncodeToString(raw))
}

// MaxMergeAttempts bounds how often Sign and Attest try to write a
// signature or attestation tag that other writers keep replacing (or
// moving between our read and our write) before giving up.
const MaxMergeAttempts = 8

// nextWrite comes before each write of a merge loop (Sign, Attest): it
// gives up after MaxMergeAttempts writes and, before a repeated write, says
// so and pauses.
func (s *Signer) nextWrite(ctx context.Context, what string, tag name.Tag, attempt int) error {
	if attempt == MaxMergeAttempts {
		return fmt.Errorf("%s %s: ours is missing after %d attempts to write it: other writers keep replacing the tag, or the registry keeps refusing its manifest (a blob it names unknown or invalid)", what, tag, attempt)
	}
	if attempt > 0 {
		s.o.log.WarnContext(ctx, what+" tag was replaced by another writer; merging again", "tag", tag.String(), "attempt", attempt+1)
		if err := mergePause(ctx, attempt); err != nil {
			return fmt.Errorf("%s %s: %w", what, tag, err)
		}
	}
	return nil
}

// mergePause waits a little before merging again, longer after every
// attempt and randomised, so two writers racing for one tag fall out of
// step.
func mergePause(ctx context.Context, attempt int) error {
	d := time.Duration(attempt)*50*time.Millisecond + time.Duration(rand.Int64N(int64(100*time.Millisecond)))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// SignatureArtifactType is the artifactType of a signature referrer, as
// cosign's OCI 1.1 mode writes and reads it.
const SignatureArtifactType = "application/vnd.dev.cosign.artifact.sig.v1+json"

// writeReferrer writes sig alone as an OCI 1.1 referrer of d, in the shape
// `cosign sign --registry-referrers-mode=oci-1-1` writes (config media
// type and artifactType SignatureArtifactType). On registries without the
// referrers API go-containerregistry maintains the referrers tag schema
// ("sha256-HEX" index). Writing the same signature again yields the same
// manifest, so referrers do not pile up.
func (s *Signer) writeReferrer(ctx context.Context, d name.Digest, sig oci.Signature) error {
	sigs, err := mutate.AppendSignatures(empty.Signatures(), false, sig)
	if err != nil {
		return err
	}
	ro := s.o.remoteOpts(ctx)
	subject, err := remote.Head(d, ro...)
	if err != nil {
		return fmt.Errorf("signature referrer of %s: %w", d, err)
	}
	if err := remote.WriteLayer(d.Repository, sig, ro...); err != nil {
		return fmt.Errorf("signature referrer of %s: %w", d, err)
	}
	cfg, err := sigs.RawConfigFile()
	if err != nil {
		return err
	}
	if err := remote.WriteLayer(d.Repository, ggcrstatic.NewLayer(cfg, SignatureArtifactType), ro...); err != nil {
		return fmt.Errorf("signature referrer of %s: %w", d, err)
	}
	m, err := sigs.Manifest()
	if err != nil {
		return err
	}
	rm := *m
	rm.MediaType = types.OCIManifestSchema1
	rm.Config.MediaType = SignatureArtifactType
	rm.ArtifactType = SignatureArtifactType
	rm.Subject = &v1.Descriptor{MediaType: subject.MediaType, Digest: subject.Digest, Size: subject.Size}
	raw, err := json.Marshal(rm)
	if err != nil {
		return err
	}
	h, _, err := v1.SHA256(bytes.NewReader(raw))
	if err != nil {
		return err
	}
	target := d.Repository.Digest(h.String())
	if err := remote.Put(target, rawManifest{raw, types.OCIManifestSchema1}, ro...); err != nil {
		return fmt.Errorf("writing signature referrer %s of %s: %w", target, d, err)
	}
	s.o.log.InfoContext(ctx, "signature referrer written", "ref", d.String(), "referrer", target.String())
	return nil
}

type rawManifest struct {
	b  []byte
	mt types.MediaType
}

func (r rawManifest) RawManifest() ([]byte, error)        { return r.b, nil }
func (r rawManifest) MediaType() (types.MediaType, error) { return r.mt, nil }

func count(s oci.Signatures) int {
	l, err := s.Get()
	if err != nil {
		return 0
	}
	return len(l)
}

func marshalPublicKey(pk crypto.PublicKey) ([]byte, error) {
	return cryptoutils.MarshalPublicKeyToPEM(pk)
}

// remoteOpts is a helper for plain go-containerregistry calls.
func (o *options) remoteOpts(ctx context.Context) []remote.Option { return o.reg.RemoteOptions(ctx) }
