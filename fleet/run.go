package fleet

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/oslayer/oslayer/builder"
	"github.com/oslayer/oslayer/layers"
	"github.com/oslayer/oslayer/layers/imagefile"
	"github.com/oslayer/oslayer/preflight"
	"github.com/oslayer/oslayer/registry"
	"github.com/oslayer/oslayer/registry/push"
	"github.com/oslayer/oslayer/registry/sign"
)

// Options configure a fleet run. Everything in it is shared by all pools.
type Options struct {
	// Registry reaches bases and targets (credentials, mirrors,
	// transport, per-image upload jobs); nil means the zero Options.
	Registry *registry.Options
	// Jobs is how many pools build at once (default 4).
	Jobs int
	// Version is the oslayer version recorded in every image.
	Version string
	// Epoch is the created time of every image and file (SOURCE_DATE_EPOCH).
	Epoch time.Time
	// IndexCacheDir is the base index disk cache ("" means none).
	IndexCacheDir string
	// ImageBudget and ImageTimeout bound the imageRef files all pools read
	// together (0: imagefile's defaults). One reader serves every pool, so
	// a file many pools name is read once.
	ImageBudget  int64
	ImageTimeout time.Duration
	// Password is the signing key password when a pool names no
	// signKeyPasswordFile.
	Password []byte
	// Progress receives a line per finished pool (a self-updating status
	// line when Terminal); nil means none.
	Progress io.Writer
	Terminal bool
	// Logger receives the builds' logs; nil discards them.
	Logger *slog.Logger
}

// Failure kinds: whether retrying could help.
const (
	// KindInput is a failure of the pool's input or of a preflight check:
	// retrying won't help.
	KindInput = "input"
	// KindRun is a failure to run (registry, credentials, cancelled):
	// retrying may help.
	KindRun = "run"
)

// Shared is one thing resolved once for several pools (a base and its
// index), with what it cost.
type Shared struct {
	What    string  `json:"what"`
	Ref     string  `json:"ref"`
	Digest  string  `json:"digest,omitempty"`
	Pools   int     `json:"pools"`
	Seconds float64 `json:"seconds"`
	// Index is the base index's source ("cache", "registry", "built").
	Index string `json:"index,omitempty"`
	Error string `json:"error,omitempty"`
}

// run is one fleet run's shared state.
type run struct {
	o      Options
	log    *slog.Logger
	images *imagefile.Reader

	mu       sync.Mutex
	bases    map[string]*baseEntry
	keys     map[string]*keyEntry
	repoIdx  map[string]bool // repositories that get the base index artifact
	progress *progress
}

type baseEntry struct {
	once   sync.Once
	base   *builder.Base
	shared Shared
	step   string
	err    error
}

type keyEntry struct {
	once sync.Once
	sv   signature.SignerVerifier
	err  error
}

// Run builds every pool, Jobs at a time, and returns the summary. Pools
// are independent: one failing never stops another. Run returns an error
// only when it could not start.
func Run(ctx context.Context, pools []Pool, o Options) (*Summary, error) {
	if o.Registry == nil {
		o.Registry = &registry.Options{}
	}
	if o.Jobs <= 0 {
		o.Jobs = 4
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var iopts []imagefile.Option
	if o.ImageBudget > 0 {
		iopts = append(iopts, imagefile.WithBudget(o.ImageBudget))
	}
	if o.ImageTimeout > 0 {
		iopts = append(iopts, imagefile.WithTimeout(o.ImageTimeout))
	}
	r := &run{o: o, log: log, images: imagefile.New(o.Registry, iopts...),
		bases: map[string]*baseEntry{}, keys: map[string]*keyEntry{}, repoIdx: map[string]bool{}}
	defer r.images.Close()
	start := time.Now()
	r.progress = newProgress(o.Progress, o.Terminal, len(pools))
	sum := &Summary{Total: len(pools), Pools: make([]PoolResult, len(pools))}

	work := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < min(o.Jobs, len(pools)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				res := r.buildPool(ctx, &pools[i])
				sum.Pools[i] = res
				r.progress.done(&res)
			}
		}()
	}
	for i := range pools {
		work <- i
	}
	close(work)
	wg.Wait()
	r.progress.finish()
	sum.Seconds = time.Since(start).Seconds()
	for _, b := range r.bases {
		sum.Shared = append(sum.Shared, b.shared)
	}
	sum.tally()
	return sum, nil
}

