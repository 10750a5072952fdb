package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/oslayer/oslayer/assemble"
	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/render"
	"github.com/oslayer/oslayer/sources/model"
)

// Plan is a pipeline prepared to build: each platform's base resolved
// and indexed (once for every build of the Cache that names it) and the
// pool rendered onto it. Its Identity says which plans become one image.
type Plan struct {
	// Pipeline is what builds the plan.
	Pipeline *Pipeline
	// Identity is the identity of the image the plan publishes: the
	// specification's (Spec.Identity, without the input documents) and,
	// per platform in index order, the base's digest and what the render
	// puts into the image. Two plans with one identity publish one image
	// (under each one's tag); "" for a plan whose base comes from its
	// MachineConfigs (the build renders to learn it), which shares with
	// no other.
	Identity string
	// Inputs are the prepared platforms (one for a single image; none
	// when the base comes from the MachineConfigs).
	Inputs []assemble.Input
	// RenderSeconds is each input's render time.
	RenderSeconds []float64
}

// Prepare resolves and indexes the bases through the Env's Cache (nil:
// a cache of this plan's own) and renders the pool onto each. A failure
// is an Error whose Step is "base", "base-index" or "render".
func (p *Pipeline) Prepare(ctx context.Context) (*Plan, error) {
	pl := &Plan{Pipeline: p}
	req := p.Request
	if req.Base == "" {
		return pl, nil
	}
	c := p.env.Cache
	if c == nil {
		c = &Cache{}
	}
	multi := req.Arch.Multi()
	if !multi {
		pf := registry.DefaultPlatform
		if a := req.Arch.Arch(); a != "" {
			pf.Architecture = registry.NormalizeArch(a)
		}
		if err := pl.add(ctx, c, pf, req.Arch.Arch(), req.Render.Images); err != nil {
			return pl, err
		}
	} else {
		platforms, err := c.platforms(ctx, req)
		if err != nil {
			return pl, specErr("base", "", err)
		}
		for _, pf := range platforms {
			images := req.Render.Images
			if pi, ok := images.(assemble.PlatformImages); ok {
				images = pi.ForPlatform(pf)
			}
			if err := pl.add(ctx, c, pf, pf.Architecture, images); err != nil {
				return pl, specErr(stepOf(err), "", fmt.Errorf("platform %s: %w", pf.String(), err))
			}
		}
	}
	pl.Identity = pl.identity(multi)
	return pl, nil
}

// add resolves the base of platform pf (arch as given) through c and
// renders the pool onto it, reading imageRef files through images.
func (pl *Plan) add(ctx context.Context, c *Cache, pf v1.Platform, arch string, images model.ImageFiles) error {
	req := pl.Pipeline.Request
	o := req.Index
	if o.Registry == nil {
		o.Registry = req.Registry
	}
	if o.Logger == nil {
		o.Logger = req.Logger
	}
	b, err := c.base(ctx, req.Base, arch, mode(req.BaseIndex), o)
	if err != nil {
		return err
	}
	rreq := req.Render
	rreq.Images = images
	if b.Index != nil && req.BaseIndex != assemble.BaseIndexOff {
		rreq.Base = b.Index.FS()
	}
	rreq.BaseName = fmt.Sprintf("base %s (%s)", b.Ref, b.Digest)
	t0 := time.Now()
	rd, err := render.Render(ctx, rreq)
	pl.RenderSeconds = append(pl.RenderSeconds, time.Since(t0).Seconds())
	if err != nil {
		return specErr("render", "", fmt.Errorf("render: %w", err))
	}
	pl.Inputs = append(pl.Inputs, assemble.Input{Platform: pf, Base: b, Rendered: rd})
	return nil
}

// stepOf is the Step of an Error ("base" else).
func stepOf(err error) string {
	if e, ok := err.(*Error); ok && e.Step != "" {
		return e.Step
	}
	return "base"
}

// mode is the base index mode ("" is auto).
func mode(m string) string {
	if m == "" {
		return assemble.BaseIndexAuto
	}
	return m
}

// identity is the plan's Identity: a single image and an index never
// share one.
func (pl *Plan) identity(multi bool) string {
	h := sha256.New()
	pl.Pipeline.Spec.writeSettings(h)
	kind := "image"
	if multi {
		kind = "index"
	}
	fmt.Fprintf(h, "\n\n%s %d", kind, len(pl.Inputs))
	for _, in := range pl.Inputs {
		fmt.Fprintf(h, "\n\nplatform %s base %s", in.Platform.String(), in.Base.Digest)
		writeRendered(h, in.Rendered)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// writeRendered adds what a render puts into an image to h.
func writeRendered(h io.Writer, rd *render.Result) {
	b, _ := json.Marshal([]any{rd.KernelArgs, rd.Packages, rd.OSImageURL})
	h.Write(b)
	for _, l := range rd.Layers {
		fmt.Fprintf(h, "\n%s %s %s", l.Name, l.Digest, l.CreatedBy)
	}
}

// Build builds the plan's image (or index) from what Prepare did, under
// the pool label label ("": the specification's pool): an image that
// serves several pools names them all in its label and provenance.
func (pl *Plan) Build(ctx context.Context, label string) (*Result, error) {
	p := pl.Pipeline
	req := p.Request
	if label != "" {
		req.Render.Pool = label
		req.Flags = maps.Clone(req.Flags)
		req.Flags["pool"] = label
	}
	if len(pl.Inputs) > 0 {
		req.Prepared = pl.Inputs
		c := p.env.Cache
		if req.Index.Repository != "" && !req.Arch.Multi() && c != nil && !c.firstInRepo(p.Repository, pl.Inputs[0].Base) {
			// The base index artifact goes once into every target
			// repository (a single image's build pushes it).
			req.Index.Repository = ""
		}
	}
	return assemble.Build(ctx, req, p.Publisher, p.Stages...)
}

// Retag moves the pipeline's tag to built, an image or index another
// pipeline with the same plan identity built, checked, pushed and signed:
// nothing is assembled, checked, uploaded or signed again
// (build.Retag).
func (p *Pipeline) Retag(ctx context.Context, built *Result) (*Result, error) {
	return assemble.Retag(ctx, built, p.Publisher)
}
