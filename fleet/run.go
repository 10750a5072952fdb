package fleet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/oslayer/oslayer/assemble"
	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/pipeline"
	"github.com/oslayer/oslayer/preflight"
	"github.com/oslayer/oslayer/publish"
	"github.com/oslayer/oslayer/render"
	"github.com/oslayer/oslayer/sign"
	"github.com/oslayer/oslayer/sources/imageref"
	"github.com/oslayer/oslayer/sources/model"
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
	images *imageref.Reader

	mu    sync.Mutex
	bases map[string]*baseEntry
	// platLists are the platforms of bases that arch: all pools build for.
	platLists map[string]*platformsEntry
	keys      pipeline.Keys
	repoIdx   map[string]bool // repositories that get the base index artifact
	// imageOpts configure every imageRef reader; platImages are the
	// readers of multi-platform pools, by platform.
	imageOpts  []imageref.Option
	platImages map[string]*imageref.Reader
	known      publish.KnownBlobs // blobs seen in target repositories during the run
	sessions   publish.Sessions   // connections to target repositories
	progress   *progress
}

type baseEntry struct {
	once   sync.Once
	base   *assemble.Base
	shared Shared
	step   string
	err    error
}

type platformsEntry struct {
	once      sync.Once
	platforms []v1.Platform
	shared    Shared
	err       error
}

// Run builds every pool, Jobs at a time, and returns the summary. Pools
// are independent: one failing never stops another. Run returns an error
// only when it could not start.
//
// Every pool is rendered first (Jobs at a time). Pools whose targets are
// in one repository and whose rendered content, base and options are the
// same become one image: it is built, pushed and signed once (by the first
// of them in the plan), and each of the others only moves its tag to it
// (the registry already has the image and its signature, so nothing else
// is written). Its pool label and provenance name the pools it serves.
func Run(ctx context.Context, pools []Pool, o Options) (*Summary, error) {
	o.shareRegistry()
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var iopts []imageref.Option
	if o.ImageBudget > 0 {
		iopts = append(iopts, imageref.WithBudget(o.ImageBudget))
	}
	if o.ImageTimeout > 0 {
		iopts = append(iopts, imageref.WithTimeout(o.ImageTimeout))
	}
	r := &run{o: o, log: log, images: imageref.New(o.Registry, iopts...), imageOpts: iopts,
		bases: map[string]*baseEntry{}, platLists: map[string]*platformsEntry{}, repoIdx: map[string]bool{}, platImages: map[string]*imageref.Reader{}}
	defer func() {
		r.images.Close()
		for _, ir := range r.platImages {
			ir.Close()
		}
	}()
	start := time.Now()
	r.progress = newProgress(o.Progress, o.Terminal, len(pools))
	sum := &Summary{Total: len(pools), Pools: make([]PoolResult, len(pools))}

	prep := make([]*prepared, len(pools))
	parallel(o.Jobs, len(pools), func(i int) {
		prep[i] = r.prepare(ctx, &pools[i])
		prep[i].at = i
		if prep[i].done {
			sum.Pools[i] = prep[i].res
			r.progress.done(&prep[i].res)
		}
	})
	// The first image of each repository goes first, the others once it
	// is there: the base layers are mounted into a repository once, and
	// the later pools know they are there without asking.
	var first, rest [][]*prepared
	seen := map[string]bool{}
	for _, g := range group(prep) {
		if seen[g[0].repo] {
			rest = append(rest, g)
		} else {
			seen[g[0].repo] = true
			first = append(first, g)
		}
	}
	for _, wave := range [][][]*prepared{first, rest} {
		parallel(o.Jobs, len(wave), func(g int) {
			for _, p := range r.buildGroup(ctx, wave[g]) {
				sum.Pools[p.at] = p.res
				r.progress.done(&p.res)
			}
		})
	}
	r.progress.finish()
	sum.Seconds = time.Since(start).Seconds()
	for _, b := range r.bases {
		sum.Shared = append(sum.Shared, b.shared)
	}
	for _, l := range r.platLists {
		sum.Shared = append(sum.Shared, l.shared)
	}
	sum.tally()
	return sum, nil
}

