package assemble

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/oslayer/oslayer/internal/field"
	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/render"
)

// AnnotationBaseDigest is recorded on the manifest of an assembled image.
// The base is recorded by digest only (no base name annotation or label): the
// same base read from a registry, a mirror or an OCI layout gives one image
// digest. The reference the user gave is in the build's provenance.
const AnnotationBaseDigest = "org.opencontainers.image.base.digest"

// AssembleRequest says what to assemble.
type AssembleRequest struct {
	// Base is the base image: a registry reference or "oci:DIR[:TAG]".
	// Ignored when BaseImage is set.
	Base string
	// BaseImage is an already resolved base (ResolveBase); a caller that
	// builds many pools on one base resolves it once.
	BaseImage *Base
	// Registry reaches the base; nil means the zero Options.
	Registry *registry.Options
	// Arch selects the platform of a multi-platform base ("" means amd64)
	// and, when set, must match the architecture of a single-platform base.
	Arch string
	// Pool names the pool (label LabelPool). Required.
	Pool string
	// Rendered is the renderer's output: the layers to append.
	Rendered *render.Result
	// Epoch is the "created" time of the config and of every new history
	// entry. Zero means render.DefaultEpoch. Use the render request's epoch.
	Epoch time.Time
	// Version is the oslayer version recorded in LabelVersion ("" means "dev").
	Version string
	// Flags are the options that change the output, for provenance.
	Flags map[string]string
	// Logger receives warnings; nil discards them.
	Logger *slog.Logger
	// Official is the official base when BaseImage is the package base
	// built from it (Build's package stage); nil otherwise. A pool that
	// needs packages is refused without one.
	Official *Base
}

// ResolveBase opens ref (a registry reference or "oci:DIR[:TAG]") for
// linux/arch (arch "" means amd64 for a multi-platform base). Only the
// manifest (and index) and the config are read; a tag is resolved to a digest
// once and that digest is what the build uses.
func ResolveBase(ctx context.Context, ref string, reg *registry.Options, arch string) (*Base, error) {
	return ResolveBaseCached(ctx, ref, reg, arch, "")
}

// ResolveBaseCached is ResolveBase keeping the manifest and config of a
// base given by digest in the directory "bases" of the base index cache
// cacheDir ("" keeps none): a later build on that digest, in a fresh
// process, reads neither from the registry.
func ResolveBaseCached(ctx context.Context, ref string, reg *registry.Options, arch, cacheDir string) (*Base, error) {
	if ref == "" {
		return nil, field.Inputf("no base image: give %v, or a MachineConfig with osImageURL", field.Name("base"))
	}
	if reg == nil {
		reg = &registry.Options{}
	}
	plat := registry.DefaultPlatform
	if arch != "" {
		plat.Architecture = registry.NormalizeArch(arch)
	}
	img, res, err := readBaseImage(ctx, ref, reg, &plat, cacheDir)
	if err != nil {
		return nil, fmt.Errorf("base %s: %w", ref, asBase(err, ref))
	}
	// Every build on this Base reads the parsed manifest and config.
	img = cacheBase(img)
	mt, err := img.MediaType()
	if err != nil {
		return nil, fmt.Errorf("base %s: %w", ref, err)
	}
	switch mt {
	case types.DockerManifestSchema2, types.OCIManifestSchema1:
	case types.DockerManifestSchema1, types.DockerManifestSchema1Signed:
		return nil, fmt.Errorf("base %s: Docker schema 1 manifests are not supported (nodes refuse them)", ref)
	default:
		return nil, fmt.Errorf("base %s: unsupported manifest media type %q", ref, mt)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("base %s: config: %w", ref, err)
	}
	// A single-architecture base must be for the architecture built for,
	// amd64 unless --arch says otherwise.
	if have := registry.NormalizeArch(cf.Architecture); res.IndexDigest == nil && have != "" && have != plat.Architecture {
		if arch == "" {
			return nil, field.Inputf("base %s: image is for architecture %q, and %v defaults to amd64: give %v %s to build for it", ref, cf.Architecture, field.Name("arch"), field.Name("arch"), have)
		}
		return nil, field.Inputf("base %s: image is for architecture %q, %v is %q", ref, cf.Architecture, field.Name("arch"), arch)
	}
	return &Base{Ref: ref, Digest: res.Digest, Pinned: res.Pinned, Image: img}, nil
}

