// Package synth generates deterministic synthetic base images for tests and
// benchmarks: an ostree-native-shaped image with the layer structure of
// Fedora CoreOS (51 gzip layers whose compressed sizes follow a real FCOS
// manifest, scaled), its labels (containers.bootc, ostree.bootable,
// ostree.final-diffid, ostree.linux, ...) and a small root tree in the first
// layer. The same scale always gives the same image digest.
//
// Layer content is generated on demand from a seeded ChaCha8 stream, so a
// 1 GB base costs no memory; reading a layer regenerates it.
package synth

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// FCOSLayerSizes are the compressed layer sizes, bottom first, of a Fedora
// CoreOS testing-devel image (43.20260301.20.dev1, 51 layers, 697 MB).
var FCOSLayerSizes = []int64{
	1387849, 48676116, 124705297, 38743650, 77161948, 21970157, 59797135, 49410348,
	21714783, 15264848, 14373701, 8400473, 6914489, 8294965, 6600369, 16869027,
	5735283, 4528663, 5266030, 4316135, 3914655, 2441858, 3818782, 3885971,
	3442642, 3066348, 909923, 3553645, 1495301, 3063142, 8109718, 3003935,
	2468557, 2427605, 2991782, 3085765, 2724309, 2512079, 2341122, 2759344,
	2539288, 2415870, 2145078, 5098511, 1051999, 2713694, 1686714, 2061581,
	2079706, 3142398, 69953187,
}

// KernelRelease is the kernel the synthetic base ships (label ostree.linux).
const KernelRelease = "6.18.13-200.fc43.x86_64"

// Version is the synthetic base's org.opencontainers.image.version.
const Version = "43.20260301.20.dev1"

// Epoch is the time of every entry, history item and the config.
var Epoch = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

// MinLayerSize is the smallest payload of a scaled layer, in bytes.
const MinLayerSize = 256

// FCOSBase returns the synthetic FCOS-shaped base with every layer's payload
// scaled to scale × its FCOS size (at least MinLayerSize bytes): 0.001 gives
// about 0.7 MB, 1 about 697 MB, 1.5 about 1 GB. Payloads are random, so the
// compressed sizes follow the payload sizes.
func FCOSBase(scale float64) (v1.Image, error) { return ArchBase("amd64", scale) }

// ArchBase is FCOSBase for another architecture: "amd64" gives FCOSBase
// itself; any other gives an image of the same shape whose config names
// arch, whose kernel release ends in the matching machine name and whose
// layer payloads differ (seeded with the architecture), so no layer is
// shared with the amd64 image.
func ArchBase(arch string, scale float64) (v1.Image, error) {
	if scale <= 0 {
		return nil, fmt.Errorf("synth: scale %v must be positive", scale)
	}
	sizes := make([]int64, len(FCOSLayerSizes))
	for i, size := range FCOSLayerSizes {
		sizes[i] = max(int64(float64(size)*scale), MinLayerSize)
	}
	kernel := KernelRelease
	if arch != "amd64" {
		kernel = strings.TrimSuffix(KernelRelease, "x86_64") + machine(arch)
	}
	return layered(shape{arch: arch, kernel: kernel, sizes: sizes, createdBy: "ostree chunk %d of %d"}, func(last v1.Hash) map[string]string {
		return map[string]string{
			"containers.bootc":                 "1",
			"ostree.bootable":                  "1",
			"ostree.commit":                    "89635f7cba9de932fc60d71a6bded65ad0db06a35c9d016da03ca7ade9ba4736",
			"ostree.final-diffid":              last.String(),
			"ostree.linux":                     kernel,
			"org.opencontainers.image.version": Version,
			"org.opencontainers.image.title":   "Synthetic Fedora CoreOS testing-devel",
			"com.coreos.osname":                "fedora-coreos",
			"com.coreos.stream":                "testing-devel",
		}
	})
}

// machine is the kernel's name (uname -m) of a Go architecture.
func machine(arch string) string {
	switch arch {
	case "amd64":
		return "x86_64"
	case "arm64":
		return "aarch64"
	}
	return arch
}

// MultiArchBase returns an OCI index of ArchBase(arch, scale) for each
// arch, in the order given, each described with its platform (linux/arch).
func MultiArchBase(scale float64, arches ...string) (v1.ImageIndex, error) {
	var adds []mutate.IndexAddendum
	for _, a := range arches {
		img, err := ArchBase(a, scale)
		if err != nil {
			return nil, err
		}
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			MediaType: types.OCIManifestSchema1, Platform: &v1.Platform{OS: "linux", Architecture: a},
		}})
	}
	return mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), adds...), nil
}

