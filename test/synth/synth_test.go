package synth

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/types"
)

func TestFCOSBaseDeterministic(t *testing.T) {
	a, err := FCOSBase(0.0001)
	if err != nil {
		t.Fatal(err)
	}
	b, err := FCOSBase(0.0001)
	if err != nil {
		t.Fatal(err)
	}
	da, _ := a.Digest()
	db, _ := b.Digest()
	if da != db {
		t.Fatalf("digests %s and %s", da, db)
	}
	c, _ := FCOSBase(0.0002)
	if dc, _ := c.Digest(); dc == da {
		t.Error("another scale, same digest")
	}
	m, _ := a.Manifest()
	if len(m.Layers) != 51 || m.MediaType != types.OCIManifestSchema1 {
		t.Fatalf("%d layers, %s", len(m.Layers), m.MediaType)
	}
	for i, l := range m.Layers {
		want := int64(float64(FCOSLayerSizes[i]) * 0.0001)
		if want < MinLayerSize {
			want = MinLayerSize
		}
		// gzip of random bytes: payload plus tar and gzip framing.
		if l.Size < want || l.Size > want+8192 || l.MediaType != types.OCILayer {
			t.Errorf("layer %d: %d bytes %s, payload %d", i, l.Size, l.MediaType, want)
		}
	}
	cf, _ := a.ConfigFile()
	if cf.Config.Labels["ostree.final-diffid"] != cf.RootFS.DiffIDs[50].String() || cf.Config.Labels["containers.bootc"] != "1" {
		t.Errorf("labels %v", cf.Config.Labels)
	}
	if len(cf.History) != 51 {
		t.Errorf("%d history entries", len(cf.History))
	}
	d, err := Docker(a)
	if err != nil {
		t.Fatal(err)
	}
	dm, _ := d.Manifest()
	for i := range dm.Layers {
		if dm.Layers[i].Digest != m.Layers[i].Digest || dm.Layers[i].MediaType != types.DockerLayer {
			t.Errorf("docker layer %d: %+v", i, dm.Layers[i])
		}
	}
}

func TestOstreeBaseDeterministic(t *testing.T) {
	a, err := OstreeBase(OstreeUnits+10, 3)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := OstreeBase(OstreeUnits+10, 3)
	da, _ := a.Digest()
	db, _ := b.Digest()
	if da != db {
		t.Fatalf("digests %s and %s", da, db)
	}
	m, _ := a.Manifest()
	cf, _ := a.ConfigFile()
	if len(m.Layers) != 4 || cf.Config.Labels["ostree.final-diffid"] != cf.RootFS.DiffIDs[3].String() {
		t.Errorf("%d layers, labels %v", len(m.Layers), cf.Config.Labels)
	}
	if _, err := OstreeBase(1, 1); err == nil {
		t.Error("a base with fewer files than units")
	}
}

// TestChunkahBase: the rechunked shape: as many layers and history entries
// as asked, all distinct, no ostree.commit or ostree.final-diffid label.
func TestChunkahBase(t *testing.T) {
	img, err := ChunkahBase(400)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := img.Manifest()
	cf, _ := img.ConfigFile()
	if len(m.Layers) != 400 || len(cf.History) != 400 || len(cf.RootFS.DiffIDs) != 400 {
		t.Fatalf("%d layers, %d history entries, %d diff_ids", len(m.Layers), len(cf.History), len(cf.RootFS.DiffIDs))
	}
	seen := map[string]int{}
	for i, l := range m.Layers {
		if j, ok := seen[l.Digest.String()]; ok {
			t.Fatalf("layers %d and %d are both %s", j, i, l.Digest)
		}
		seen[l.Digest.String()] = i
	}
	for _, k := range []string{"ostree.commit", "ostree.final-diffid"} {
		if v, ok := cf.Config.Labels[k]; ok {
			t.Errorf("label %s=%s on a rechunked base", k, v)
		}
	}
	if cf.Config.Labels["containers.bootc"] != "1" {
		t.Errorf("labels %v", cf.Config.Labels)
	}
}

// TestWriteTreeModes: the sticky /tmp and the 0700 /root target keep their
// modes, and the /var symlinks are links.
func TestWriteTreeModes(t *testing.T) {
	d := t.TempDir()
	WriteTree(t, d, Skeleton())
	fi, err := os.Stat(filepath.Join(d, "tmp"))
	if err != nil || fi.Mode()&os.ModeSticky == 0 || fi.Mode().Perm() != 0o777 {
		t.Errorf("/tmp: %v %v, want sticky 0777", fi.Mode(), err)
	}
	for _, l := range []string{"opt", "root", "home", "srv", "mnt", "usr/local"} {
		if target, err := os.Readlink(filepath.Join(d, l)); err != nil || filepath.Base(filepath.Dir(target)) != "var" {
			t.Errorf("/%s -> %q (%v), want a link into var", l, target, err)
		}
	}
}

// TestSkeletonHasTheBaseTree: the skeleton is the synthetic bases' root
// tree plus what the node tools need, one entry per path.
func TestSkeletonHasTheBaseTree(t *testing.T) {
	seen := map[string]bool{}
	for _, e := range Skeleton() {
		p := strings.TrimSuffix(e.name, "/")
		if seen[p] {
			t.Errorf("%s twice", p)
		}
		seen[p] = true
	}
	for _, e := range tree() {
		if !seen[strings.TrimSuffix(e.name, "/")] {
			t.Errorf("the skeleton lacks %s of the base tree", e.name)
		}
	}
}
