package publish

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/oslayer/oslayer/assemble"
	"github.com/oslayer/oslayer/internal/registry"
)

// stepError is a failure of one step of a layout commit; the commit
// prefixes it with the layout and tag.
type stepError struct {
	step string
	err  error
}

func (e *stepError) Error() string { return e.step + ": " + e.err.Error() }
func (e *stepError) Unwrap() error { return e.err }

// failed is the error of step (nil when err is).
func failed(step string, err error) error {
	if err == nil {
		return nil
	}
	return &stepError{step, err}
}

// commit points the layout's tag at the manifest (an image's or an
// index's) d, which Write put in the layout as pub: under the layout's
// lock it rewrites index.json with the tag's entry (and the signatures
// and attestations stages attached) replaced.
func (l *layoutPublisher) commit(ctx context.Context, pub *assemble.Published, d v1.Hash, mt types.MediaType, raw []byte) error {
	p := l.p
	if err := l.commitLocked(ctx, pub, d, mt, raw); err != nil {
		return fmt.Errorf("commit OCI layout %s:%s: %w", p.dir, p.layoutTag, err)
	}
	return nil
}

// commitLocked checks what Write wrote, takes the layout's lock and
// rewrites index.json.
func (l *layoutPublisher) commitLocked(ctx context.Context, pub *assemble.Published, d v1.Hash, mt types.MediaType, raw []byte) error {
	p := l.p
	if err := l.checkWritten(ctx, pub, d, int64(len(raw))); err != nil {
		return failed("check", err)
	}
	unlock, err := registry.LockLayout(p.dir)
	if err != nil {
		return failed("lock", err)
	}
	defer unlock()
	rt, err := newRunTemp(p.dir, p.o.log)
	if err != nil {
		return failed("create temp dir", err)
	}
	defer rt.close()
	idx, entries, err := readIndexJSON(p.dir)
	if err != nil {
		return err
	}
	kept, replaced, err := l.keepEntries(entries, len(pub.Attached) > 0)
	if err != nil {
		return err
	}
	added, err := l.tagEntries(pub, v1.Descriptor{MediaType: mt, Digest: d, Size: int64(len(raw))})
	if err != nil {
		return err
	}
	if err := writeIndexJSON(p.dir, rt.dir, idx, append(kept, added...)); err != nil {
		return failed("write index.json", err)
	}
	p.o.log.Info("tag moved", "layout", p.dir, "tag", p.layoutTag, "digest", d.String(), "replaced", replaced)
	return nil
}

// checkWritten checks that pub is the manifest d of this layout and that
// its blob (of size bytes) is there.
func (l *layoutPublisher) checkWritten(ctx context.Context, pub *assemble.Published, d v1.Hash, size int64) error {
	p := l.p
	if want := registry.LayoutPrefix + p.dir + "@" + d.String(); pub.Ref != want {
		return fmt.Errorf("commit of %s, which this publisher did not write (want %s)", pub.Ref, want)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if st, err := os.Stat(blobPath(p.dir, d)); err != nil || st.Size() != size {
		return fmt.Errorf("manifest blob %s is not in the layout (was Write called?)", d)
	}
	return nil
}

// readIndexJSON reads the layout's index.json as raw fields and its
// manifests as raw entries: only "manifests" changes, other fields of
// index.json and of the entries kept are preserved byte for byte.
func readIndexJSON(dir string) (map[string]json.RawMessage, []json.RawMessage, error) {
	ib, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		return nil, nil, failed("read index.json", err)
	}
	var idx map[string]json.RawMessage
	if err := json.Unmarshal(ib, &idx); err != nil || idx == nil {
		return nil, nil, failed("read index.json", fmt.Errorf("not a JSON object"))
	}
	var entries []json.RawMessage
	if m, ok := idx["manifests"]; ok && string(m) != "null" {
		if err := json.Unmarshal(m, &entries); err != nil {
			return nil, nil, failed("read index.json", fmt.Errorf("manifests: not an array"))
		}
	}
	return idx, entries, nil
}

