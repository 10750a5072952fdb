package diff

import (
	"context"

	"github.com/oslayer/oslayer/render"
)

// LoadInputs renders an input set (the render path of the CLI's render
// and build) into a side; given names it in the output. baseDigest,
// when the request has a base, is its digest.
func LoadInputs(ctx context.Context, given string, req render.Request, baseDigest string) (*Side, error) {
	res, err := render.Render(ctx, req)
	if err != nil {
		return nil, err
	}
	s := &Side{Given: given, Kind: "inputs", Pool: req.Pool, BaseDigest: baseDigest,
		KernelArgs: res.KernelArgs, Extensions: res.Extensions, KernelType: res.KernelType,
		OSImageURL: res.OSImageURL, InputsDigest: res.InputsDigest}
	if s.KernelArgs == nil {
		s.KernelArgs = []string{}
	}
	for _, l := range res.Layers {
		s.Layers = append(s.Layers, Layer{Digest: l.Digest.String(), Size: l.Size, Role: l.Name})
	}
	s.open = renderedOpener(res.Layers)
	if res.Report != nil {
		s.Runtime = res.Report.Runtime
		for _, b := range res.Report.Baked {
			s.Items = append(s.Items, manifestItem(b))
		}
	}
	for _, r := range s.Runtime {
		if r.Item == "spec.fips" {
			s.FIPS = true
		}
	}
	if s.Passwd, err = passwdDigest(res.Inputs); err != nil {
		return nil, err
	}
	if s.FilePaths, err = oscFilePaths(res.Inputs); err != nil {
		return nil, err
	}
	return s, nil
}

// manifestItem is the ownership manifest's entry for a baked entry; the
// document keeps its file name (an image's manifest leaves it out).
func manifestItem(b render.Baked) render.ManifestItem {
	src := b.Source
	return render.ManifestItem{Path: b.Path, StoredAt: b.StoredAt, Type: b.Type, Mode: b.Mode, UID: b.UID, GID: b.GID,
		SHA256: b.SHA256, Target: b.Target, Layer: b.Layer, Generated: b.Generated, Ignition: b.Ignition, Source: src}
}
