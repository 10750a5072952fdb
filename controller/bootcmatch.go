package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/oslayer/oslayer/api/v1alpha1"
)

// platformDigests remembers the platform image digests of the indexes
// read (an index's digest fixes its content: read once per digest).
type platformDigests struct {
	mu sync.Mutex
	m  map[string][]string // index digest → platform image digests (nil: not an index)
}

// digestMatches reports whether digest (a node's or pool's booted image)
// is status.published.image: its digest or, when status.published.image is an index, the
// digest of one of its platform images.
func (r *Reconciler) digestMatches(ctx context.Context, pi *v1alpha1.PoolImage, digest string) (bool, error) {
	image := publishedImage(pi)
	want := image[strings.LastIndex(image, "@")+1:]
	if digest = digest[strings.LastIndex(digest, "@")+1:]; digest == want {
		return true, nil
	}
	plats, err := r.platformsOf(ctx, pi, image, want)
	if err != nil {
		return false, err
	}
	return slices.Contains(plats, digest), nil
}

// platformsOf lists the platform image digests of image (none when it is
// not an index), reading the registry once per digest.
func (r *Reconciler) platformsOf(ctx context.Context, pi *v1alpha1.PoolImage, image, digest string) ([]string, error) {
	c := &r.platforms
	c.mu.Lock()
	plats, ok := c.m[digest]
	c.mu.Unlock()
	if ok {
		return plats, nil
	}
	reg, done, err := r.readRegistry(ctx, pi)
	if err != nil {
		return nil, err
	}
	defer done()
	ref, err := reg.ParseReference(image)
	if err != nil {
		return nil, fmt.Errorf("status.published.image %s: %w", image, err)
	}
	desc, err := remote.Get(ref, reg.RemoteOptions(ctx)...)
	if err != nil {
		return nil, fmt.Errorf("reading status.published.image %s: %w", image, err)
	}
	if desc.MediaType.IsIndex() {
		idx, err := desc.ImageIndex()
		if err != nil {
			return nil, err
		}
		m, err := idx.IndexManifest()
		if err != nil {
			return nil, fmt.Errorf("reading the index %s: %w", image, err)
		}
		for _, d := range m.Manifests {
			plats = append(plats, d.Digest.String())
		}
	}
	c.mu.Lock()
	if c.m == nil {
		c.m = map[string][]string{}
	}
	c.m[digest] = plats
	c.mu.Unlock()
	return plats, nil
}
