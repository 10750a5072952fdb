package prune

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/oslayer/oslayer/internal/registry"
)

// Options are one prune run.
type Options struct {
	// Targets are registry repositories (REG/REPO) and OCI layouts (oci:DIR).
	Targets []string
	// Sources are where references are read (a cluster, files).
	Sources []Source
	Policy  Policy
	// Delete deletes; without it Run is a dry run.
	Delete bool
	// Registry reaches the registries.
	Registry *registry.Options
	// Jobs bounds parallel registry reads (0: 8).
	Jobs int
	Log  *slog.Logger
	// BeforeCheck, when set, runs right before the references are read
	// again for an image about to be deleted (tests add a reference there).
	BeforeCheck func(ctx context.Context, im *Image)
	// AfterList, when set, runs after the decision and before the
	// deletion phase (tests move a tag there).
	AfterList func(ctx context.Context)
}

// Result is what Run found and did.
type Result struct {
	DryRun  bool     `json:"dryRun"`
	Keep    int      `json:"keep"`
	Grace   string   `json:"grace"`
	Targets []string `json:"targets"`
	Images  []*Image `json:"images"`
	// Kept, Delete and Deleted count the images of each action.
	Kept    int `json:"kept"`
	Delete  int `json:"delete"`
	Deleted int `json:"deleted"`
}

// target is one parsed target.
type target struct {
	given  string
	repo   name.Repository // zero for a layout
	layout string          // the layout's directory
}

// parseTargets reads the REPO arguments.
func parseTargets(reg *registry.Options, given []string) ([]target, error) {
	var out []target
	for _, g := range given {
		if registry.IsLayout(g) {
			dir, tag, err := registry.SplitLayout(g)
			if err == nil && tag != "" {
				err = fmt.Errorf("give the layout without a tag (oci:DIR): every image in it is pruned")
			}
			if err != nil {
				return nil, &InputError{Input: "argument " + g, Err: err.Error()}
			}
			out = append(out, target{given: g, layout: dir})
			continue
		}
		s := reg.Rewrite(g)
		if strings.ContainsAny(s, "@") || strings.Count(s[strings.LastIndex(s, "/")+1:], ":") > 0 {
			return nil, &InputError{Input: "argument " + g, Err: "give a repository (REG/REPO) without a tag or digest: every image in it is pruned"}
		}
		opts := []name.Option{name.WeakValidation}
		r, err := name.NewRepository(s, opts...)
		if err != nil {
			return nil, &InputError{Input: "argument " + g, Err: err.Error()}
		}
		if reg.IsInsecure(r.RegistryStr()) {
			r, _ = name.NewRepository(s, name.Insecure)
		}
		out = append(out, target{given: g, repo: r})
	}
	return out, nil
}

// Run lists the targets, decides, and (with Delete) deletes.
func Run(ctx context.Context, o Options) (*Result, error) {
	if o.Registry == nil {
		o.Registry = &registry.Options{}
	}
	if o.Registry.Shared == nil {
		// One ping and one token per repository for the whole run.
		reg := *o.Registry
		reg.Shared = &registry.Connections{}
		o.Registry = &reg
	}
	if o.Jobs <= 0 {
		o.Jobs = 8
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	targets, err := parseTargets(o.Registry, o.Targets)
	if err != nil {
		return nil, err
	}
	refs, err := Collect(ctx, o.Sources...)
	if err != nil {
		return nil, err
	}
	res := &Result{DryRun: !o.Delete, Keep: o.Policy.Keep, Grace: o.Policy.Grace.String(), Targets: o.Targets}
	var byTarget [][]*Image
	for _, t := range targets {
		ims, err := t.list(ctx, o, refs)
		if err != nil {
			return nil, err
		}
		byTarget = append(byTarget, ims)
		res.Images = append(res.Images, ims...)
	}
	Decide(res.Images, refs, o.Policy)
	if o.Delete {
		if o.AfterList != nil {
			o.AfterList(ctx)
		}
		err = apply(ctx, o, targets, byTarget)
	}
	for _, im := range res.Images {
		im.Age = Age(im, o.Policy.Now)
	}
	res.count()
	return res, err
}

// list reads the images of a target.
func (t target) list(ctx context.Context, o Options, refs *Refs) ([]*Image, error) {
	if t.layout != "" {
		return listLayout(t.layout)
	}
	return listRemote(ctx, o.Registry, t.repo, refs, o.Jobs)
}

func (r *Result) count() {
	r.Kept, r.Delete, r.Deleted = 0, 0, 0
	for _, im := range r.Images {
		switch im.Action {
		case ActionKeep:
			r.Kept++
		case ActionDelete:
			r.Delete++
		case ActionDeleted:
			r.Deleted++
		}
	}
}
