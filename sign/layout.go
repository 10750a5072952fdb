package sign

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	ggcrlayout "github.com/google/go-containerregistry/pkg/v1/layout"
	cremote "github.com/sigstore/cosign/v2/pkg/cosign/remote"
	"github.com/sigstore/cosign/v2/pkg/oci"
	"github.com/sigstore/cosign/v2/pkg/oci/empty"
	colayout "github.com/sigstore/cosign/v2/pkg/oci/layout"
	"github.com/sigstore/cosign/v2/pkg/oci/mutate"

	"github.com/oslayer/oslayer/assemble"
	"github.com/oslayer/oslayer/internal/field"
	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/publish"
)

// WithIdentity sets the repository a signature of an image in an OCI
// layout names (its docker-reference) and the provenance's subject: the
// repository nodes will pull the image from once it is copied there. A
// registry target names its own repository.
func WithIdentity(repo string) Option { return func(o *options) { o.identity = repo } }

// layoutDigest is the digested identity reference of an image written to
// an OCI layout (p.Ref "oci:DIR@sha256:...") and the layout's directory.
func (s *Signer) layoutDigest(p *assemble.Published) (name.Digest, layoutRef, error) {
	if s.o.identity == "" {
		return name.Digest{}, layoutRef{}, field.Errorf("%s: signing an OCI layout needs %v REPO, the repository nodes pull the image from (the signature names it)", p.Ref, field.Name("signing.identity"))
	}
	l, err := parseLayoutRef(p.Ref)
	if err != nil {
		return name.Digest{}, layoutRef{}, err
	}
	d, err := name.NewDigest(s.o.identity + "@" + l.digest.String())
	if err != nil {
		return name.Digest{}, layoutRef{}, field.Errorf("%v %q: %w", field.Name("signing.identity"), s.o.identity, err)
	}
	return d, l, nil
}

// layoutSigned returns the signatures and attestations the layout dir
// already holds for digest d (cosign's kind annotations); empty when its
// signed image is another one or it has none.
func layoutSigned(dir string, d v1.Hash) (sigs, atts oci.Signatures, err error) {
	sigs, atts = empty.Signatures(), empty.Signatures()
	if _, err := os.Stat(filepath.Join(dir, "index.json")); err != nil {
		return sigs, atts, nil
	}
	idx, err := colayout.SignedImageIndex(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("read OCI layout %s: %w", dir, err)
	}
	si, err := idx.SignedImage(v1.Hash{})
	if err != nil || si == nil {
		return sigs, atts, err
	}
	if h, err := si.Digest(); err != nil || h != d {
		return sigs, atts, err
	}
	if s, err := idx.Signatures(); err != nil {
		return nil, nil, fmt.Errorf("read signatures in OCI layout %s: %w", dir, err)
	} else if s != nil {
		sigs = s
	}
	if a, err := idx.Attestations(); err != nil {
		return nil, nil, fmt.Errorf("read attestations in OCI layout %s: %w", dir, err)
	} else if a != nil {
		atts = a
	}
	return sigs, atts, nil
}

// attach writes sigs (a signatures or attestations image) into the layout
// dir as kind and adds it to p.Attached for Commit to list; it returns its
// digested layout reference.
func (s *Signer) attach(ctx context.Context, p *assemble.Published, dir, kind string, sigs oci.Signatures) (string, error) {
	if err := ggcrlayout.Path(dir).WriteImage(sigs); err != nil {
		return "", fmt.Errorf("write %s into OCI layout %s: %w", kind, dir, err)
	}
	raw, err := sigs.RawManifest()
	if err != nil {
		return "", err
	}
	mt, err := sigs.MediaType()
	if err != nil {
		return "", err
	}
	h, _, err := v1.SHA256(bytes.NewReader(raw))
	if err != nil {
		return "", err
	}
	p.Attached = append(p.Attached, assemble.Attached{Kind: kind, Descriptor: v1.Descriptor{MediaType: mt, Digest: h, Size: int64(len(raw))}})
	n := count(sigs)
	s.o.log.InfoContext(ctx, "written to OCI layout", "ref", p.Ref, "layout", dir, "kind", kind, "count", n)
	return registry.LayoutPrefix + dir + "@" + h.String(), nil
}

