package prune

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"sync"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/publish/record"
)

// Labels prune reads (build.LabelPool and build.LabelBaseDigest).
const (
	labelPool       = "io.oslayer.pool"
	labelBaseDigest = "io.oslayer.base-digest"
)

// lister reads one registry repository.
type lister struct {
	reg   *registry.Options
	repo  name.Repository
	refs  *Refs
	jobs  int
	mu    sync.Mutex
	found map[v1.Hash]*Image
}

// listRemote returns the images of repo: every image a tag names, every
// image an attachment tag belongs to (so an image no tag names any more
// is found through its signature), and every image a reference names in
// this repository (the build history), dated by its build record.
// Platform images of an index are listed after it with Index set.
func listRemote(ctx context.Context, reg *registry.Options, repo name.Repository, refs *Refs, jobs int) ([]*Image, error) {
	l := &lister{reg: reg, repo: repo, refs: refs, jobs: jobs, found: map[v1.Hash]*Image{}}
	tags, err := remote.List(repo, reg.RemoteOptions(ctx)...)
	if err != nil && !registry.IsStatus(err, http.StatusNotFound) {
		return nil, fmt.Errorf("list tags of %s: %w", repo, registry.ExplainRefused(err, repo))
	}
	plain, err := l.classify(ctx, tags)
	if err != nil {
		return nil, err
	}
	if err := l.records(ctx); err != nil {
		return nil, err
	}
	want := l.wanted(plain)
	if err := l.each(ctx, want, l.read); err != nil {
		return nil, err
	}
	var children []v1.Hash
	for _, im := range l.found {
		for _, p := range im.Platforms {
			if l.found[p] == nil {
				children = append(children, p)
			}
		}
	}
	if err := l.each(ctx, children, l.read); err != nil {
		return nil, err
	}
	return l.sorted(), nil
}

// image returns the entry of d, made on first use.
func (l *lister) image(d v1.Hash) *Image {
	l.mu.Lock()
	defer l.mu.Unlock()
	im := l.found[d]
	if im == nil {
		im = &Image{Repo: l.repo.Name(), Digest: d}
		l.found[d] = im
	}
	return im
}

// classify records attachment tags and resolves the others to digests.
func (l *lister) classify(ctx context.Context, tags []string) (map[string]v1.Hash, error) {
	var plain []string
	for _, t := range tags {
		if d, kind, ok := attachedTo(t); ok {
			im := l.image(d)
			im.Attached = append(im.Attached, Attachment{Tag: t, Kind: kind})
			continue
		}
		plain = append(plain, t)
	}
	out := map[string]v1.Hash{}
	var mu sync.Mutex
	err := parallel(ctx, l.jobs, len(plain), func(i int) error {
		desc, err := remote.Head(l.repo.Tag(plain[i]), l.reg.RemoteOptions(ctx)...)
		if registry.IsStatus(err, http.StatusNotFound) {
			return nil // deleted meanwhile
		}
		if err != nil {
			return fmt.Errorf("read tag %s:%s: %w", l.repo, plain[i], err)
		}
		mu.Lock()
		out[plain[i]] = desc.Digest
		mu.Unlock()
		return nil
	})
	return out, err
}

// wanted is every digest to read: tagged, attached, referenced here.
func (l *lister) wanted(tags map[string]v1.Hash) []v1.Hash {
	for t, d := range tags {
		im := l.image(d)
		im.Tags = append(im.Tags, t)
	}
	for _, r := range l.refs.List {
		if r.Digest != (v1.Hash{}) && (r.Repo == l.repo.Name() || r.Repo == "") {
			l.image(r.Digest)
		}
	}
	out := make([]v1.Hash, 0, len(l.found))
	for d := range l.found {
		out = append(out, d)
	}
	return out
}

// read fetches the manifest of d (and an image's config for its labels).
func (l *lister) read(ctx context.Context, d v1.Hash) error {
	im := l.image(d)
	desc, err := remote.Get(l.repo.Digest(d.String()), l.reg.RemoteOptions(ctx)...)
	if registry.IsStatus(err, http.StatusNotFound) {
		im.Gone = true
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s@%s: %w", l.repo, d, err)
	}
	im.Media = desc.MediaType
	if rec, err := record.Parse(desc.Manifest); err == nil {
		// A build record listed through its own signature tag: not an
		// image; its tags go with the image it records.
		l.foldRecord(d, rec.Image)
		return nil
	}
	if desc.MediaType.IsIndex() {
		return l.readIndex(desc, im)
	}
	if pool := l.refPool(d); pool != "" {
		// A PoolImage names it: an oslayer image of that pool (the
		// controller labels it so); its config is not read.
		im.Pool = pool
		return nil
	}
	img, err := desc.Image()
	if err != nil {
		return fmt.Errorf("read %s@%s: %w", l.repo, d, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		// Not an image with a config (an artifact): never ours to delete.
		return nil
	}
	im.Pool = cf.Config.Labels[labelPool]
	im.BaseDigest = cf.Config.Labels[labelBaseDigest]
	return nil
}

// refPool is the pool a PoolImage reference to d names ("" for none).
func (l *lister) refPool(d v1.Hash) string {
	for _, r := range l.refs.Of(d) {
		if r.Kind == "PoolImage" && r.Pool != "" {
			return r.Pool
		}
	}
	return ""
}

// readIndex records an index's platform images.
func (l *lister) readIndex(desc *remote.Descriptor, im *Image) error {
	idx, err := desc.ImageIndex()
	if err != nil {
		return err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	for _, c := range m.Manifests {
		im.Platforms = append(im.Platforms, c.Digest)
		ch := l.image(c.Digest)
		d := im.Digest
		ch.Index = &d
	}
	return nil
}

// each runs f over ds with l.jobs at a time.
func (l *lister) each(ctx context.Context, ds []v1.Hash, f func(context.Context, v1.Hash) error) error {
	return parallel(ctx, l.jobs, len(ds), func(i int) error { return f(ctx, ds[i]) })
}

// sorted returns the images by digest, platform images after their index.
func (l *lister) sorted() []*Image {
	out := make([]*Image, 0, len(l.found))
	for _, im := range l.found {
		if im.Gone && len(im.Attached) == 0 {
			continue // named by a reference, not in this repository
		}
		sort.Strings(im.Tags)
		sort.Slice(im.Attached, func(i, j int) bool { return im.Attached[i].Tag < im.Attached[j].Tag })
		out = append(out, im)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Digest.String() < out[j].Digest.String() })
	return out
}

// parallel runs f(0..n-1), jobs at a time, and returns the first error.
func parallel(ctx context.Context, jobs, n int, f func(int) error) error {
	if jobs < 1 {
		jobs = 1
	}
	errs := make([]error, n)
	sem := make(chan struct{}, jobs)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		if ctx.Err() != nil {
			errs[i] = ctx.Err()
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = f(i)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
