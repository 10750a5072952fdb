package pipeline

import (
	"context"
	"errors"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/oslayer/oslayer/assemble/baseindex"
	"github.com/oslayer/oslayer/render"
)

// RenderRequest is what the specification renders (the pool's documents
// and the render options of its settings), for a front-end that analyses
// a change before it builds (oslayer diff's inputs side, the
// controller's Job mode): New renders the same request, with the base
// and the imageRef readers added.
func (s Spec) RenderRequest() render.Request {
	in := s.Inputs
	return render.Request{
		OSCs: in.OSCs, MachineConfigs: in.MachineConfigs, MachineConfigPools: in.MachineConfigPools,
		Pool: in.Pool, SecretsDir: in.SecretsDir, BakeSecrets: in.BakeSecrets, Strict: in.Strict,
		AllowTopLevel: in.AllowTopLevel, Epoch: in.Epoch, AllowSecrets: s.Preflight.AllowSecrets,
	}
}

// RenderRequest is what a specification renders (render.Request).
type RenderRequest = render.Request

// BaseIndex is the index of a base image (its tree, without its layers'
// content).
type BaseIndex = baseindex.Index

// PublishedBaseIndex returns the index of the base of digest base that a
// build already made: from the disk cache cacheDir ("" for none), else
// the artifact a build published next to its image in repo.
func PublishedBaseIndex(ctx context.Context, cacheDir string, repo name.Repository, base v1.Hash, opts ...remote.Option) (*BaseIndex, error) {
	if cacheDir != "" {
		if ix, err := (baseindex.Cache{Dir: cacheDir}).Load(base); err == nil && ix != nil {
			return ix, nil
		}
	}
	ix, err := baseindex.Fetch(ctx, repo, base, opts...)
	if err == nil && ix == nil {
		err = errors.New("no base index published for " + base.String())
	}
	return ix, err
}
