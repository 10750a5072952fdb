package assemble

import (
	"context"
	"errors"
	"fmt"
)

// Retag moves pub's tag to the image or index that built (a Build that
// succeeded) wrote and tagged: another pool whose image is the same (same
// repository, content and options) gets it without anything being
// assembled, checked, written or signed again (its checks passed and its
// signature is per digest). The publisher sends what its Commit sends for
// an image already there: for a registry, a look at the tag (nothing more
// when it names the image already) and one PUT of the manifest by tag.
// pub must write into built's repository. The result is built's (its stage outputs, such as the
// signature tag, and its platforms included) with pub's target, nothing
// uploaded, and the one phase "tag"; a failure leaves the tag where it
// was.
func Retag(ctx context.Context, built *Result, pub Publisher) (*Result, error) {
	if built == nil || !built.Tagged || built.published == nil || built.built == nil {
		return nil, errors.New("tag: no image built and tagged to move the tag to")
	}
	if pub == nil {
		return nil, errors.New("tag: no publisher")
	}
	res := built.movedTo(target(pub))
	if built.IsIndex() {
		res.Platforms = make([]*Result, len(built.Platforms))
		for i, p := range built.Platforms {
			res.Platforms[i] = p.movedTo(res.Target)
		}
	}
	commit := func() error { return pub.Commit(ctx, built.built, built.published) }
	if err := TimePhase(&res.Phases, "tag", commit); err != nil {
		err = fmt.Errorf("tag: %w", err)
		res.Tagged, res.Error = false, err.Error()
		return res, err
	}
	return res, nil
}

// movedTo is a copy of the result of a build for another tag (target) of
// the same image: nothing uploaded, no phases yet.
func (r *Result) movedTo(target string) *Result {
	c := *r
	c.Target, c.Phases = target, []Phase{}
	c.BytesUploaded, c.BytesSkipped, c.BytesMounted = 0, 0, 0
	return &c
}

// target is the publisher's target, if it can name it.
func target(pub any) string {
	if t, ok := pub.(Targeter); ok {
		return t.Target()
	}
	return ""
}