// layoutEntry is what a commit reads of an index.json entry.
type layoutEntry struct {
	Digest      string            `json:"digest"`
	Annotations map[string]string `json:"annotations"`
}

// keepEntries returns the entries that stay, and the digests the tag
// named before. When the image is signed, the layout's signatures now
// belong to it: the earlier signatures and attestations go, an earlier
// signed image stays as a plain tagged entry.
func (l *layoutPublisher) keepEntries(entries []json.RawMessage, signed bool) (kept []json.RawMessage, replaced []string, err error) {
	kept = make([]json.RawMessage, 0, len(entries)+1)
	for i, e := range entries {
		var desc layoutEntry
		if err := json.Unmarshal(e, &desc); err != nil {
			return nil, nil, failed("read index.json", fmt.Errorf("manifests[%d]: not a descriptor", i))
		}
		if desc.Annotations[RefNameAnnotation] == l.p.layoutTag {
			replaced = append(replaced, desc.Digest)
			continue
		}
		if !signed {
			kept = append(kept, e)
			continue
		}
		switch desc.Annotations[KindAnnotation] {
		case KindSignatures, KindAttestations:
			continue
		case KindImage:
			if e, err = unmarkImage(i, e); err != nil {
				return nil, nil, err
			}
		}
		kept = append(kept, e)
	}
	return kept, replaced, nil
}

// unmarkImage drops the kind annotation of entry i (an earlier signed
// image), and the annotations when none is left.
func unmarkImage(i int, e json.RawMessage) (json.RawMessage, error) {
	var full map[string]any
	if err := json.Unmarshal(e, &full); err != nil {
		return nil, failed("read index.json", fmt.Errorf("manifests[%d]: %v", i, err))
	}
	ann, _ := full["annotations"].(map[string]any)
	delete(ann, KindAnnotation)
	if len(ann) == 0 {
		delete(full, "annotations")
	}
	out, err := json.Marshal(full)
	return out, failed("write index.json", err)
}

// tagEntries returns the tag's new entry for desc, then one per manifest
// the stages attached (each checked to be in the layout).
func (l *layoutPublisher) tagEntries(pub *assemble.Published, desc v1.Descriptor) ([]json.RawMessage, error) {
	desc.Annotations = map[string]string{RefNameAnnotation: l.p.layoutTag}
	if len(pub.Attached) > 0 {
		desc.Annotations[KindAnnotation] = KindImage
	}
	entry, err := json.Marshal(desc)
	if err != nil {
		return nil, failed("write index.json", err)
	}
	out := []json.RawMessage{entry}
	for _, a := range pub.Attached {
		if st, err := os.Stat(blobPath(l.p.dir, a.Descriptor.Digest)); err != nil || st.Size() != a.Descriptor.Size {
			return nil, failed("check", fmt.Errorf("%s manifest %s is not in the layout", a.Kind, a.Descriptor.Digest))
		}
		ad := a.Descriptor
		ad.Annotations = map[string]string{KindAnnotation: a.Kind}
		e, err := json.Marshal(ad)
		if err != nil {
			return nil, failed("write index.json", err)
		}
		out = append(out, e)
	}
	return out, nil
}

// writeIndexJSON writes index.json with entries as its manifests (and
// the schema version and media type when it had none) atomically.
func writeIndexJSON(dir, tmpDir string, idx map[string]json.RawMessage, entries []json.RawMessage) error {
	var err error
	if idx["manifests"], err = json.Marshal(entries); err != nil {
		return err
	}
	if _, ok := idx["schemaVersion"]; !ok {
		idx["schemaVersion"] = json.RawMessage("2")
	}
	if _, ok := idx["mediaType"]; !ok {
		idx["mediaType"] = json.RawMessage(`"` + string(types.OCIImageIndex) + `"`)
	}
	out, err := json.Marshal(idx)
	if err != nil {
		return err
	}
	return writeFileAtomic(dir, tmpDir, "index.json", out)
}