// shareRegistry sets the defaults of a run: one transport and one set of
// connections for every pool, Jobs.
func (o *Options) shareRegistry() {
	if o.Registry == nil {
		o.Registry = &registry.Options{}
	}
	if o.Jobs <= 0 {
		o.Jobs = 4
	}
	if o.Registry.Transport == nil {
		// One transport for every pool, keeping a connection per request
		// that may be under way at once (pools × blob uploads).
		ro := *o.Registry
		uploads := max(ro.Jobs, 4)
		tr := remote.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = max(tr.MaxIdleConnsPerHost, o.Jobs*(uploads+1))
		tr.MaxIdleConns = max(tr.MaxIdleConns, 2*tr.MaxIdleConnsPerHost)
		ro.Transport = tr
		o.Registry = &ro
	}
	if o.Registry.Shared == nil {
		// Signing, the base and its index connect once per repository.
		ro := *o.Registry
		ro.Shared = &registry.Connections{}
		o.Registry = &ro
	}
}

// parallel runs f(0..n-1), jobs at a time.
func parallel(jobs, n int, f func(i int)) {
	work := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < min(jobs, n); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				f(i)
			}
		}()
	}
	for i := 0; i < n; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
}

// prepared is a pool with its shared base resolved and its content
// rendered, or its result when that failed (done).
type prepared struct {
	pool  *Pool
	at    int // position in the pools Run builds
	res   PoolResult
	done  bool
	start time.Time
	mode  string
	repo  string
	base  *assemble.Base
	// pipe is the pool's pipeline (its Spec made ready: publisher,
	// stages, request).
	pipe *pipeline.Pipeline
	// rendered is nil for a pool that takes its base from its
	// MachineConfigs (builder renders it twice); renderSecs its time.
	rendered   *render.Result
	renderSecs float64
	// prepSecs is the time prepare took besides rendering (shared base
	// resolution waits count).
	prepSecs float64
	// key is the identity of the image it becomes ("" never shared).
	key string
	// arches are the platforms of a multi-platform pool (nil: one).
	arches []string
	// platforms are a multi-platform pool's platforms, each with its
	// shared base and its render (nil when the base comes from the
	// MachineConfigs: build.Build resolves and renders).
	platforms []platformRender
	// same is the first pool of its group when this pool shares its
	// image (nil for the first); built is the first pool's build (of an
	// image or an index), kept while its group is built.
	same  *prepared
	built *assemble.Result
}

// platformRender is one platform of a multi-platform pool, rendered onto
// the run's shared base of that platform.
type platformRender struct {
	platform v1.Platform
	base     *assemble.Base
	rendered *render.Result
	secs     float64
}

// prepare resolves what the pool shares and renders it; a panic fails only
// this pool.
func (r *run) prepare(ctx context.Context, p *Pool) (pr *prepared) {
	pr = &prepared{pool: p, start: time.Now(), res: PoolResult{Cluster: p.Cluster, Pool: p.Name, Path: p.Path, Target: p.Target}}
	fail := func(step, kind string, err error) *prepared {
		pr.res.fail(step, kind, err)
		pr.res.Seconds = time.Since(pr.start).Seconds()
		pr.done = true
		return pr
	}
	defer func() {
		if v := recover(); v != nil {
			fail("internal", KindRun, fmt.Errorf("panic: %v\n%s", v, debug.Stack()))
		}
	}()
	if err := ctx.Err(); err != nil {
		return fail("start", KindRun, err)
	}
	pr.mode = p.BaseIndex
	if pr.mode == "" {
		pr.mode = assemble.BaseIndexAuto
	}
	if arches, _ := assemble.ParseArches(p.Arch); len(arches) > 1 || arches[0] == assemble.ArchAll {
		pr.arches = arches
	}
	var err error
	if pr.pipe, err = r.pipeline(p, pr.arches != nil); err != nil {
		step := "push"
		if pe := (*pipeline.Error)(nil); errors.As(err, &pe) {
			step = pe.Step
		}
		return fail(step, KindInput, err)
	}
	pr.repo = pr.pipe.Repository
	if pr.repo == "" {
		dir, _, _ := registry.SplitLayout(p.Target)
		pr.repo = registry.LayoutPrefix + dir
	}
	if p.Base == "" {
		// The base comes from the MachineConfigs: builder renders (and
		// resolves each platform's base); the pool's image is its own.
		pr.prepSecs = time.Since(pr.start).Seconds()
		return pr
	}
	if f := r.renderShared(ctx, pr); f != nil {
		if f.step == "render" {
			pr.res.Phases = []assemble.Phase{{Name: "render", Seconds: pr.renderSecs}}
		}
		return fail(f.step, f.kind, f.err)
	}
	pr.key = pr.identity()
	pr.prepSecs = time.Since(pr.start).Seconds() - pr.renderSecs
	return pr
}

