package prune

import (
	"context"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/publish/record"
)

// records reads the build record of every listed image that has one
// (its "sha256-HEX.rec" tag), dates the image by it, and folds the
// record's own attachments (its signature) into the image's: they go
// with it, and the record manifest is not an image of the repository.
// A record that cannot be read as one leaves its image undated, which
// keeps it. An image a reference dates (a PoolImage's build history,
// which names its images: in use, kept) is not read again unless another
// image is dated to the same second (sameSecond); its record's own tags
// are still folded into it by their digest when listed.
func (l *lister) records(ctx context.Context) error {
	var ims, byRef []*Image
	for _, im := range l.found {
		switch {
		case !im.hasRecord():
		case l.datedByRef(im.Digest):
			byRef = append(byRef, im)
		default:
			ims = append(ims, im)
		}
	}
	err := parallel(ctx, l.jobs, len(ims), func(i int) error {
		return readRecord(ctx, l.reg, l.repo, ims[i])
	})
	if err != nil {
		return err
	}
	for _, im := range ims {
		l.fold(im)
	}
	ties := l.sameSecond(byRef)
	return parallel(ctx, l.jobs, len(ties), func(i int) error {
		return l.timeFromRecord(ctx, ties[i])
	})
}

// sameSecond lists the images of byRef whose reference dates them to a
// second another listed image is dated to as well. A PoolImage's build
// time is a Kubernetes time, kept to the second, and a record's to the
// nanosecond: two builds within one second are ordered by their records,
// or the older, read to the nanosecond, would rank as the newer.
func (l *lister) sameSecond(byRef []*Image) []*Image {
	if len(byRef) == 0 {
		return nil
	}
	n := map[int64]int{}
	for _, im := range l.found {
		if t := l.refTime(im.Digest); !t.IsZero() {
			n[t.Unix()]++
		} else if !im.Time.IsZero() {
			n[im.Time.Unix()]++
		}
	}
	var out []*Image
	for _, im := range byRef {
		if n[l.refTime(im.Digest).Unix()] > 1 {
			out = append(out, im)
		}
	}
	return out
}

// timeFromRecord dates im by its build record's time (to the
// nanosecond); nothing else of the record is taken (the references date
// and keep it).
func (l *lister) timeFromRecord(ctx context.Context, im *Image) error {
	r, d, err := record.Read(ctx, l.reg, l.repo, im.Digest)
	if err != nil && d == (v1.Hash{}) {
		return err // the registry failed
	}
	if err == nil && r != nil && r.Time.After(im.Time) {
		im.Time, im.TimeFrom = r.Time, "build record "+record.TagName(im.Digest)
	}
	return nil
}

// hasRecord reports whether im has a build record tag.
func (im *Image) hasRecord() bool {
	for _, a := range im.Attached {
		if a.Kind == kindRecord {
			return true
		}
	}
	return false
}

// readRecord dates im by its build record.
func readRecord(ctx context.Context, reg *registry.Options, repo name.Repository, im *Image) error {
	r, d, err := record.Read(ctx, reg, repo, im.Digest)
	if d != (v1.Hash{}) {
		im.Record = d.String()
	}
	if err != nil && d == (v1.Hash{}) {
		return err // the registry failed
	}
	if err != nil {
		im.TimeFrom = "unreadable build record: " + err.Error()
		return nil
	}
	if r != nil && r.Time.After(im.Time) {
		im.Time, im.TimeFrom = r.Time, "build record "+record.TagName(im.Digest)
	}
	return nil
}

// fold moves the attachments of im's record (its signature, its
// referrers tag) to im, named as the record's.
func (l *lister) fold(im *Image) {
	if h, err := v1.NewHash(im.Record); err == nil {
		l.foldRecord(h, im.Digest)
	}
}

// foldRecord removes the record manifest rec, listed through its own
// tags, from the images and gives its attachments to the image it
// records (kept where it is when that image is not listed).
func (l *lister) foldRecord(rec, image v1.Hash) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r, im := l.found[rec], l.found[image]
	if r == nil || im == nil {
		return
	}
	for _, a := range r.Attached {
		a.Kind = kindRecord + " " + a.Kind
		im.Attached = append(im.Attached, a)
	}
	delete(l.found, rec)
}

// recordChanged reads im's build record again and reports what changed
// since it was listed: a record written or rewritten since (a build
// published the image again), with its time; "" when none did.
func recordChanged(ctx context.Context, reg *registry.Options, repo name.Repository, im *Image) (string, error) {
	r, d, err := record.Read(ctx, reg, repo, im.Digest)
	if err != nil && d == (v1.Hash{}) {
		return "", err
	}
	if d == (v1.Hash{}) || d.String() == im.Record {
		return "", nil
	}
	at := "an unreadable record"
	if r != nil {
		at = "at " + r.Time.UTC().Format(time.RFC3339)
	}
	return "a build published it again since it was listed (build record " + at + ")", nil
}

// datedByRef reports whether a reference dates d (a PoolImage's build).
func (l *lister) datedByRef(d v1.Hash) bool {
	return !l.refTime(d).IsZero()
}

// refTime is the latest time a reference dates d to (zero: none).
func (l *lister) refTime(d v1.Hash) time.Time {
	var t time.Time
	for _, r := range l.refs.Of(d) {
		if r.Time.After(t) {
			t = r.Time
		}
	}
	return t
}