// PushIndex writes idx (every image and the index) to ref and returns the
// digested reference of the index.
func PushIndex(ctx context.Context, idx v1.ImageIndex, ref string, opts ...remote.Option) (name.Digest, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return name.Digest{}, fmt.Errorf("synth: %q: %w", ref, err)
	}
	if err := remote.WriteIndex(r, idx, append([]remote.Option{remote.WithContext(ctx)}, opts...)...); err != nil {
		return name.Digest{}, fmt.Errorf("synth: push %s: %w", ref, err)
	}
	d, err := idx.Digest()
	if err != nil {
		return name.Digest{}, err
	}
	return r.Context().Digest(d.String()), nil
}

// ChunkahBase returns a base shaped like a rechunked Fedora CoreOS (the
// `next` stream, built with chunkah): layers layers of small random
// payloads (the first also carries the root tree of FCOSBase), one history
// entry per layer, and the labels of FCOSBase without ostree.commit and
// ostree.final-diffid, which rechunking drops. The same count always gives
// the same image digest.
func ChunkahBase(layers int) (v1.Image, error) {
	if layers < 1 {
		return nil, fmt.Errorf("synth: %d layers: want at least one", layers)
	}
	sizes := make([]int64, layers)
	for i := range sizes {
		sizes[i] = MinLayerSize
	}
	return layered(shape{arch: "amd64", kernel: KernelRelease, sizes: sizes, createdBy: "chunkah: chunk %d of %d"}, func(v1.Hash) map[string]string {
		return map[string]string{
			"containers.bootc":                 "1",
			"ostree.bootable":                  "1",
			"ostree.linux":                     KernelRelease,
			"org.opencontainers.image.version": Version,
			"org.opencontainers.image.title":   "Synthetic Fedora CoreOS next, rechunked",
			"com.coreos.osname":                "fedora-coreos",
			"com.coreos.stream":                "next",
		}
	})
}

// shape is what layered makes: layer i holds a random payload of
// sizes[i] bytes (seeded with its number and, unless amd64, arch; the
// first layer's tree ships kernel), each
// with a history entry createdBy (formatted with its number and the
// count), and a config for linux/arch.
type shape struct {
	arch      string
	kernel    string
	sizes     []int64
	createdBy string
}

// layered returns an OCI image of len(sh.sizes) gzip layers (the first
// also holds the root tree) and the config labels labels(diff_id of the
// last layer).
func layered(sh shape, labels func(last v1.Hash) map[string]string) (v1.Image, error) {
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	var adds []mutate.Addendum
	var last v1.Hash
	var salt byte
	if sh.arch != "amd64" {
		for _, c := range []byte(sh.arch) {
			salt = salt*31 + c
		}
	}
	for i, n := range sh.sizes {
		idx, payload := i, n
		l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
			return gzipStream(func(tw *tar.Writer) error { return writeLayer(tw, idx, payload, salt, sh.kernel) }), nil
		}, tarball.WithMediaType(types.OCILayer))
		if err != nil {
			return nil, fmt.Errorf("synth: layer %d: %w", i, err)
		}
		if last, err = l.DiffID(); err != nil {
			return nil, fmt.Errorf("synth: layer %d: %w", i, err)
		}
		adds = append(adds, mutate.Addendum{Layer: l, MediaType: types.OCILayer, History: v1.History{
			Created:   v1.Time{Time: Epoch},
			CreatedBy: fmt.Sprintf(sh.createdBy, i+1, len(sh.sizes)),
		}})
	}
	cf := &v1.ConfigFile{
		Architecture: sh.arch,
		OS:           "linux",
		Created:      v1.Time{Time: Epoch},
		RootFS:       v1.RootFS{Type: "layers"},
		Config: v1.Config{
			Env:    []string{"container=oci", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin"},
			Cmd:    []string{"/sbin/init"},
			Labels: labels(last),
		},
	}
	img, err := mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, err
	}
	return mutate.Append(img, adds...)
}

// Push writes img to ref (a registry reference) and returns the digested
// reference.
func Push(ctx context.Context, img v1.Image, ref string, opts ...remote.Option) (name.Digest, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return name.Digest{}, fmt.Errorf("synth: %q: %w", ref, err)
	}
	if err := remote.Write(r, img, append([]remote.Option{remote.WithContext(ctx)}, opts...)...); err != nil {
		return name.Digest{}, fmt.Errorf("synth: push %s: %w", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		return name.Digest{}, err
	}
	return r.Context().Digest(d.String()), nil
}