// failure is where and why preparing a pool stopped.
type failure struct {
	step, kind string
	err        error
}

// renderShared renders the pool onto the run's shared base (resolved and
// indexed once for every pool that names it): a multi-platform pool once
// per platform, onto that platform's base with its imageRef content
// (build.Build takes these renders: see handOver).
func (r *run) renderShared(ctx context.Context, pr *prepared) *failure {
	p := pr.pool
	indexRepo := pr.repo
	if registry.IsLayout(indexRepo) {
		indexRepo = ""
	}
	renderFailed := func(what string, err error) *failure {
		return &failure{"render", stepKind(ctx, "render"), fmt.Errorf("%srender: %w", what, err)}
	}
	if pr.arches == nil {
		b := r.base(ctx, p.Base, p.Arch, pr.mode, indexRepo)
		if b.err != nil {
			return &failure{b.step, KindRun, b.err}
		}
		pr.base = b.base
		var err error
		if pr.rendered, pr.renderSecs, err = r.render(ctx, pr, pr.base, pr.pipe.Request.Render.Images); err != nil {
			return renderFailed("", err)
		}
		return nil
	}
	platforms, err := r.platforms(ctx, p.Base, pr.arches)
	if err != nil {
		return &failure{"base", KindRun, err}
	}
	for _, pl := range platforms {
		b := r.base(ctx, p.Base, pl.Architecture, pr.mode, indexRepo)
		if b.err != nil {
			return &failure{b.step, KindRun, fmt.Errorf("platform %s: %w", pl.String(), b.err)}
		}
		rd, secs, err := r.render(ctx, pr, b.base, r.platformImages(pl))
		pr.renderSecs += secs
		if err != nil {
			return renderFailed("platform "+pl.String()+": ", err)
		}
		pr.platforms = append(pr.platforms, platformRender{platform: pl, base: b.base, rendered: rd, secs: secs})
	}
	return nil
}

// render renders the pool onto base (onto its index unless the base
// index is off), reading imageRef files through images; it returns the
// render's time.
func (r *run) render(ctx context.Context, pr *prepared, base *assemble.Base, images model.ImageFiles) (*render.Result, float64, error) {
	rreq := pr.pipe.Request.Render
	rreq.Images = images
	if base.Index != nil && pr.mode != assemble.BaseIndexOff {
		rreq.Base = base.Index.FS()
	}
	rreq.BaseName = fmt.Sprintf("base %s (%s)", base.Ref, base.Digest)
	t0 := time.Now()
	rd, err := render.Render(ctx, rreq)
	return rd, time.Since(t0).Seconds(), err
}