// buildPool builds one pool; a panic in it fails only this pool.
func (r *run) buildPool(ctx context.Context, p *Pool) (res PoolResult) {
	res = PoolResult{Cluster: p.Cluster, Pool: p.Name, Path: p.Path, Target: p.Target}
	start := time.Now()
	defer func() {
		if v := recover(); v != nil {
			res.fail("internal", KindRun, fmt.Errorf("panic: %v\n%s", v, debug.Stack()))
		}
		res.Seconds = time.Since(start).Seconds()
	}()
	if err := ctx.Err(); err != nil {
		res.fail("start", KindRun, err)
		return res
	}
	mode := p.BaseIndex
	if mode == "" {
		mode = builder.BaseIndexAuto
	}
	var repo string
	if !registry.IsLayout(p.Target) {
		t, err := push.ParseTarget(p.Target)
		if err != nil {
			res.fail("push", KindInput, err)
			return res
		}
		repo = t.Context().Name()
	}
	var base *builder.Base
	if p.Base != "" {
		b := r.base(ctx, p.Base, p.Arch, mode, repo)
		if b.err != nil {
			kind := KindRun
			if ctx.Err() == nil && b.step == "base-index" {
				kind = KindInput
			}
			res.fail(b.step, kind, b.err)
			return res
		}
		base = b.base
	}
	stages, err := r.stages(ctx, p)
	if err != nil {
		res.fail(sign.StageSign, KindInput, err)
		return res
	}
	pub, err := push.New(p.Target, r.o.Registry, push.WithLogger(r.log))
	if err != nil {
		res.fail("push", KindInput, err)
		return res
	}
	bake := p.BakeSecrets != nil && *p.BakeSecrets
	req := builder.Request{
		Render: layers.Request{
			OSCs: p.OSC, MachineConfigs: p.MachineConfig, MachineConfigPools: p.MachineConfigPool,
			Pool: p.Name, SecretsDir: p.Secrets, BakeSecrets: bake, AllowTopLevel: p.AllowTopLevel,
			Epoch: r.o.Epoch, Images: r.images,
		},
		Base:      p.Base,
		BaseImage: base,
		Registry:  r.o.Registry,
		Arch:      p.Arch,
		Version:   r.o.Version,
		Flags: builder.OutputFlags{Pool: p.Name, Base: p.Base, BaseIndex: mode, Arch: p.Arch,
			BakeSecrets: bake, AllowTopLevel: p.AllowTopLevel}.Map(),
		Logger:    r.log,
		BaseIndex: mode,
		Index:     builder.IndexOptions{CacheDir: r.o.IndexCacheDir, Registry: r.o.Registry, Logger: r.log},
	}
	if repo != "" && r.firstInRepo(repo, base) {
		// The base index artifact goes once into every target repository.
		req.Index.Repository = repo
	}
	br, err := builder.Build(ctx, req, pub, stages...)
	res.fill(br)
	if err != nil {
		step := "build"
		if br != nil && len(br.Phases) > 0 {
			step = br.Phases[len(br.Phases)-1].Name
		}
		res.fail(step, stepKind(ctx, step), err)
	}
	return res
}

// stepKind says whether a failure at step is the input's (or a preflight
// check's) or a failure to run.
func stepKind(ctx context.Context, step string) string {
	if ctx.Err() != nil {
		return KindRun
	}
	switch step {
	case "render", "assemble", preflight.StageName, preflight.StageWritten:
		return KindInput
	}
	return KindRun
}

