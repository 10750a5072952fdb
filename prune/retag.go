package prune

import (
	"context"
	"net/http"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/oslayer/oslayer/internal/registry"
)

// retag reads the repository's tags again right before deleting: an image
// a tag moved to since the listing (a rebuild that gave the digest of an
// older image, which reproducible builds do) stays. Deleting a manifest
// by digest would remove that tag with it.
func retag(ctx context.Context, o Options, t target, images []*Image) error {
	tags, err := remote.List(t.repo, o.Registry.RemoteOptions(ctx)...)
	if err != nil && !registry.IsStatus(err, http.StatusNotFound) {
		return err
	}
	l := &lister{reg: o.Registry, repo: t.repo, jobs: o.Jobs}
	l.found = map[v1.Hash]*Image{}
	plain, err := l.classify(ctx, tags)
	if err != nil {
		return err
	}
	for tag, d := range plain {
		for _, im := range images {
			if im.Digest == d && im.Action == ActionDelete {
				im.Action = ActionKeep
				im.Tags = append(im.Tags, tag)
				im.Reasons = []string{"tagged " + tag + " since the listing"}
			}
		}
	}
	return nil
}
