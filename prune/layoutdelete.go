package prune

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/oslayer/oslayer/internal/registry"
)

// deleteLayout removes im's and its attachments' index.json entries (an
// orphan has none); its blobs go in collectLayout.
func deleteLayout(dir string, im *Image) error {
	drop := map[string]bool{im.Digest.String(): true}
	for _, a := range im.Attached {
		drop[a.Digest] = true
	}
	unlock, err := registry.LockLayout(dir)
	if err != nil {
		return fmt.Errorf("OCI layout %s: lock: %w", dir, err)
	}
	defer unlock()
	path := filepath.Join(dir, "index.json")
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	var idx map[string]json.RawMessage
	var entries []json.RawMessage
	if err := json.Unmarshal(b, &idx); err != nil || json.Unmarshal(idx["manifests"], &entries) != nil {
		return fmt.Errorf("OCI layout %s: index.json: not an image index", dir)
	}
	kept := entries[:0]
	for _, e := range entries {
		var d struct {
			Digest string `json:"digest"`
		}
		if json.Unmarshal(e, &d) == nil && drop[d.Digest] {
			continue
		}
		kept = append(kept, e)
	}
	if len(kept) == len(entries) {
		return nil
	}
	if idx["manifests"], err = json.Marshal(kept); err != nil {
		return err
	}
	return writeAtomic(path, idx)
}

// writeAtomic writes v as JSON to path through a temporary file.
func writeAtomic(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp := path + ".oslayer-prune"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// collectLayout deletes the blobs only deleted images used: everything a
// deleted image (or its attachments) reaches, less everything a remaining
// index.json entry or a kept image reaches.
func collectLayout(dir string, images []*Image) error {
	unlock, err := registry.LockLayout(dir)
	if err != nil {
		return fmt.Errorf("OCI layout %s: lock: %w", dir, err)
	}
	defer unlock()
	entries, err := layoutIndex(dir)
	if err != nil {
		return err
	}
	live, dead := map[v1.Hash]bool{}, map[v1.Hash]bool{}
	for _, e := range entries {
		reach(dir, e.Digest, live, 0)
	}
	for _, im := range images {
		if im.Action == ActionKeep {
			reach(dir, im.Digest, live, 0)
		}
	}
	for _, im := range images {
		if im.Action != ActionDeleted {
			continue
		}
		reach(dir, im.Digest, dead, 0)
		for _, a := range im.Attached {
			if h, err := v1.NewHash(a.Digest); err == nil {
				reach(dir, h, dead, 0)
			}
		}
	}
	for h := range dead {
		if !live[h] {
			if err := os.Remove(blobFile(dir, h)); err != nil && !os.IsNotExist(err) {
				return fmt.Errorf("OCI layout %s: %w", dir, err)
			}
		}
	}
	return nil
}

// reach marks h and every blob its manifest names (nested at most 4 deep).
func reach(dir string, h v1.Hash, seen map[v1.Hash]bool, depth int) {
	if seen[h] || depth > 4 {
		return
	}
	seen[h] = true
	m, ok := readManifest(dir, h)
	if !ok {
		return
	}
	if m.Config != nil {
		seen[m.Config.Digest] = true
	}
	for _, l := range m.Layers {
		seen[l.Digest] = true
	}
	for _, c := range m.Manifests {
		reach(dir, c.Digest, seen, depth+1)
	}
}
