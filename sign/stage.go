package sign

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/oslayer/oslayer/assemble"
)

// Stage names, also the prefix of every stage error.
const (
	StageSign   = "sign"
	StageAttest = "attest"
)

// KeyFunc returns the signing key; the stages call it once.
type KeyFunc func(ctx context.Context) (signature.SignerVerifier, error)

// KeyFile is a KeyFunc loading path (a PEM key or a Secret manifest, see
// ReadKey) with pass.
func KeyFile(path string, pass PassFunc) KeyFunc {
	return func(context.Context) (signature.SignerVerifier, error) { return LoadKey(path, pass) }
}

// Stages returns the builder stages "sign" then "attest" for one key. The
// attest stage ends with Confirm: the tag moves only once our key verifies
// both on the registry. The
// key is loaded by the sign stage (once), so a missing file or a wrong
// password fails the build at "sign", after the image was written by
// digest and before the tag moves. Every error starts with the stage name.
func Stages(key KeyFunc, opts ...Option) []assemble.Stage {
	sh := &shared{key: key, opts: opts}
	return []assemble.Stage{&signStage{sh}, &attestStage{sh}}
}

type shared struct {
	key  KeyFunc
	opts []Option

	once   sync.Once
	signer *Signer
	err    error
}

func (s *shared) get(ctx context.Context) (*Signer, error) {
	s.once.Do(func() {
		if s.key == nil {
			s.err = fmt.Errorf("no signing key")
			return
		}
		sv, err := s.key(ctx)
		if err != nil {
			s.err = err
			return
		}
		s.signer = NewSigner(sv, s.opts...)
	})
	return s.signer, s.err
}

type signStage struct{ *shared }

func (*signStage) Name() string { return StageSign }

// Run signs the image or index b written as p. Signatures of a
// multi-platform image in an OCI layout are not written (the layout form
// of cosign save holds one image): Run refuses them.
func (s *signStage) Run(ctx context.Context, b *assemble.Built, p *assemble.Published) (any, error) {
	if p == nil {
		return nil, fmt.Errorf("%s: no published image", StageSign)
	}
	if b.IsIndex() && p.Digest == nil {
		return nil, fmt.Errorf("%s: %s: signing a multi-platform image in an OCI layout is not supported; push it to a registry", StageSign, p.Ref)
	}
	sg, err := s.get(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", StageSign, err)
	}
	var r *SignResult
	if p.Digest == nil {
		r, err = sg.SignLayout(ctx, p)
	} else {
		r, err = sg.Sign(ctx, *p.Digest)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", StageSign, err)
	}
	if p.Digest != nil && p.Record != nil {
		// The build record is signed with the image: who trusts the key
		// trusts the date and the specification it records.
		rr, err := sg.Sign(ctx, p.Digest.Context().Digest(p.Record.Digest.String()))
		if err != nil {
			return nil, fmt.Errorf("%s: build record: %w", StageSign, err)
		}
		r.RecordSignatureTag = rr.SignatureTag
	}
	return r, nil
}

// OnIndex implements build.OnIndex: a multi-platform build's index is
// signed too, so a node that resolves the tag to the index verifies as
// well as one that resolves a platform's manifest. The provenance
// (attest) stays on each platform image: it names that platform's base
// and layers.
func (*signStage) OnIndex() bool { return true }

var _ assemble.OnIndex = (*signStage)(nil)

type attestStage struct{ *shared }

func (*attestStage) Name() string { return StageAttest }

func (s *attestStage) Run(ctx context.Context, b *assemble.Built, p *assemble.Published) (any, error) {
	if p == nil {
		return nil, fmt.Errorf("%s: no published image", StageAttest)
	}
	sg, err := s.get(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", StageAttest, err)
	}
	d := p.Digest
	if d == nil {
		ld, _, err := sg.layoutDigest(p)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", StageAttest, err)
		}
		d = &ld
	}
	st, err := NewStatement(b, *d, sg.o.version)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", StageAttest, err)
	}
	sbom, err := NewSBOM(b, *d, sg.o.version)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", StageAttest, err)
	}
	if p.Digest == nil {
		// An OCI layout: signatures and attestations are listed in its
		// index.json with the tag, by Commit.
		stp, sbp, err := statements(*d, st, sbom)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", StageAttest, err)
		}
		r, err := sg.attestLayout(ctx, p, stp, sbp)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", StageAttest, err)
		}
		return r, nil
	}
	r, err := sg.attestBoth(ctx, *d, st, sbom)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", StageAttest, err)
	}
	if sg.o.sole {
		return r, nil
	}
	if r.Readded, err = sg.Confirm(ctx, *d, st, sbom); err != nil {
		return nil, fmt.Errorf("%s: %w", StageAttest, err)
	}
	return r, nil
}

// confirmRounds bounds how often Confirm merges a signature or attestation
// back after another writer dropped it.
const confirmRounds = 3

// Confirm verifies d on the registry with the signer's own key, as
// `oslayer verify` does, and adds the signature (Sign), the attestation
// of st (Attest) or the SBOM sbom (AttestSBOM, when given) again when
// another writer replaced the tag after they were written; it returns what
// it added again. It fails when they still do not verify after a few
// rounds: the tag must not move to an image its own key does not verify.
func (s *Signer) Confirm(ctx context.Context, d name.Digest, st *Statement, sbom *SBOMStatement) ([]string, error) {
	var last error
	var readded []string
	for round := 0; round < confirmRounds; round++ {
		v, err := verify(ctx, d.String(), s.sv, s.o)
		if err == nil && v.SBOM == nil && sbom != nil {
			err = fmt.Errorf("%w for %s: sbom: no SBOM attestation by this key", ErrVerify, d)
		}
		if err == nil {
			return readded, nil
		}
		if !errors.Is(err, ErrVerify) || v == nil {
			return readded, fmt.Errorf("verify %s with our key: %w", d, err)
		}
		last = err
		s.o.log.WarnContext(ctx, "our signature or attestation was dropped by another writer; adding it again", "ref", d.String(), "error", err)
		if v.Signatures == 0 {
			if _, err := s.Sign(ctx, d); err != nil {
				return readded, err
			}
			readded = append(readded, "signature")
		}
		if v.Attestations == 0 && st != nil {
			if _, err := s.Attest(ctx, d, st); err != nil {
				return readded, err
			}
			readded = append(readded, "attestation")
		}
		if v.SBOM == nil && sbom != nil {
			if _, err := s.AttestSBOM(ctx, d, sbom); err != nil {
				return readded, err
			}
			readded = append(readded, "sbom")
		}
	}
	return readded, fmt.Errorf("verify %s with our key after %d rounds: %w", d, confirmRounds, last)
}
