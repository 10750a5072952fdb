package prune

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Policy is what Decide keeps besides the images in use.
type Policy struct {
	// Keep is how many good images of each pool stay (the newest).
	Keep int
	// Grace keeps every dated image younger than it.
	Grace time.Duration
	// DeleteUndated lets an image nothing dates (no build record, no
	// reference with a time) be deleted when nothing uses it; without it
	// such an image is kept.
	DeleteUndated bool
	// Now is the time ages are measured from.
	Now time.Time
	// Pools, when set, limits the deletion to the images of these pools
	// (the controller prunes a PoolImage's own pool in a repository other
	// pools may share); other pools' images are kept.
	Pools []string
}

// Actions of an Image.
const (
	ActionKeep    = "keep"
	ActionDelete  = "delete"
	ActionDeleted = "deleted"
)

// Decide marks every image kept or to delete, with its reasons.
func Decide(images []*Image, refs *Refs, p Policy) {
	byDigest := map[v1.Hash]*Image{}
	based := map[string]*Image{} // base digest → an image built on it
	for _, im := range images {
		byDigest[im.Digest] = im
		if im.BaseDigest != "" {
			based[im.BaseDigest] = im
		}
	}
	tagged := refs.Tagged()
	for _, im := range images {
		im.Action, im.Reasons = "", nil
		inUse(im, refs, tagged, based)
		if im.Gone && !im.Time.IsZero() && p.Now.Sub(im.Time) < p.Grace {
			// A build that puts its manifest by tag last (a fleet) has
			// written its record, signature and attestation before.
			im.Action = ActionKeep
			im.Reasons = []string{fmt.Sprintf("manifest not there yet, build record younger than the grace period %s: a build may be publishing it", p.Grace)}
		}
	}
	for _, im := range images {
		if im.Pool == "" && len(im.Platforms) > 0 {
			im.Pool = platformPool(im, byDigest)
		}
		// A node names its platform image; its pool may name the index.
		if idx := indexOf(im, byDigest); idx != nil && im.Action == ActionKeep {
			idx.keep("its platform image " + short(im.Digest) + " is kept: " + im.Reasons[0])
		}
	}
	for _, im := range images {
		if !im.Gone && im.Pool == "" && im.Index == nil {
			im.keep("not an oslayer image (no " + labelPool + " label): a base or another image")
		}
	}
	rank(images, p)
	platforms(images, byDigest)
}

// keep adds a reason to keep im.
func (im *Image) keep(why string) {
	im.Action = ActionKeep
	im.Reasons = append(im.Reasons, why)
}

// inUse records the references, tags and images that keep im, and dates
// it from its build records.
func inUse(im *Image, refs *Refs, tagged []Ref, based map[string]*Image) {
	for _, r := range refs.Of(im.Digest) {
		if r.Kind == "base" {
			im.keep("base image named by " + r.From)
		} else {
			im.keep("in use: " + r.From)
		}
		if !r.Time.IsZero() && r.Time.After(im.Time) {
			im.Time, im.TimeFrom = r.Time, "build record "+r.From
		}
		im.Failed = im.Failed || r.Failed
	}
	for _, t := range im.Tags {
		im.keep("tagged " + t)
	}
	for _, r := range tagged {
		if r.Repo == im.Repo && slices.Contains(im.Tags, r.Tag) {
			im.keep("in use: " + r.From)
		}
	}
	if o := based[im.Digest.String()]; o != nil {
		im.keep("base of " + short(o.Digest))
	}
	if im.Gone {
		im.Action = ActionDelete
		im.Reasons = []string{"image gone: only its attached tags are left"}
	}
}

// indexOf is the listed index of a platform image.
func indexOf(im *Image, byDigest map[v1.Hash]*Image) *Image {
	if im.Index == nil {
		return nil
	}
	return byDigest[*im.Index]
}

// platformPool is the pool label of an index's platform images.
func platformPool(im *Image, byDigest map[v1.Hash]*Image) string {
	for _, d := range im.Platforms {
		if c := byDigest[d]; c != nil && c.Pool != "" {
			return c.Pool
		}
	}
	return ""
}

