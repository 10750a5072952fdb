package sign

import (
	"context"
	"fmt"
	"sync"

	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/oslayer/oslayer/builder"
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
// key is loaded by the sign stage (once), so a missing file or a wrong
// password fails the build at "sign", after the image was written by
// digest and before the tag moves. Every error starts with the stage name.
func Stages(key KeyFunc, opts ...Option) []builder.Stage {
	sh := &shared{key: key, opts: opts}
	return []builder.Stage{&signStage{sh}, &attestStage{sh}}
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

func (s *signStage) Run(ctx context.Context, b *builder.Built, p *builder.Published) (any, error) {
	if p == nil || p.Digest == nil {
		ref := ""
		if p != nil {
			ref = p.Ref
		}
		return nil, fmt.Errorf("%s: %s: only images pushed to a registry can be signed", StageSign, ref)
	}
	sg, err := s.get(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", StageSign, err)
	}
	r, err := sg.Sign(ctx, *p.Digest)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", StageSign, err)
	}
	return r, nil
}

type attestStage struct{ *shared }

func (*attestStage) Name() string { return StageAttest }

func (s *attestStage) Run(ctx context.Context, b *builder.Built, p *builder.Published) (any, error) {
	if p == nil || p.Digest == nil {
		return nil, fmt.Errorf("%s: only images pushed to a registry can be attested", StageAttest)
	}
	sg, err := s.get(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", StageAttest, err)
	}
	st, err := NewStatement(b, *p.Digest, sg.o.version)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", StageAttest, err)
	}
	r, err := sg.Attest(ctx, *p.Digest, st)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", StageAttest, err)
	}
	return r, nil
}