// gzipStream runs write into a tar stream, compressed with a pinned gzip
// implementation, and returns the compressed bytes as a reader.
func gzipStream(write func(*tar.Writer) error) io.ReadCloser {
	pr, pw := io.Pipe()
	go func() {
		zw, _ := gzip.NewWriterLevel(pw, gzip.BestSpeed)
		tw := tar.NewWriter(zw)
		err := write(tw)
		if err == nil {
			err = tw.Close()
		}
		if err == nil {
			err = zw.Close()
		}
		pw.CloseWithError(err)
	}()
	return pr
}

// tree is the small ostree-native root the first layer carries.
func tree() []Entry { return treeFor(KernelRelease) }

// treeFor is tree with the kernel release kernel.
func treeFor(kernel string) []Entry {
	d := func(n string) Entry { return dir(n, 0o755) }
	l, f := sym, file
	return []Entry{
		l("bin", "usr/bin"),
		d("boot/"),
		d("dev/"),
		d("etc/"),
		l("etc/os-release", "../usr/lib/os-release"),
		l("home", "var/home"),
		l("lib", "usr/lib"),
		l("lib64", "usr/lib64"),
		l("opt", "var/opt"),
		l("ostree", "sysroot/ostree"),
		d("proc/"),
		l("root", "var/roothome"),
		d("run/"),
		l("sbin", "usr/sbin"),
		d("sys/"),
		d("sysroot/"),
		d("sysroot/ostree/"),
		d("tmp/"),
		d("usr/"),
		d("usr/bin/"),
		d("usr/lib/"),
		d("usr/lib/modules/"),
		d("usr/lib/modules/" + kernel + "/"),
		f("usr/lib/modules/"+kernel+"/vmlinuz", 0o755, "synthetic kernel "+kernel+"\n"),
		f("usr/lib/os-release", 0o644, "NAME=\"Fedora Linux\"\nVERSION=\"43.20260301.20.dev1 (CoreOS)\"\nID=fedora\nVERSION_ID=43\nVARIANT=\"CoreOS\"\nVARIANT_ID=coreos\nOSTREE_VERSION='"+Version+"'\n"),
		d("usr/lib/systemd/"),
		d("usr/lib/systemd/system/"),
		f("usr/lib/systemd/system/containerd.service", 0o644, "[Unit]\nDescription=containerd container runtime\nAfter=network.target\n\n[Service]\nExecStart=/usr/bin/containerd\nDelegate=yes\nKillMode=process\n\n[Install]\nWantedBy=multi-user.target\n"),
		f("usr/lib/systemd/system/chronyd.service", 0o644, "[Unit]\nDescription=NTP client/server\n\n[Service]\nExecStart=/usr/sbin/chronyd -n\n\n[Install]\nWantedBy=multi-user.target\n"),
		l("usr/local", "../var/usrlocal"),
		d("usr/sbin/"),
		d("usr/share/"),
		d("usr/share/synth/"),
		d("var/"),
	}
}

// writeEntries writes es into tw.
func writeEntries(tw *tar.Writer, es []Entry) error {
	for _, e := range es {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: e.mode, Linkname: e.link,
			Uid: e.uid, Gid: e.gid, Size: int64(len(e.data)), ModTime: Epoch, Format: tar.FormatPAX}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := io.WriteString(tw, e.data); err != nil {
			return err
		}
	}
	return nil
}

func writeLayer(tw *tar.Writer, idx int, payload int64, salt byte, kernel string) error {
	if idx == 0 {
		if err := writeEntries(tw, treeFor(kernel)); err != nil {
			return err
		}
	}
	h := &tar.Header{Name: fmt.Sprintf("usr/share/synth/chunk-%02d", idx), Typeflag: tar.TypeReg, Mode: 0o644,
		Size: payload, ModTime: Epoch, Format: tar.FormatPAX}
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	var seed [32]byte
	seed[0], seed[1], seed[2], seed[3] = byte(idx), 0x51, byte(idx>>8), salt
	_, err := io.CopyN(tw, rand.NewChaCha8(seed), payload)
	return err
}

// Docker re-describes img as a Docker schema 2 image: the same layer blobs
// under Docker media types, with a Docker config. History and diffIDs are
// kept.
func Docker(img v1.Image) (v1.Image, error) {
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	ls, err := img.Layers()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	hist := cf.History
	cf.RootFS.DiffIDs, cf.History = nil, nil
	out := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.DockerManifestSchema2), types.DockerConfigJSON)
	if out, err = mutate.ConfigFile(out, cf); err != nil {
		return nil, err
	}
	adds := make([]mutate.Addendum, len(ls))
	for i, l := range ls {
		adds[i] = mutate.Addendum{Layer: l, MediaType: types.DockerLayer}
		if i < len(hist) {
			adds[i].History = hist[i]
		}
	}
	return mutate.Append(out, adds...)
}
