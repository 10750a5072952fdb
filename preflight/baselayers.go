package preflight

import (
	"context"
	"fmt"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// maxLayerFindings bounds the per-layer findings of one base comparison.
const maxLayerFindings = 10

// baseLayersCheck: every layer of the base (--base) and of the required
// base (--require-base), by digest and diff_id, is an ordered prefix of the
// candidate's layers.
type baseLayersCheck struct{}

func (baseLayersCheck) Name() string       { return "base-layers-present" }
func (baseLayersCheck) Severity() Severity { return Error }
func (baseLayersCheck) Needs() Needs       { return NeedBase | NeedWritten }

func (c baseLayersCheck) Run(_ context.Context, t *Target) ([]Finding, error) {
	var out []Finding
	if t.BaseManifest != nil {
		out = append(out, comparePrefix(t, t.BaseManifest, t.BaseConfig, orDefault(t.BaseRef, "the base"), "base")...)
	}
	if t.ReqManifest != nil {
		out = append(out, comparePrefix(t, t.ReqManifest, t.ReqConfig, orDefault(t.RequireRef, "the required base"), "preflight.requireBase")...)
	}
	return out, nil
}

func short(h v1.Hash) string {
	s := h.String()
	if len(s) > 19 {
		return s[:19]
	}
	return s
}

// comparePrefix compares the layers of the base ref, given as field
// (base, preflight.requireBase), with the candidate's.
func comparePrefix(t *Target, bm *v1.Manifest, bc *v1.ConfigFile, ref, field string) []Finding {
	c := newPrefixCompare(t, bm, bc, ref)
	if c.present == 0 && len(c.bl) > 0 {
		return []Finding{{Field: field, Message: fmt.Sprintf("none of the %d layers of %s (%s) are in the image: it was built from a different or rebuilt base; rebuild it FROM %s", len(c.bl), ref, field, ref)}}
	}
	c.insertedLayers()
	c.baseLayers()
	if len(c.out) > maxLayerFindings {
		n := len(c.out) - maxLayerFindings
		c.out = append(c.out[:maxLayerFindings], Finding{Message: fmt.Sprintf("... and %d more base layer problems against %s", n, ref)})
	}
	return c.out
}

// prefixCompare compares the layers of a base (bl, bd: digests and
// diff_ids) with those of the candidate (cl, cd).
type prefixCompare struct {
	ref    string
	cl, bl []v1.Descriptor
	cd, bd []v1.Hash
	// inBase, inCand: digest → index in the base, first index in the
	// candidate.
	inBase, inCand map[v1.Hash]int
	// present counts the base layers in the candidate; lastPresent is the
	// highest base index present; maxPos the highest candidate index of a
	// base layer.
	present, lastPresent, maxPos int
	// inserted holds the candidate indexes of layers inserted among the
	// base's.
	inserted map[int]bool
	out      []Finding
}

func newPrefixCompare(t *Target, bm *v1.Manifest, bc *v1.ConfigFile, ref string) *prefixCompare {
	c := &prefixCompare{ref: ref, cl: t.Manifest.Layers, cd: t.Config.RootFS.DiffIDs, bl: bm.Layers, bd: bc.RootFS.DiffIDs,
		inBase: map[v1.Hash]int{}, inCand: map[v1.Hash]int{}, lastPresent: -1, maxPos: -1, inserted: map[int]bool{}}
	for i, l := range c.bl {
		c.inBase[l.Digest] = i
	}
	for i, l := range c.cl {
		if _, ok := c.inCand[l.Digest]; !ok {
			c.inCand[l.Digest] = i
		}
	}
	for i, l := range c.bl {
		if j, ok := c.inCand[l.Digest]; ok {
			c.present++
			c.lastPresent = i
			c.maxPos = max(c.maxPos, j)
		}
	}
	return c
}

func (c *prefixCompare) add(f Finding) { c.out = append(c.out, f) }

// insertedLayers finds candidate layers that are not base layers but sit
// among them (before the last base layer present), and are not a
// replacement of the base layer at the same index.
func (c *prefixCompare) insertedLayers() {
	for k := 0; k < c.maxPos; k++ {
		if isIn(c.inBase, c.cl[k].Digest) {
			continue
		}
		if k < len(c.bl) && !isIn(c.inCand, c.bl[k].Digest) {
			continue // a replacement, reported below
		}
		c.inserted[k] = true
	}
	for k := 0; k < c.maxPos; k++ {
		if c.inserted[k] {
			c.add(Finding{Layer: c.cl[k].Digest.String(), Message: fmt.Sprintf("image layer %d (%s) is not a layer of %s but sits among its layers: the base layers must come first, unbroken", k, short(c.cl[k].Digest), c.ref)})
		}
	}
}

func (c *prefixCompare) insertedBefore(j int) bool {
	for k := range c.inserted {
		if k < j {
			return true
		}
	}
	return false
}

// baseLayers reports each base layer that was replaced, is missing, moved
// or has another diff_id in the candidate.
func (c *prefixCompare) baseLayers() {
	shifted := false // a missing layer explains later index shifts
	last := -1
	for i, l := range c.bl {
		j, ok := c.inCand[l.Digest]
		switch {
		case !ok && i < len(c.cl) && !isIn(c.inBase, c.cl[i].Digest) && c.lastPresent > i:
			c.replaced(i)
		case !ok:
			c.add(Finding{Layer: l.Digest.String(), Message: fmt.Sprintf("base layer %d of %s (%s, diff_id %s) is missing from the image", i, c.ref, short(l.Digest), short(hashAt(c.bd, i)))})
			shifted = true
		case j != i && (!(shifted || c.insertedBefore(j)) || j < last):
			c.add(Finding{Layer: l.Digest.String(), Message: fmt.Sprintf("base layer %d of %s (%s) moved to index %d of the image", i, c.ref, short(l.Digest), j)})
		default:
			if bdi := hashAt(c.bd, i); bdi != hashAt(c.cd, j) {
				c.add(Finding{Layer: l.Digest.String(), Message: fmt.Sprintf("base layer %d of %s (%s) has diff_id %s in the image config, the base says %s: the config was altered", i, c.ref, short(l.Digest), short(hashAt(c.cd, j)), short(bdi))})
			}
		}
		if ok {
			last = max(last, j)
		}
	}
}

// replaced reports base layer i replaced by another layer at its index.
func (c *prefixCompare) replaced(i int) {
	msg := fmt.Sprintf("base layer %d of %s (%s) was replaced: the image has %s at index %d", i, c.ref, short(c.bl[i].Digest), short(c.cl[i].Digest), i)
	if bdi := hashAt(c.bd, i); bdi != (v1.Hash{}) && hashAt(c.cd, i) == bdi {
		msg += " with the same diff_id (recompressed); nodes download it again"
	}
	c.add(Finding{Layer: c.cl[i].Digest.String(), Message: msg})
}

// hashAt is s[i], or the zero hash past its end.
func hashAt(s []v1.Hash, i int) v1.Hash {
	if i < len(s) {
		return s[i]
	}
	return v1.Hash{}
}

func isIn(m map[v1.Hash]int, h v1.Hash) bool {
	_, ok := m[h]
	return ok
}