// SignLayout signs the image p names in an OCI layout (written, its tag
// not yet moved) and writes the signatures image into the layout, merged
// with the signatures it already holds for that digest; p.Attached gets it
// so the layout's Commit lists it as `cosign save` does.
func (s *Signer) SignLayout(ctx context.Context, p *assemble.Published) (*SignResult, error) {
	d, l, err := s.layoutDigest(p)
	if err != nil {
		return nil, err
	}
	dir := l.dir
	sig, err := s.signature(ctx, d)
	if err != nil {
		return nil, err
	}
	existing, _, err := layoutSigned(dir, l.digest)
	if err != nil {
		return nil, err
	}
	res := &SignResult{Ref: d.String(), SignatureTag: p.Ref}
	sigs := existing
	if dup, err := cosignDupe(s, existing, sig); err != nil {
		return nil, err
	} else if dup {
		res.Existing = true
	} else if sigs, err = mutate.AppendSignatures(existing, false, sig); err != nil {
		return nil, err
	}
	res.Signatures = count(sigs)
	if res.SignatureTag, err = s.attach(ctx, p, dir, publish.KindSignatures, sigs); err != nil {
		return nil, err
	}
	return res, nil
}

// AttestLayout DSSE-signs the statements and writes the attestations
// image into the layout of p (replacing our own earlier attestations of
// their predicate types for that digest, keeping others), like SignLayout.
func (s *Signer) attestLayout(ctx context.Context, p *assemble.Published, stms ...statement) (*AttestResult, error) {
	d, l, err := s.layoutDigest(p)
	if err != nil {
		return nil, err
	}
	dir := l.dir
	_, atts, err := layoutSigned(dir, l.digest)
	if err != nil {
		return nil, err
	}
	res := &AttestResult{Ref: d.String(), Existing: true}
	for _, stm := range stms {
		res.PredicateType = strings.TrimPrefix(res.PredicateType+", "+stm.predicateType, ", ")
		el, err := atts.Get()
		if err != nil {
			return nil, err
		}
		same := false
		for _, a := range el {
			same = same || s.sameAttestation(a, stm.payload)
		}
		if same {
			continue
		}
		res.Existing = false
		att, err := s.envelope(ctx, stm)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", d, err)
		}
		ro := &replaceOp{predicateTypes: []string{stm.predicateType}, ours: s.ownAttestation}
		kept, err := ro.Replace(atts, att)
		if err != nil {
			return nil, err
		}
		kl, _ := kept.Get()
		if atts, err = mutate.AppendSignatures(empty.Signatures(), false, kl...); err != nil {
			return nil, err
		}
		res.Replaced += ro.replaced[stm.predicateType]
	}
	res.Attestations = count(atts)
	if res.AttestationTag, err = s.attach(ctx, p, dir, publish.KindAttestations, atts); err != nil {
		return nil, err
	}
	return res, nil
}

// cosignDupe reports whether sigs holds sig's payload signed by s's key.
func cosignDupe(s *Signer, sigs oci.Signatures, sig oci.Signature) (bool, error) {
	dup, err := cremote.NewDupeDetector(s.sv).Find(sigs, sig)
	return dup != nil, err
}

type layoutRef struct {
	dir    string
	digest v1.Hash
}

func parseLayoutRef(ref string) (layoutRef, error) {
	l, err := registry.ParseLayout(ref)
	if err != nil {
		return layoutRef{}, err
	}
	if l.Digest.Hex == "" {
		return layoutRef{}, fmt.Errorf("%s: not a digested OCI layout reference", ref)
	}
	return layoutRef{dir: l.Dir, digest: l.Digest}, nil
}