// rank keeps, per repository and pool, the newest Keep good dated
// images, the dated ones younger than Grace, and every image nothing
// dates (unless DeleteUndated): the rest of the pool's images are
// deleted. An undated image takes no place among the newest and is
// never deleted in favour of a dated one: nothing says it is older.
func rank(images []*Image, p Policy) {
	for _, ims := range byPool(images, p) {
		newestFirst(ims)
		signs := false
		for _, im := range ims {
			signs = signs || im.Signed()
		}
		n := 0
		for _, im := range ims {
			// A layout holds the signatures of one image only.
			layout := strings.HasPrefix(im.Repo, layoutPrefix)
			good := !im.Failed && (im.Signed() || !signs || layout)
			if good && n < p.Keep && !im.Time.IsZero() {
				n++
				im.keep(fmt.Sprintf("one of the last %d good images of pool %s", p.Keep, im.Pool))
			}
			age(im, p)
			if im.Action == "" {
				im.Action = ActionDelete
				im.Reasons = append(im.Reasons, deleteReason(im, p, good))
			}
		}
	}
}

// byPool groups the images rank orders by repository and pool; images of
// pools this run does not prune are kept.
func byPool(images []*Image, p Policy) map[string][]*Image {
	pools := map[string][]*Image{}
	for _, im := range images {
		if im.Index == nil && im.Pool != "" && !im.Gone {
			if len(p.Pools) > 0 && !slices.Contains(p.Pools, im.Pool) {
				im.keep("pool " + im.Pool + " is not one this run prunes")
				continue
			}
			k := im.Repo + "\x00" + im.Pool
			pools[k] = append(pools[k], im)
		}
	}
	return pools
}

// age keeps a young image, or one whose age nothing tells.
func age(im *Image, p Policy) {
	switch {
	case !im.Time.IsZero() && p.Now.Sub(im.Time) < p.Grace:
		im.keep(fmt.Sprintf("younger than the grace period %s", p.Grace))
	case im.Time.IsZero() && !p.DeleteUndated && im.Action != ActionKeep:
		im.keep("age unknown: no build record dates it (undated images are kept unless the policy deletes them)")
	}
}

// deleteReason says why an image of a pool goes.
func deleteReason(im *Image, p Policy, good bool) string {
	switch {
	case im.Failed:
		return "not in use; its build failed"
	case !good:
		return "not in use; unsigned in a pool whose images are signed"
	case im.Time.IsZero():
		return "not in use; no build record dates it (the policy deletes undated images)"
	}
	if p.Keep == 0 {
		return "not in use (the policy keeps no image: keep 0)"
	}
	return fmt.Sprintf("not in use; older than the last %d good images of pool %s", p.Keep, im.Pool)
}

// newestFirst orders a pool's dated images newest first (by digest only
// for one time), then the undated ones, which are not ordered among
// themselves: nothing tells which is newer.
func newestFirst(ims []*Image) {
	sort.SliceStable(ims, func(i, j int) bool {
		a, b := ims[i], ims[j]
		if a.Time.IsZero() || b.Time.IsZero() {
			return !a.Time.IsZero() && b.Time.IsZero()
		}
		if !a.Time.Equal(b.Time) {
			return a.Time.After(b.Time)
		}
		return a.Digest.String() < b.Digest.String()
	})
}

// platforms gives an index's platform images its fate: kept with a kept
// index, deleted with a deleted one unless kept for a reason of their own.
func platforms(images []*Image, byDigest map[v1.Hash]*Image) {
	for _, im := range images {
		if im.Index == nil {
			continue
		}
		idx := byDigest[*im.Index]
		switch {
		case idx != nil && idx.Action == ActionKeep:
			im.keep("platform image of the kept index " + short(idx.Digest))
		case im.Action == ActionKeep:
		case idx != nil && idx.Action == ActionDelete:
			im.Action = ActionDelete
			im.Reasons = append(im.Reasons, "platform image of the deleted index "+short(idx.Digest))
		default:
			im.keep("platform image of an index that is not listed")
		}
	}
}

// short is "sha256:" and the first 12 hex digits.
func short(d v1.Hash) string {
	if len(d.Hex) < 12 {
		return d.String()
	}
	return d.Algorithm + ":" + d.Hex[:12]
}

// summary joins reasons for a table cell.
func summary(reasons []string) string { return strings.Join(reasons, "; ") }