// pipeline makes the pool's pipeline from its Spec, with what the run
// shares: the publisher's sessions and known blobs (the sole writer of
// its tags: see Run), the decrypted keys, the imageRef readers.
func (r *run) pipeline(p *Pool, multi bool) (*pipeline.Pipeline, error) {
	spec, err := p.Spec(r.o)
	if err != nil {
		return nil, err
	}
	popts := []publish.Option{publish.WithKnownBlobs(&r.known), publish.WithSessions(&r.sessions),
		publish.WithSoleWriter(), publish.WithSingleRequestUploads()}
	if !multi {
		// A single image: its manifest is put once, by tag, after every
		// stage (no stage reads it back). An index's platform images
		// must be there by digest before the index.
		popts = append(popts, publish.WithManifestByTag())
	}
	images := func(pl *v1.Platform) model.ImageFiles {
		if pl == nil {
			return r.images
		}
		return r.platformImages(*pl)
	}
	// Each image is signed by one pool (see Run): the signer is the sole
	// writer of its signature and attestation tags.
	return pipeline.New(spec, pipeline.Env{Version: r.o.Version, Logger: r.log, Publish: popts,
		Sign: []sign.Option{sign.WithSoleWriter()}, Keys: &r.keys, Images: images, PublishBaseIndex: true})
}

func (p *Pool) bake() bool { return isTrue(p.BakeSecrets) }

func isTrue(b *bool) bool { return b != nil && *b }

