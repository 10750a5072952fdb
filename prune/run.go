package prune

import (
	"context"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// apply probes every registry target that has something to delete, then
// deletes image by image, reading the references again right before each.
// A refusing registry stops the run before anything is deleted.
func apply(ctx context.Context, o Options, targets []target, byTarget [][]*Image) error {
	for i, t := range targets {
		if t.layout == "" && anyDelete(byTarget[i]) {
			if err := probe(ctx, o.Registry, t.repo); err != nil {
				return err
			}
		}
	}
	for i, t := range targets {
		if t.layout == "" && anyDelete(byTarget[i]) {
			if err := retag(ctx, o, t, byTarget[i]); err != nil {
				return err
			}
		}
	}
	for i, t := range targets {
		for _, im := range ordered(byTarget[i]) {
			if err := deleteOne(ctx, o, t, im, byTarget[i]); err != nil {
				return err
			}
		}
		if t.layout != "" {
			if err := collectLayout(t.layout, byTarget[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

func anyDelete(ims []*Image) bool {
	for _, im := range ims {
		if im.Action == ActionDelete {
			return true
		}
	}
	return false
}

// ordered is the images to delete, each index before its platform images.
func ordered(ims []*Image) []*Image {
	var top, children []*Image
	for _, im := range ims {
		switch {
		case im.Action != ActionDelete:
		case im.Index != nil:
			children = append(children, im)
		default:
			top = append(top, im)
		}
	}
	return append(top, children...)
}

// deleteOne reads the references and im's build record again and deletes
// im unless a reference names it (or one of its platform images) now or
// a build wrote its record since it was listed (the build published it
// again: it is new). The window left is the time between those reads and
// the registry's answer to the DELETE.
func deleteOne(ctx context.Context, o Options, t target, im *Image, all []*Image) error {
	for _, idx := range all {
		if im.Index != nil && idx.Digest == *im.Index && idx.Action == ActionKeep {
			im.Action = ActionKeep
			im.Reasons = []string{"platform image of the kept index " + short(idx.Digest)}
			return nil
		}
	}
	if o.BeforeCheck != nil {
		o.BeforeCheck(ctx, im)
	}
	refs, err := Collect(ctx, o.Sources...)
	if err != nil {
		return err
	}
	if r := gained(refs, im); r != nil {
		keepNow(im, all, "gained a reference before deletion: "+r.From)
		return nil
	}
	if t.layout == "" {
		why, err := recordChanged(ctx, o.Registry, t.repo, im)
		if err != nil {
			return err
		}
		if why != "" {
			keepNow(im, all, why)
			return nil
		}
	}
	if t.layout != "" {
		err = deleteLayout(t.layout, im)
	} else {
		err = deleteRemote(ctx, o.Registry, t.repo, im)
	}
	if err != nil {
		return err
	}
	im.Action = ActionDeleted
	o.Log.InfoContext(ctx, "deleted", "repository", im.Repo, "digest", im.Digest.String(), "attached", len(im.Attached))
	return nil
}

// gained returns a reference that now names im or one of its platform
// images.
func gained(refs *Refs, im *Image) *Ref {
	for _, d := range append([]v1.Hash{im.Digest}, im.Platforms...) {
		if rs := refs.Of(d); len(rs) > 0 {
			return &rs[0]
		}
	}
	return nil
}

// keepNow keeps im, decided for deletion, and its platform images.
func keepNow(im *Image, all []*Image, why string) {
	im.Action = ActionKeep
	im.Reasons = []string{why}
	for _, c := range all {
		if c.Index != nil && *c.Index == im.Digest && c.Action == ActionDelete {
			c.Action = ActionKeep
			c.Reasons = []string{"platform image of the kept index " + short(im.Digest)}
		}
	}
}