// firstInRepo reports whether this is the first pool on base pushing into
// repo.
func (r *run) firstInRepo(repo string, base *builder.Base) bool {
	key := repo
	if base != nil {
		key += "@" + base.Digest.String()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.repoIdx[key] {
		return false
	}
	r.repoIdx[key] = true
	return true
}

// base resolves a base reference (and its index) once for every pool
// that names it; repo is where the first pool looks for the index artifact.
func (r *run) base(ctx context.Context, ref, arch, mode, repo string) *baseEntry {
	key := ref + "\x00" + registry.NormalizeArch(arch) + "\x00" + mode
	r.mu.Lock()
	e, ok := r.bases[key]
	if !ok {
		e = &baseEntry{shared: Shared{What: "base", Ref: ref}}
		r.bases[key] = e
	}
	e.shared.Pools++
	r.mu.Unlock()
	e.once.Do(func() {
		start := time.Now()
		defer func() { e.shared.Seconds = time.Since(start).Seconds() }()
		b, err := builder.ResolveBase(ctx, ref, r.o.Registry, arch)
		if err != nil {
			e.step, e.err = "base", err
			e.shared.Error = err.Error()
			return
		}
		e.shared.Digest = b.Digest.String()
		if mode != builder.BaseIndexOff {
			info, err := builder.IndexBase(ctx, b, builder.IndexOptions{CacheDir: r.o.IndexCacheDir,
				Repository: repo, Registry: r.o.Registry, Logger: r.log})
			if err != nil {
				e.step, e.err = "base-index", fmt.Errorf("%w (baseIndex: off builds without reading the base)", err)
				e.shared.Error = e.err.Error()
				return
			}
			e.shared.Index = info.Source
		}
		e.base = b
	})
	return e
}

// stages returns the pool's preflight and signing stages; the signing key
// is loaded once per file.
func (r *run) stages(ctx context.Context, p *Pool) ([]builder.Stage, error) {
	po := preflight.Options{Log: r.log, MaxAddedBytes: 2 << 30}
	if pf := p.Preflight; pf != nil {
		po.Skip, po.ExpectVersion, po.AllowSecrets = pf.Skip, pf.ExpectVersion, pf.AllowSecrets
		po.FatalWarnings = pf.FatalWarnings != nil && *pf.FatalWarnings
		po.DenyUsrOverride = pf.DenyUsrOverride != nil && *pf.DenyUsrOverride
		po.RequireBase = pf.RequireBase
		if pf.MaxAddedBytes != "" {
			n, err := preflight.ParseBytes(pf.MaxAddedBytes)
			if err != nil {
				return nil, err
			}
			po.MaxAddedBytes = n
		}
	}
	reg := r.o.Registry
	po.Open = func(ctx context.Context, ref string, pl *v1.Platform) (v1.Image, error) {
		img, _, err := reg.Image(ctx, ref, pl)
		return img, err
	}
	stages := preflight.Stages(po)
	if p.SignKey == "" {
		return stages, nil
	}
	key := p.SignKey + "\x00" + p.SignKeyPasswordFile
	r.mu.Lock()
	e, ok := r.keys[key]
	if !ok {
		e = &keyEntry{}
		r.keys[key] = e
	}
	r.mu.Unlock()
	e.once.Do(func() {
		pass := sign.Password(r.o.Password)
		if p.SignKeyPasswordFile != "" {
			pass = sign.PasswordFile(p.SignKeyPasswordFile)
		}
		e.sv, e.err = sign.LoadKey(p.SignKey, pass)
	})
	if e.err != nil {
		return nil, fmt.Errorf("%s: %w", p.SignKey, e.err)
	}
	sv := e.sv
	kf := func(context.Context) (signature.SignerVerifier, error) { return sv, nil }
	return append(stages, sign.Stages(kf, sign.WithRegistry(reg), sign.WithVersion(r.o.Version), sign.WithLogger(r.log))...), nil
}