// identity is what makes two pools one image: the target repository, the
// base, every option that reaches the image or its checks, and the
// rendered layers and kernel arguments; for a multi-platform pool its
// architectures and, per platform in index order, that platform's base
// digest and render. A single-platform image and an index never share
// an identity.
func (pr *prepared) identity() string {
	p := pr.pool
	h := sha256.New()
	opts := []any{pr.repo, p.Base, pr.mode, p.bake(), p.AllowTopLevel, p.SignKey, p.SignKeyPasswordFile, p.Preflight}
	if pr.arches == nil {
		opts = append(opts, "image", pr.base.Digest.String(), registry.NormalizeArch(p.Arch))
	} else {
		opts = append(opts, "index", pr.arches, len(pr.platforms))
	}
	b, _ := json.Marshal(opts)
	h.Write(b)
	if pr.arches == nil {
		writeRendered(h, pr.rendered)
	}
	for _, pl := range pr.platforms {
		fmt.Fprintf(h, "\n\nplatform %s base %s", pl.platform.String(), pl.base.Digest)
		writeRendered(h, pl.rendered)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// writeRendered adds what a render puts into an image to h.
func writeRendered(h io.Writer, rd *render.Result) {
	b, _ := json.Marshal([]any{rd.KernelArgs, rd.Packages, rd.OSImageURL})
	h.Write(b)
	for _, l := range rd.Layers {
		fmt.Fprintf(h, "\n%s %s %s", l.Name, l.Digest, l.CreatedBy)
	}
}

// group puts the prepared pools that become one image together, in plan
// order; pools done already are left out.
func group(prep []*prepared) [][]*prepared {
	var groups [][]*prepared
	byKey := map[string]int{}
	for _, pr := range prep {
		if pr.done {
			continue
		}
		if pr.key != "" {
			if g, ok := byKey[pr.key]; ok {
				groups[g] = append(groups[g], pr)
				continue
			}
			byKey[pr.key] = len(groups)
		}
		groups = append(groups, []*prepared{pr})
	}
	return groups
}

// buildGroup builds the group's image once, for its first pool, then
// moves every other pool's tag to it.
func (r *run) buildGroup(ctx context.Context, g []*prepared) []*prepared {
	names := map[string]bool{}
	var label []string
	for _, pr := range g {
		if !names[pr.pool.Name] {
			names[pr.pool.Name] = true
			label = append(label, pr.pool.Name)
		}
	}
	sort.Strings(label)
	lead := g[0]
	r.buildPool(ctx, lead, lead.rendered, strings.Join(label, ","))
	for _, pr := range g[1:] {
		pr.res.SameImageAs = lead.pool.Path
		if lead.res.Status != "built" {
			// The same image: it would fail the same way.
			pr.res.Phases = []assemble.Phase{{Name: "render", Seconds: pr.renderSecs}}
			pr.res.fail(lead.res.Step, lead.res.Kind, fmt.Errorf("%s (the same image as %s, which failed)", lead.res.Error, lead.pool.Path))
			pr.res.Seconds = pr.prepSecs + pr.renderSecs
			continue
		}
		// Only the tag moves to the first pool's image or index: it was
		// checked, pushed and signed already (see moveTag).
		pr.same = lead
		r.buildPool(ctx, pr, lead.rendered, strings.Join(label, ","))
	}
	// The group is done: its image need not stay in memory.
	lead.built = nil
	return g
}

// buildPool builds one prepared pool under the pool label name, from
// rendered (nil: builder renders); a panic fails only this pool.
func (r *run) buildPool(ctx context.Context, pr *prepared, rendered *render.Result, name string) {
	res := &pr.res
	start := time.Now()
	defer func() {
		if v := recover(); v != nil {
			res.fail("internal", KindRun, fmt.Errorf("panic: %v\n%s", v, debug.Stack()))
		}
		res.Seconds = pr.prepSecs + pr.renderSecs + time.Since(start).Seconds()
	}()
	if pr.same != nil {
		r.moveTag(ctx, pr)
		return
	}
	req := pr.pipe.Request
	// The image serves every pool of its group: its pool label and
	// provenance name them all.
	req.Render.Pool, req.Flags["pool"] = name, name
	req.BaseImage = pr.base
	if rendered != nil {
		req.Renderer = func(context.Context, render.Request) (*render.Result, error) { return rendered, nil }
	}
	if req.Index.Repository != "" && pr.arches == nil && !r.firstInRepo(pr.repo, pr.base) {
		// The base index artifact goes once into every target repository.
		req.Index.Repository = ""
	}
	if pr.platforms != nil {
		r.handOver(&req, pr.platforms)
	}
	br, err := assemble.Build(ctx, req, pr.pipe.Publisher, pr.pipe.Stages...)
	pr.built = br
	r.record(ctx, pr, br, err)
}

// handOver gives a multi-platform build what prepare did: each
// platform's base (and its index), resolved once for every pool of the
// run as a single-platform pool's is, and the platform's render onto it.
func (r *run) handOver(req *assemble.Request, platforms []platformRender) {
	byPlatform := map[string]*platformRender{}
	for i := range platforms {
		pl := &platforms[i]
		req.Resolved = append(req.Resolved, pl.platform)
		byPlatform[pl.platform.String()] = pl
	}
	req.Bases = func(_ context.Context, p v1.Platform) (*assemble.Base, error) {
		if pl := byPlatform[p.String()]; pl != nil {
			return pl.base, nil
		}
		return nil, fmt.Errorf("platform %s was not resolved", p.String())
	}
	req.Renderers = func(p v1.Platform) assemble.Renderer {
		pl := byPlatform[p.String()]
		if pl == nil {
			return nil
		}
		return func(context.Context, render.Request) (*render.Result, error) { return pl.rendered, nil }
	}
}

// moveTag moves the tag of a pool that shares the image or index of its
// group's first pool (pr.same) to it with build.Retag: it passed the
// checks, was pushed and signed (its signature is per digest) when that
// pool built it, so nothing is assembled, checked, uploaded or signed
// again. The registry sees a look at the tag and, unless it names the
// image already, one PUT of the manifest by tag.
func (r *run) moveTag(ctx context.Context, pr *prepared) {
	br, err := assemble.Retag(ctx, pr.same.built, pr.pipe.Publisher)
	if br != nil {
		// The pool's phases: its own render (prepare), then the tag.
		br.Phases = append([]assemble.Phase{{Name: "render"}}, br.Phases...)
		for _, p := range br.Platforms {
			p.Phases = []assemble.Phase{{Name: "render"}}
		}
	}
	r.record(ctx, pr, br, err)
}

// record puts a build's result (br, err) into the pool's summary row,
// with the pool's own render times and inputs digest (the image may
// carry the group's first).
func (r *run) record(ctx context.Context, pr *prepared, br *assemble.Result, err error) {
	res := &pr.res
	setRender := func(phases []assemble.Phase, secs float64) {
		for i := range phases {
			if phases[i].Name == "render" {
				phases[i].Seconds = secs
			}
		}
	}
	if br != nil {
		if pr.rendered != nil {
			setRender(br.Phases, pr.renderSecs)
		}
		for i, p := range br.Platforms {
			if i < len(pr.platforms) {
				setRender(p.Phases, pr.platforms[i].secs)
			}
		}
	}
	res.fill(br)
	switch {
	case pr.rendered != nil:
		res.InputsDigest = pr.rendered.InputsDigest
	case len(pr.platforms) > 0:
		res.InputsDigest = pr.platforms[0].rendered.InputsDigest
	}
	if err != nil {
		step := lastStep(br)
		res.fail(step, stepKind(ctx, step), err)
	}
}

// lastStep is the step a build stopped at: its last phase (for an index
// that had none yet, its last platform's).
func lastStep(br *assemble.Result) string {
	switch {
	case br == nil:
	case len(br.Phases) > 0:
		return br.Phases[len(br.Phases)-1].Name
	case len(br.Platforms) > 0:
		if ph := br.Platforms[len(br.Platforms)-1].Phases; len(ph) > 0 {
			return ph[len(ph)-1].Name
		}
	}
	return "build"
}

// platformImages returns the reader of imageRef files for platform p,
// shared by every multi-platform pool of the run.
func (r *run) platformImages(p v1.Platform) *imageref.Reader {
	key := p.String()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.platImages[key] == nil {
		r.platImages[key] = imageref.New(r.o.Registry, append(r.imageOpts, imageref.WithPlatform(p))...)
	}
	return r.platImages[key]
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
func (r *run) firstInRepo(repo string, base *assemble.Base) bool {
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
	e := entry(&r.mu, r.bases, key, func(e *baseEntry) {
		e.shared = Shared{What: "base", Ref: ref}
	}, func(e *baseEntry) { e.shared.Pools++ })
	e.once.Do(func() {
		start := time.Now()
		defer func() { e.shared.Seconds = time.Since(start).Seconds() }()
		b, err := assemble.ResolveBase(ctx, ref, r.o.Registry, arch)
		if err != nil {
			e.step, e.err = "base", err
			e.shared.Error = err.Error()
			return
		}
		e.shared.Digest = b.Digest.String()
		if mode != assemble.BaseIndexOff {
			info, err := assemble.IndexBase(ctx, b, assemble.IndexOptions{CacheDir: r.o.IndexCacheDir,
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

// platforms resolves a multi-platform pool's architectures on base ref to
// platforms: ArchAll reads the base's index once for every pool that
// names it.
func (r *run) platforms(ctx context.Context, ref string, arches []string) ([]v1.Platform, error) {
	mreq := assemble.Request{Base: ref, Registry: r.o.Registry, Arch: strings.Join(arches, ",")}
	if len(arches) != 1 || arches[0] != assemble.ArchAll {
		return mreq.Platforms(ctx)
	}
	e := entry(&r.mu, r.platLists, ref, func(e *platformsEntry) {
		e.shared = Shared{What: "platforms", Ref: ref}
	}, func(e *platformsEntry) { e.shared.Pools++ })
	e.once.Do(func() {
		start := time.Now()
		e.platforms, e.err = mreq.Platforms(ctx)
		e.shared.Seconds = time.Since(start).Seconds()
		if e.err != nil {
			e.shared.Error = e.err.Error()
		}
	})
	return e.platforms, e.err
}

// entry returns m[key] under mu, made (and set up by init) when missing;
// each, when set, runs on it under mu.
func entry[T any](mu *sync.Mutex, m map[string]*T, key string, init, each func(*T)) *T {
	mu.Lock()
	defer mu.Unlock()
	e, ok := m[key]
	if !ok {
		e = new(T)
		if init != nil {
			init(e)
		}
		m[key] = e
	}
	if each != nil {
		each(e)
	}
	return e
}