// readBaseImage reads the base ref: a digest of an image manifest from the
// disk cache when it is there (no request), else from the registry
// (keeping a digest's manifest and config in the cache).
func readBaseImage(ctx context.Context, ref string, reg *registry.Options, plat *v1.Platform, cacheDir string) (v1.Image, registry.Resolved, error) {
	dir := ""
	if cacheDir != "" {
		dir = filepath.Join(cacheDir, "bases")
	}
	if dir != "" && !registry.IsLayout(ref) {
		if r, err := reg.ParseReference(ref); err == nil {
			if d, ok := r.(name.Digest); ok {
				if img := cachedBase(ctx, reg, d, dir); img != nil {
					h, _ := v1.NewHash(d.DigestStr())
					return img, registry.Resolved{Given: ref, Ref: d, Pinned: true, Digest: h}, nil
				}
			}
		}
	}
	img, res, err := reg.Image(ctx, ref, plat)
	if err == nil && dir != "" && res.Pinned && res.IndexDigest == nil && res.LayoutDir == "" {
		keepBase(img, res.Digest, dir)
	}
	return img, res, err
}

// asBase is what went wrong opening the base ref, said under the
// build's own "base REF: ": the registry's error for that image without
// its "image REF: ". The error's causes stay reachable with errors.Is.
func asBase(err error, ref string) error {
	if ie, ok := err.(*registry.ImageError); ok && ie.Ref == ref {
		return ie.Err
	}
	return err
}

// Assemble appends the rendered layers onto the base and returns the image.
// It reads only the base's manifest and config: no base layer blob is
// downloaded. The same request always gives the same image digest.
//
// Media types: a Docker schema 2 base whose layers are all plain (gzip or
// uncompressed) Docker layers is re-described with OCI media types. That
// changes only descriptors in the new manifest and the config media type;
// every base layer blob stays byte for byte the same (the Docker and OCI
// gzip layer formats are identical). A base with any other layer type (e.g.
// foreign layers) keeps its Docker media types, with a warning.
func Assemble(ctx context.Context, req AssembleRequest) (*Built, error) {
	if err := req.check(ctx); err != nil {
		return nil, err
	}
	a := &assembly{req: req, log: req.Logger, base: req.BaseImage}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	if a.base == nil {
		var err error
		if a.base, err = ResolveBase(ctx, req.Base, req.Registry, req.Arch); err != nil {
			return nil, err
		}
	}
	for _, step := range []func() error{a.readBase, a.mediaTypes, a.baseLayers, a.addLayers, a.config} {
		if err := step(); err != nil {
			return nil, err
		}
	}
	return a.built(), nil
}

