package render

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/oslayer/oslayer/render/tarball"
	"github.com/oslayer/oslayer/render/tree"
	"github.com/oslayer/oslayer/sources/gardener"
	"github.com/oslayer/oslayer/sources/machineconfig"
	"github.com/oslayer/oslayer/sources/model"
)

// Render loads the sources of req, merges them, applies the placement
// rules and builds the layers and the report. On error nothing is returned;
// errors name the input document, the field and the node path. What is the
// user's input at fault (a source that does not parse, a field value the
// sources or the placement rules refuse, items that conflict) is marked
// model.InputError; a failure to read imageRef content is not.
func Render(ctx context.Context, req Request) (*Result, error) {
	if len(req.OSCs) == 0 && len(req.MachineConfigs) == 0 {
		return nil, model.MarkInput(fmt.Errorf("nothing to render: give at least one OperatingSystemConfig or MachineConfig"))
	}
	var cfgs []*model.Config
	if len(req.OSCs) > 0 {
		opts := gardener.Options{SecretsDir: req.SecretsDir, BakeSecrets: req.BakeSecrets, Images: req.Images, Stdin: req.Stdin, Strict: req.Strict}
		if len(req.MachineConfigs) == 0 {
			// With MachineConfigs too, Pool is their role, which need not
			// be the Gardener worker pool's name.
			opts.Pool = req.Pool
		}
		c, err := gardener.Load(ctx, req.OSCs, opts)
		if err != nil {
			return nil, err
		}
		cfgs = append(cfgs, c)
	}
	if len(req.MachineConfigs) > 0 {
		opts, err := req.machineConfigOptions()
		if err != nil {
			return nil, err
		}
		c, err := machineconfig.Load(ctx, req.MachineConfigs, opts)
		if err != nil {
			return nil, err
		}
		cfgs = append(cfgs, c)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cfg, err := model.Merge(cfgs...)
	if err != nil {
		return nil, model.MarkInput(err)
	}
	return RenderConfig(ctx, req, cfg)
}

// machineConfigOptions selects the pool: by the MachineConfigPool in
// req.MachineConfigPools (named req.Pool when there are several), else by
// the role label req.Pool.
func (req Request) machineConfigOptions() (machineconfig.Options, error) {
	opts := machineconfig.Options{Pool: req.Pool}
	if len(req.MachineConfigPools) > 0 {
		var err error
		if opts, err = machineconfig.LoadPool(req.MachineConfigPools, req.Pool); err != nil {
			return opts, err
		}
	}
	opts.Base, opts.BaseName = req.Base, req.BaseName
	opts.BakeCredential = req.bakeCredential
	return opts, nil
}

// RenderConfig renders an already decoded and merged configuration (Render
// without the sources). req's source fields only feed the inputs digest.
func RenderConfig(ctx context.Context, req Request, cfg *model.Config) (*Result, error) {
	epoch := req.Epoch
	if epoch.IsZero() {
		epoch = DefaultEpoch
	}
	p, err := place(req, cfg)
	if err != nil {
		return nil, model.MarkInput(err)
	}
	pkgs := packages(cfg)
	rep := &Report{
		Units:      p.units,
		Runtime:    cfg.Runtime,
		Packages:   pkgs,
		KernelArgs: cfg.KernelArgs,
		Warnings:   append(append([]string(nil), cfg.Warnings...), p.warns...),
		FirstBoot:  p.firstBoot,
	}
	// The ownership manifest lists everything placed so far.
	items := p.bakedList()
	man, err := manifest(items)
	if err != nil {
		return nil, err
	}
	p.add(tree.Entry{Path: ManifestPath, Kind: tree.File, Mode: 0o644, Data: man, Layer: LayerMetadata},
		Baked{Path: ManifestPath, Source: model.Origin{Document: "oslayer", Field: "ownership manifest"}, Generated: true})
	if len(p.errs) > 0 {
		return nil, model.MarkInput(p.errs[0])
	}
	rep.Baked = p.bakedList()

	res := &Result{
		Report:     rep,
		KernelArgs: cfg.KernelArgs,
		Packages:   pkgs,
		Extensions: cfg.Extensions,
		KernelType: cfg.KernelType,
		OSImageURL: cfg.OSImageURL,
		Inputs:     cfg.Inputs,
	}
	res.InputsDigest = inputsDigest(req, cfg, epoch)
	for _, name := range []string{LayerPayload, LayerConfig, LayerMetadata} {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		sub, err := p.tree.Select(func(e *tree.Entry) bool { return e.Layer == name })
		if err != nil {
			return nil, err
		}
		files := 0
		for _, e := range sub.Entries() {
			if !e.Implicit && e.Layer == name {
				files++
			}
		}
		if files == 0 {
			continue
		}
		l, err := tarball.Build(sub, epoch)
		if err != nil {
			return nil, fmt.Errorf("layer %s: %w", name, err)
		}
		res.Layers = append(res.Layers, Layer{
			Name:      name,
			CreatedBy: createdBy(name, rep.Baked),
			Digest:    l.Digest,
			DiffID:    l.DiffID,
			Size:      int64(len(l.Gzip)),
			Files:     files,
			Gzip:      l.Gzip,
		})
	}
	res.tree = p.tree
	return res, nil
}

// createdBy names the objects (kind and name, not file names: see
// docName) whose items a layer holds.
func createdBy(name string, baked []Baked) string {
	if name == LayerMetadata {
		return "oslayer render: metadata (ownership manifest " + ManifestPath + ")"
	}
	seen := map[string]bool{}
	var docs []string
	for _, b := range baked {
		if b.Layer != name || b.Source.Document == "oslayer" {
			continue
		}
		d := docName(b.Source.Document)
		if d == "" {
			d = strings.TrimSpace(b.Source.Kind + " " + b.Source.Name)
		}
		if d != "" && !seen[d] {
			seen[d] = true
			docs = append(docs, d)
		}
	}
	sort.Strings(docs)
	if len(docs) == 0 {
		return "oslayer render: " + name + " (generated)"
	}
	// "MachineConfig 00-worker, MachineConfig 01-worker-kubelet" reads as
	// "MachineConfig 00-worker, 01-worker-kubelet".
	for i := len(docs) - 1; i > 0; i-- {
		k, n, ok := strings.Cut(docs[i], " ")
		if pk, _, _ := strings.Cut(docs[i-1], " "); ok && k == pk && !strings.HasPrefix(docs[i], "Secret ") {
			docs[i] = n
		}
	}
	return "oslayer render: " + name + " from " + strings.Join(docs, ", ")
}

// ManifestItem is one entry of the ownership manifest.
type ManifestItem struct {
	Path      string `json:"path"`
	StoredAt  string `json:"storedAt,omitempty"`
	Type      string `json:"type"`
	Mode      string `json:"mode"`
	UID       int    `json:"uid"`
	GID       int    `json:"gid"`
	SHA256    string `json:"sha256,omitempty"`
	Target    string `json:"target,omitempty"`
	Layer     string `json:"layer"`
	Generated bool   `json:"generated,omitempty"`
	// Ignition is the SHA-256 of the MachineConfig file entry the item
	// came from (absent in images built before it was recorded).
	Ignition string       `json:"ignition,omitempty"`
	Source   model.Origin `json:"source"`
}

// Manifest is the content of ManifestPath.
type Manifest struct {
	Version int            `json:"version"`
	Items   []ManifestItem `json:"items"`
}

func manifest(items []Baked) ([]byte, error) {
	m := Manifest{Version: 1, Items: make([]ManifestItem, 0, len(items))}
	for _, b := range items {
		src := b.Source
		src.Document = docName(src.Document)
		m.Items = append(m.Items, ManifestItem{
			Path: b.Path, StoredAt: b.StoredAt, Type: b.Type, Mode: b.Mode, UID: b.UID, GID: b.GID,
			SHA256: b.SHA256, Target: b.Target, Layer: b.Layer, Generated: b.Generated, Ignition: b.Ignition, Source: src,
		})
	}
	out, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// inputsDigest hashes the input documents (by content, sorted), the pinned
// images imageRef content was read from, and every option that changes the
// output. Paths of the documents do not count.
func inputsDigest(req Request, cfg *model.Config, epoch time.Time) string {
	lines := make([]string, 0, len(cfg.Inputs)+8)
	for _, in := range cfg.Inputs {
		lines = append(lines, "input "+in.Kind+" "+in.Name+" "+in.SHA256)
	}
	for _, f := range cfg.Files {
		if f.FromImage != "" {
			lines = append(lines, "image "+f.FromImage)
		}
	}
	sort.Strings(lines)
	allow := append([]string(nil), req.AllowTopLevel...)
	sort.Strings(allow)
	lines = append(lines,
		"pool "+req.Pool,
		fmt.Sprintf("bake-secrets %t", req.BakeSecrets),
		"allow-toplevel "+strings.Join(allow, ","),
		fmt.Sprintf("epoch %d", epoch.Unix()),
		fmt.Sprintf("base %t", req.Base != nil),
		fmt.Sprintf("gzip-level %d", tarball.Level),
	)
	h := sha256.New()
	h.Write([]byte("oslayer-render-v1\n"))
	for _, l := range lines {
		h.Write([]byte(l))
		h.Write([]byte{'\n'})
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}
