package synth

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// OstreeUnits is how many of an OstreeBase's files are systemd units
// (usr/lib/systemd/system/synth-N.service).
const OstreeUnits = 200

// OstreeBase returns a base laid out as ostree-ext writes a chunked image:
// files spread over layers as objects (sysroot/ostree/repo/objects/XX/
// SUM.file, each followed by its xattrs link) with the checkout paths as
// hardlinks to them, and a last layer with the directories and the small
// root tree of FCOSBase. It has files regular files of 100 to 4000 bytes
// under usr/share/synth/dNNN/ (the first OstreeUnits are units instead), in
// layers layers (plus the last one), so a base with as many paths as a real
// Fedora CoreOS (files ≈ 60000) costs little to generate. The same
// arguments always give the same image digest.
func OstreeBase(files, layers int) (v1.Image, error) {
	if files < OstreeUnits || layers < 1 {
		return nil, fmt.Errorf("synth: want at least %d files and one layer", OstreeUnits)
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	var adds []mutate.Addendum
	var last v1.Hash
	add := func(i int, write func(*tar.Writer) error) error {
		l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return gzipStream(write), nil },
			tarball.WithMediaType(types.OCILayer))
		if err != nil {
			return fmt.Errorf("synth: ostree layer %d: %w", i, err)
		}
		if last, err = l.DiffID(); err != nil {
			return fmt.Errorf("synth: ostree layer %d: %w", i, err)
		}
		adds = append(adds, mutate.Addendum{Layer: l, MediaType: types.OCILayer, History: v1.History{
			Created: v1.Time{Time: Epoch}, CreatedBy: fmt.Sprintf("ostree chunk %d of %d", i+1, layers+1),
		}})
		return nil
	}
	for i := range layers {
		if err := add(i, func(tw *tar.Writer) error { return writeOstreeChunk(tw, files, layers, i) }); err != nil {
			return nil, err
		}
	}
	if err := add(layers, func(tw *tar.Writer) error { return writeOstreeFinal(tw, files) }); err != nil {
		return nil, err
	}
	cf := &v1.ConfigFile{
		Architecture: "amd64", OS: "linux", Created: v1.Time{Time: Epoch}, RootFS: v1.RootFS{Type: "layers"},
		Config: v1.Config{Labels: map[string]string{
			"containers.bootc": "1", "ostree.bootable": "1", "ostree.final-diffid": last.String(),
			"ostree.linux": KernelRelease, "org.opencontainers.image.version": Version,
		}},
	}
	img, err := mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, err
	}
	return mutate.Append(img, adds...)
}

// ostreeFile is the checkout path and content of file n.
func ostreeFile(n int) (string, []byte) {
	if n < OstreeUnits {
		return fmt.Sprintf("usr/lib/systemd/system/synth-%d.service", n),
			[]byte(fmt.Sprintf("[Unit]\nDescription=synthetic unit %d\n\n[Service]\nExecStart=/usr/bin/true\n\n[Install]\nWantedBy=multi-user.target\n", n))
	}
	var seed [32]byte
	seed[0], seed[1], seed[2], seed[3] = byte(n), byte(n>>8), byte(n>>16), 0x0e
	r := rand.New(rand.NewChaCha8(seed))
	b := make([]byte, 100+r.IntN(3900))
	const text = "abcdefghijklmnopqrstuvwxyz \n"
	for i := range b {
		b[i] = text[r.IntN(len(text))]
	}
	return fmt.Sprintf("usr/share/synth/d%03d/f%05d", n/1000, n), b
}

func objectPath(sum [32]byte, suffix string) string {
	h := hex.EncodeToString(sum[:])
	return "sysroot/ostree/repo/objects/" + h[:2] + "/" + h[2:] + suffix
}

func writeOstreeChunk(tw *tar.Writer, files, layers, i int) error {
	xattrs := sha256.Sum256([]byte("xattrs"))
	if err := tw.WriteHeader(&tar.Header{Name: objectPath(xattrs, ".file-xattrs"), Typeflag: tar.TypeReg, Mode: 0o644, ModTime: Epoch, Format: tar.FormatPAX}); err != nil {
		return err
	}
	for n := i; n < files; n += layers {
		p, data := ostreeFile(n)
		sum := sha256.Sum256(data)
		obj := objectPath(sum, ".file")
		for _, h := range []*tar.Header{
			{Name: objectPath(sum, ".file-xattrs-link"), Typeflag: tar.TypeLink, Linkname: objectPath(xattrs, ".file-xattrs")},
			{Name: obj, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(data))},
			{Name: p, Typeflag: tar.TypeLink, Linkname: obj},
		} {
			h.ModTime, h.Format = Epoch, tar.FormatPAX
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			if h.Typeflag == tar.TypeReg && h.Size > 0 {
				if _, err := tw.Write(data); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func writeOstreeFinal(tw *tar.Writer, files int) error {
	dirs := map[string]bool{}
	for n := range files {
		p, _ := ostreeFile(n)
		for d := p[:strings.LastIndex(p, "/")]; d != "" && !dirs[d]; {
			dirs[d] = true
			i := strings.LastIndex(d, "/")
			if i < 0 {
				break
			}
			d = d[:i]
		}
	}
	root := tree()
	for _, e := range root {
		delete(dirs, strings.TrimSuffix(e.name, "/"))
	}
	if err := writeEntries(tw, root); err != nil {
		return err
	}
	for _, d := range slices.Sorted(maps.Keys(dirs)) {
		if err := tw.WriteHeader(&tar.Header{Name: d + "/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: Epoch, Format: tar.FormatPAX}); err != nil {
			return err
		}
	}
	return nil
}