// check refuses a request that cannot be assembled.
func (req AssembleRequest) check(ctx context.Context) error {
	if req.Pool == "" {
		return field.Inputf("assemble: no pool name (%v)", field.Name("pool"))
	}
	if req.Rendered == nil {
		return fmt.Errorf("assemble: nothing rendered")
	}
	if req.Official == nil {
		if err := needsPackages(req.Rendered.Packages); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// assembly is the state of one Assemble: the base and its parts, the media
// types chosen, the image as it grows, and the warnings.
type assembly struct {
	req  AssembleRequest
	log  *slog.Logger
	base *Base
	bp   *baseParts
	// manifestMT, configMT and layerMT are the media types of the new
	// manifest, its config and the added layers; baseDescs are the base
	// layers' descriptors as the new manifest lists them.
	manifestMT, configMT, layerMT types.MediaType
	baseDescs                     []v1.Descriptor
	img                           *image
	descs                         []v1.Descriptor
	diffIDs                       []v1.Hash
	history                       []json.RawMessage
	added                         []AddedLayer
	epoch                         time.Time
	warnings                      []string
}

func (a *assembly) warn(msg string, args ...any) {
	a.warnings = append(a.warnings, msg)
	a.log.Warn(msg, args...)
}

// readBase reads the base's manifest and config (no layer blob) and
// checks that they agree and that nodes can boot it.
func (a *assembly) readBase() error {
	base := a.base
	if !base.Pinned && !registry.IsLayout(base.Ref) {
		a.warn(fmt.Sprintf("base %s is not pinned by digest; it resolved to %s: pin it for reproducible builds", base.Ref, base.Digest), "base", base.Ref, "digest", base.Digest.String())
	}
	bp, err := partsOf(base.Image)
	if err != nil {
		return fmt.Errorf("base %s: %w", base.Ref, err)
	}
	a.bp = bp
	if len(bp.config.RootFS.DiffIDs) != len(bp.manifest.Layers) {
		return fmt.Errorf("base %s: manifest has %d layers but config rootfs.diff_ids has %d", base.Ref, len(bp.manifest.Layers), len(bp.config.RootFS.DiffIDs))
	}
	labels := bp.config.Config.Labels
	if _, ok := labels["ostree.bootable"]; !ok {
		if _, ok := labels["containers.bootc"]; !ok {
			a.warn(fmt.Sprintf("base %s has neither label ostree.bootable nor containers.bootc: nodes will not boot it", base.Ref), "base", base.Ref)
		}
	}
	return nil
}

// mediaTypes decides the media types: a Docker base whose layers are all
// plain Docker layers is re-described with OCI types; any other keeps its
// Docker types.
func (a *assembly) mediaTypes() error {
	bm := a.bp.manifest
	a.manifestMT, a.configMT, a.layerMT = bm.MediaType, bm.Config.MediaType, types.OCILayer
	a.baseDescs = append([]v1.Descriptor(nil), bm.Layers...)
	if a.manifestMT == "" {
		a.manifestMT = types.OCIManifestSchema1
	}
	if a.manifestMT == types.DockerManifestSchema2 {
		convertible := true
		for _, d := range bm.Layers {
			if d.MediaType != types.DockerLayer && d.MediaType != types.DockerUncompressedLayer {
				convertible = false
			}
		}
		if convertible {
			a.manifestMT, a.configMT = types.OCIManifestSchema1, types.OCIConfigJSON
			for i := range a.baseDescs {
				if a.baseDescs[i].MediaType == types.DockerLayer {
					a.baseDescs[i].MediaType = types.OCILayer
				} else {
					a.baseDescs[i].MediaType = types.OCIUncompressedLayer
				}
			}
		} else {
			a.layerMT = types.DockerLayer
			a.warn(fmt.Sprintf("base %s has Docker layers that have no OCI equivalent; the image keeps Docker media types", a.base.Ref), "base", a.base.Ref)
		}
	}
	if a.configMT == "" {
		a.configMT = types.OCIConfigJSON
	}
	return nil
}

// baseLayers starts the image with the base's layers (lazy, never read
// here).
func (a *assembly) baseLayers() error {
	bm, bcf := a.bp.manifest, a.bp.config
	if len(a.bp.layers) != len(bm.Layers) {
		return fmt.Errorf("base %s: %d layers, manifest lists %d", a.base.Ref, len(a.bp.layers), len(bm.Layers))
	}
	a.img = &image{byDigest: map[v1.Hash]v1.Layer{}, byDiffID: map[v1.Hash]v1.Layer{}}
	for i, l := range a.bp.layers {
		if a.baseDescs[i].MediaType != bm.Layers[i].MediaType {
			l = retype(l, a.baseDescs[i])
		}
		a.img.add(l, a.baseDescs[i].Digest, bcf.RootFS.DiffIDs[i])
	}
	a.descs = a.baseDescs
	a.diffIDs = append([]v1.Hash(nil), bcf.RootFS.DiffIDs...)
	return nil
}

// addLayers appends the rendered layers, each with its history entry.
func (a *assembly) addLayers() error {
	a.epoch = a.req.Epoch
	if a.epoch.IsZero() {
		a.epoch = render.DefaultEpoch
	}
	a.epoch = a.epoch.UTC()
	for _, rl := range a.req.Rendered.Layers {
		l, err := newBytesLayer(rl, a.layerMT)
		if err != nil {
			return fmt.Errorf("assemble: %w", err)
		}
		a.img.add(l, l.digest, l.diffID)
		a.diffIDs = append(a.diffIDs, l.diffID)
		a.descs = append(a.descs, v1.Descriptor{MediaType: a.layerMT, Size: int64(len(l.gz)), Digest: l.digest})
		createdBy := rl.CreatedBy
		if createdBy == "" {
			createdBy = "oslayer " + rl.Name
		}
		h, _ := json.Marshal(v1.History{Created: v1.Time{Time: a.epoch}, CreatedBy: createdBy, Comment: HistoryCommentPrefix + rl.Name})
		a.history = append(a.history, h)
		a.added = append(a.added, AddedLayer{Digest: l.digest, DiffID: l.diffID, Size: int64(len(l.gz)), Source: createdBy})
	}
	if len(a.req.Rendered.Layers) == 0 {
		a.warn(fmt.Sprintf("pool %s: nothing rendered; the image only relabels the base", a.req.Pool))
	}
	return nil
}

// labels are the labels oslayer sets on the image's config.
func (a *assembly) labels() map[string]string {
	kargs := a.req.Rendered.KernelArgs
	if kargs == nil {
		kargs = []string{}
	}
	kj, _ := json.Marshal(kargs)
	version := a.req.Version
	if version == "" {
		version = "dev"
	}
	return map[string]string{
		LabelPool:         a.req.Pool,
		LabelInputsDigest: a.req.Rendered.InputsDigest,
		LabelKernelArgs:   string(kj),
		LabelVersion:      version,
		LabelBaseDigest:   a.base.Digest.String(),
	}
}

// config writes the config (the base config as raw JSON, so unknown fields
// survive, with our labels, history, diff_ids and created time) and the
// manifest.
func (a *assembly) config() error {
	labels := a.labels()
	if a.bp.editErr != nil {
		return fmt.Errorf("base %s: config: %w", a.base.Ref, a.bp.editErr)
	}
	rawOut, err := a.bp.edit.edit(labels, a.history, a.diffIDs, a.epoch)
	if err != nil {
		return fmt.Errorf("base %s: config: %w", a.base.Ref, err)
	}
	cf, err := editedConfig(a.bp.config, labels, a.history, a.diffIDs, a.epoch)
	if err != nil {
		return fmt.Errorf("assemble: config: %w", err)
	}
	m := &v1.Manifest{
		SchemaVersion: 2,
		MediaType:     a.manifestMT,
		Config:        v1.Descriptor{MediaType: a.configMT, Size: int64(len(rawOut)), Digest: sha256Hash(rawOut)},
		Layers:        a.descs,
	}
	if a.manifestMT == types.OCIManifestSchema1 {
		m.Annotations = map[string]string{AnnotationBaseDigest: a.base.Digest.String()}
	}
	rawM, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("assemble: manifest: %w", err)
	}
	a.img.rawConfig, a.img.config = rawOut, cf
	a.img.rawManifest, a.img.manifest = rawM, m
	a.img.digest = sha256Hash(rawM)
	return nil
}

// built is the assembled image and what the later stages need of it.
func (a *assembly) built() *Built {
	req := a.req
	var files []render.Baked
	if req.Rendered.Report != nil {
		files = req.Rendered.Report.Baked
	}
	return &Built{
		Files:        files,
		Image:        a.img,
		Digest:       a.img.digest,
		Base:         *a.base,
		Added:        a.added,
		Pool:         req.Pool,
		Inputs:       req.Rendered.Inputs,
		InputsDigest: req.Rendered.InputsDigest,
		KernelArgs:   req.Rendered.KernelArgs,
		Flags:        req.Flags,
		Warnings:     a.warnings,
		Official:     req.Official,
	}
}

func sha256Hash(b []byte) v1.Hash {
	s := sha256.Sum256(b)
	return v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(s[:])}
}

