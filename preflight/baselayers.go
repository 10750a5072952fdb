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
		out = append(out, comparePrefix(t, t.BaseManifest, t.BaseConfig, orDefault(t.BaseRef, "the base"), "--base")...)
	}
	if t.ReqManifest != nil {
		out = append(out, comparePrefix(t, t.ReqManifest, t.ReqConfig, orDefault(t.RequireRef, "the required base"), "--require-base")...)
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

func comparePrefix(t *Target, bm *v1.Manifest, bc *v1.ConfigFile, ref, flag string) []Finding {
	var out []Finding
	cl := t.Manifest.Layers
	cd := t.Config.RootFS.DiffIDs
	bl := bm.Layers
	bd := bc.RootFS.DiffIDs
	inBase := map[v1.Hash]int{}
	for i, l := range bl {
		inBase[l.Digest] = i
	}
	inCand := map[v1.Hash]int{}
	for i, l := range cl {
		if _, ok := inCand[l.Digest]; !ok {
			inCand[l.Digest] = i
		}
	}
	candDiff := map[v1.Hash]int{}
	for i, d := range cd {
		if _, ok := candDiff[d]; !ok {
			candDiff[d] = i
		}
	}
	present := 0
	lastPresent := -1 // highest base index present in the candidate
	for i, l := range bl {
		if _, ok := inCand[l.Digest]; ok {
			present++
			lastPresent = i
		}
	}
	if present == 0 && len(bl) > 0 {
		return []Finding{{Message: fmt.Sprintf("none of the %d layers of %s (%s) are in the image: it was built from a different or rebuilt base; rebuild it FROM %s", len(bl), ref, flag, ref)}}
	}
	diffAt := func(s []v1.Hash, i int) v1.Hash {
		if i < len(s) {
			return s[i]
		}
		return v1.Hash{}
	}
	var layerFindings []Finding
	add := func(f Finding) { layerFindings = append(layerFindings, f) }
	// Candidate layers that are not base layers but sit among them
	// (before the last base layer present), and are not a replacement of
	// the base layer at the same index, were inserted.
	maxPos := -1
	for _, l := range bl {
		if j, ok := inCand[l.Digest]; ok {
			maxPos = max(maxPos, j)
		}
	}
	inserted := map[int]bool{}
	for k := 0; k < maxPos; k++ {
		if isIn(inBase, cl[k].Digest) {
			continue
		}
		if k < len(bl) && !isIn(inCand, bl[k].Digest) {
			continue // a replacement, reported below
		}
		inserted[k] = true
	}
	insertedBefore := func(j int) bool {
		for k := range inserted {
			if k < j {
				return true
			}
		}
		return false
	}
	for k := 0; k < maxPos; k++ {
		if inserted[k] {
			layerFindings = append(layerFindings, Finding{Layer: cl[k].Digest.String(), Message: fmt.Sprintf("image layer %d (%s) is not a layer of %s but sits among its layers: the base layers must come first, unbroken", k, short(cl[k].Digest), ref)})
		}
	}
	shifted := false // a missing layer explains later index shifts
	last := -1
	for i, l := range bl {
		j, ok := inCand[l.Digest]
		switch {
		case !ok && i < len(cl) && !isIn(inBase, cl[i].Digest) && lastPresent > i:
			msg := fmt.Sprintf("base layer %d of %s (%s) was replaced: the image has %s at index %d", i, ref, short(l.Digest), short(cl[i].Digest), i)
			if bdi := diffAt(bd, i); bdi != (v1.Hash{}) && diffAt(cd, i) == bdi {
				msg += " with the same diff_id (recompressed); nodes download it again"
			}
			add(Finding{Layer: cl[i].Digest.String(), Message: msg})
		case !ok:
			add(Finding{Layer: l.Digest.String(), Message: fmt.Sprintf("base layer %d of %s (%s, diff_id %s) is missing from the image", i, ref, short(l.Digest), short(diffAt(bd, i)))})
			shifted = true
		case j != i && (!(shifted || insertedBefore(j)) || j < last):
			add(Finding{Layer: l.Digest.String(), Message: fmt.Sprintf("base layer %d of %s (%s) moved to index %d of the image", i, ref, short(l.Digest), j)})
		default:
			if bdi := diffAt(bd, i); bdi != diffAt(cd, j) {
				add(Finding{Layer: l.Digest.String(), Message: fmt.Sprintf("base layer %d of %s (%s) has diff_id %s in the image config, the base says %s: the config was altered", i, ref, short(l.Digest), short(diffAt(cd, j)), short(bdi))})
			}
		}
		if ok {
			last = max(last, j)
		}
	}
	if len(layerFindings) > maxLayerFindings {
		n := len(layerFindings) - maxLayerFindings
		layerFindings = append(layerFindings[:maxLayerFindings], Finding{Message: fmt.Sprintf("... and %d more base layer problems against %s", n, ref)})
	}
	out = append(out, layerFindings...)
	return out
}

func isIn(m map[v1.Hash]int, h v1.Hash) bool {
	_, ok := m[h]
	return ok
}
