package prune

import (
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

func hash(i int) v1.Hash { return v1.Hash{Algorithm: "sha256", Hex: fmt.Sprintf("%064x", i)} }

// The last N good images of a pool are the newest by their build records;
// a failed build's image and an unsigned image in a signed pool are not
// good, and an image nothing dates takes no place among the newest and
// is kept: nothing says it is older.
func TestDecideKeepsNewestGood(t *testing.T) {
	now := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	signed := []Attachment{{Tag: "x.sig", Kind: "signature"}}
	ims := []*Image{}
	for i := 0; i < 6; i++ {
		ims = append(ims, &Image{Repo: "r", Digest: hash(i), Pool: "p", Attached: signed})
	}
	ims[4].Attached = nil // unsigned
	// Dated 0 (newest) .. 4 (as build records date them); 1 failed; 4
	// unsigned; 5 and 6 undated.
	for i := 0; i < 5; i++ {
		ims[i].Time = now.Add(-time.Duration(i+2) * time.Hour)
	}
	ims[1].Failed = true
	ims = append(ims, &Image{Repo: "r", Digest: hash(6), Pool: "p", Attached: signed})
	Decide(ims, &Refs{}, Policy{Keep: 2, Grace: time.Hour, Now: now})
	want := []string{"one of the last 2", "its build failed", "one of the last 2", "older than the last 2", "unsigned in a pool", "age unknown", "age unknown"}
	for i, w := range want {
		if got := strings.Join(ims[i].Reasons, "; "); !strings.Contains(got, w) {
			t.Errorf("image %d: %s %q, want %q", i, ims[i].Action, got, w)
		}
	}
}

// Policy.Pools limits the deletion to the pools named: another pool's
// old images in the same repository stay.
func TestDecidePools(t *testing.T) {
	now := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	var ims []*Image
	for i := 0; i < 4; i++ {
		pool := "mine"
		if i >= 2 {
			pool = "other"
		}
		ims = append(ims, &Image{Repo: "r", Digest: hash(i), Pool: pool, Time: now.Add(-time.Duration(i+1) * time.Hour)})
	}
	Decide(ims, &Refs{}, Policy{Keep: 1, Now: now, Pools: []string{"mine"}})
	for i, want := range []string{ActionKeep, ActionDelete, ActionKeep, ActionKeep} {
		if ims[i].Action != want {
			t.Errorf("image %d of pool %s: %s %v, want %s", i, ims[i].Pool, ims[i].Action, ims[i].Reasons, want)
		}
	}
	if !strings.Contains(ims[3].Reasons[0], "pool other is not one this run prunes") {
		t.Errorf("reason: %v", ims[3].Reasons)
	}
}

// With DeleteUndated an undated image nothing uses is deleted, whatever
// its digest; the dated ones keep their places.
func TestDecideDeleteUndated(t *testing.T) {
	now := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	ims := []*Image{{Repo: "r", Digest: hash(0), Pool: "p"}, {Repo: "r", Digest: hash(1), Pool: "p", Time: now.Add(-3 * time.Hour)}}
	Decide(ims, &Refs{}, Policy{Keep: 1, Grace: time.Hour, Now: now, DeleteUndated: true})
	if ims[0].Action != ActionDelete || ims[1].Action != ActionKeep {
		t.Errorf("undated %s %v, dated %s %v", ims[0].Action, ims[0].Reasons, ims[1].Action, ims[1].Reasons)
	}
}

// A gone image (no manifest) whose build record is young is kept with its
// tags: a fleet build puts its manifest by tag last, after its record and
// signature. An old one's tags go.
func TestDecideGoneYoungRecord(t *testing.T) {
	now := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	ims := []*Image{{Repo: "r", Digest: hash(0), Gone: true, Time: now.Add(-time.Minute)},
		{Repo: "r", Digest: hash(1), Gone: true, Time: now.Add(-2 * time.Hour)}}
	Decide(ims, &Refs{}, Policy{Keep: 1, Grace: time.Hour, Now: now})
	if ims[0].Action != ActionKeep || ims[1].Action != ActionDelete {
		t.Errorf("young %s %v, old %s %v", ims[0].Action, ims[0].Reasons, ims[1].Action, ims[1].Reasons)
	}
}
