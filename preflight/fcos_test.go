package preflight

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/oslayer/oslayer/test/fixtures"
)

// manifestOnly is an image known only by a real manifest: its config is
// synthesized (diff_id = sha256 of the layer digest) and no blob exists.
type manifestOnly struct {
	raw, config []byte
}

func (m *manifestOnly) RawManifest() ([]byte, error)        { return m.raw, nil }
func (m *manifestOnly) RawConfigFile() ([]byte, error)      { return m.config, nil }
func (m *manifestOnly) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }
func (m *manifestOnly) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	return nil, fmt.Errorf("blob %s is not available", h)
}

func fcosManifestImage(t *testing.T, file string) (v1.Image, *v1.Manifest) {
	t.Helper()
	raw, err := os.ReadFile(fixtures.Path(t, "fcos", file))
	if err != nil {
		t.Fatal(err)
	}
	var m v1.Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	cf := v1.ConfigFile{OS: "linux", Architecture: "amd64", RootFS: v1.RootFS{Type: "layers"}, Config: v1.Config{Labels: map[string]string{"ostree.bootable": "true"}}}
	for _, l := range m.Layers {
		s := sha256.Sum256([]byte(l.Digest.String()))
		cf.RootFS.DiffIDs = append(cf.RootFS.DiffIDs, v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(s[:])})
		cf.History = append(cf.History, v1.History{CreatedBy: "chunk"})
	}
	config, err := json.Marshal(cf)
	if err != nil {
		t.Fatal(err)
	}
	img, err := partial.CompressedToImage(&manifestOnly{raw: raw, config: config})
	if err != nil {
		t.Fatal(err)
	}
	return img, &m
}

// TestRealFCOSManifests compares two real 51-layer Fedora CoreOS builds:
// an image built on the newer one does not carry the older one's layers
// 0, 4, 5 and 50.
func TestRealFCOSManifests(t *testing.T) {
	older, om := fcosManifestImage(t, "manifest1.json")
	newer, nm := fcosManifestImage(t, "manifest2.json")
	rep := run(t, Target{Image: newer, Require: older, RequireRef: "fcos-older"}, only(baseLayersCheck{}, Options{}))
	repl := func(i int) Finding {
		return Finding{Check: "base-layers-present", Severity: Error, Layer: nm.Layers[i].Digest.String(),
			Message: fmt.Sprintf("base layer %d of fcos-older (%s) was replaced: the image has %s at index %d", i, short(om.Layers[i].Digest), short(nm.Layers[i].Digest), i)}
	}
	assertFindings(t, rep.Findings, []Finding{repl(0), repl(4), repl(5),
		{Check: "base-layers-present", Severity: Error, Layer: om.Layers[50].Digest.String(),
			Message: fmt.Sprintf("base layer 50 of fcos-older (%s, diff_id %s) is missing from the image", short(om.Layers[50].Digest), short(mustDiff(t, older, 50)))}})
	rep = run(t, Target{Image: newer, Require: newer, RequireRef: "fcos-newer"}, Options{})
	if rep.Errors != 0 || len(rep.AddedLayers) != 0 {
		t.Errorf("image against itself: %+v", rep)
	}
}

func mustDiff(t *testing.T, img v1.Image, i int) v1.Hash {
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	return cf.RootFS.DiffIDs[i]
}