// image is an assembled image: fixed manifest and config bytes, base layers
// that stay lazy, and the appended layers in memory.
type image struct {
	rawManifest, rawConfig []byte
	manifest               *v1.Manifest
	config                 *v1.ConfigFile
	digest                 v1.Hash
	layers                 []v1.Layer
	byDigest               map[v1.Hash]v1.Layer
	byDiffID               map[v1.Hash]v1.Layer
}

var _ v1.Image = (*image)(nil)

func (i *image) add(l v1.Layer, digest, diffID v1.Hash) {
	i.layers = append(i.layers, l)
	if _, ok := i.byDigest[digest]; !ok {
		i.byDigest[digest] = l
	}
	if _, ok := i.byDiffID[diffID]; !ok {
		i.byDiffID[diffID] = l
	}
}

func (i *image) Layers() ([]v1.Layer, error)         { return append([]v1.Layer(nil), i.layers...), nil }
func (i *image) MediaType() (types.MediaType, error) { return i.manifest.MediaType, nil }
func (i *image) Size() (int64, error)                { return int64(len(i.rawManifest)), nil }
func (i *image) ConfigName() (v1.Hash, error)        { return i.manifest.Config.Digest, nil }
func (i *image) ConfigFile() (*v1.ConfigFile, error) { return i.config.DeepCopy(), nil }
func (i *image) RawConfigFile() ([]byte, error)      { return i.rawConfig, nil }
func (i *image) Digest() (v1.Hash, error)            { return i.digest, nil }
func (i *image) Manifest() (*v1.Manifest, error)     { return i.manifest.DeepCopy(), nil }
func (i *image) RawManifest() ([]byte, error)        { return i.rawManifest, nil }
func (i *image) LayerByDigest(h v1.Hash) (v1.Layer, error) {
	if l, ok := i.byDigest[h]; ok {
		return l, nil
	}
	if h == i.manifest.Config.Digest {
		return &configLayer{raw: i.rawConfig, digest: h, mt: i.manifest.Config.MediaType}, nil
	}
	return nil, fmt.Errorf("image %s: no layer %s", i.digest, h)
}
func (i *image) LayerByDiffID(h v1.Hash) (v1.Layer, error) {
	if l, ok := i.byDiffID[h]; ok {
		return l, nil
	}
	return nil, fmt.Errorf("image %s: no layer with diffID %s", i.digest, h)
}

// configLayer presents the config blob as a layer (for LayerByDigest).
type configLayer struct {
	raw    []byte
	digest v1.Hash
	mt     types.MediaType
}

func (c *configLayer) Digest() (v1.Hash, error)            { return c.digest, nil }
func (c *configLayer) DiffID() (v1.Hash, error)            { return c.digest, nil }
func (c *configLayer) Size() (int64, error)                { return int64(len(c.raw)), nil }
func (c *configLayer) MediaType() (types.MediaType, error) { return c.mt, nil }
func (c *configLayer) Compressed() (io.ReadCloser, error) {
	return io.NopCloser(strings.NewReader(string(c.raw))), nil
}
func (c *configLayer) Uncompressed() (io.ReadCloser, error) { return c.Compressed() }
