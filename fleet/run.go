package fleet

import (
	"context"
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

	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/pipeline"
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
	// retrying won't help (oslayer fleet build exits 2).
	KindInput = "input"
	// KindRun is a failure to run (registry, credentials, cancelled):
	// retrying may help (exit 1).
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

// run is one fleet run's shared state: what its pools' pipelines share
// (pipeline.Cache: bases and their indexes, platform lists, imageRef
// readers, known blobs and connections; the decrypted keys).
type run struct {
	o        Options
	log      *slog.Logger
	cache    pipeline.Cache
	keys     pipeline.Keys
	progress *progress
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
	r := &run{o: o, log: log}
	defer r.cache.Close()
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
		if seen[g[0].repo()] {
			rest = append(rest, g)
		} else {
			seen[g[0].repo()] = true
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
	for _, e := range r.cache.Entries() {
		sh := Shared{What: e.What, Ref: e.Ref, Digest: e.Digest, Pools: e.Builds, Seconds: e.Seconds, Index: e.Index}
		if e.Err != nil {
			sh.Error = e.Err.Error()
		}
		sum.Shared = append(sum.Shared, sh)
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

// prepared is a pool with its plan (bases resolved through the run's
// cache, content rendered), or its result when that failed (done).
type prepared struct {
	pool  *Pool
	at    int // position in the pools Run builds
	res   PoolResult
	done  bool
	start time.Time
	// plan is the pool's prepared pipeline; its Identity says which
	// pools become one image ("": never shared).
	plan *pipeline.Plan
	// renderSecs is the pool's render time (every platform's);
	// prepSecs the time prepare took besides rendering (shared base
	// resolution waits count).
	renderSecs float64
	prepSecs   float64
	// same is the first pool of its group when this pool shares its
	// image (nil for the first); built is the first pool's build (of an
	// image or an index), kept while its group is built.
	same  *prepared
	built *pipeline.Result
}

// prepare makes the pool's pipeline and prepares it (pipeline.Prepare:
// its bases resolved and indexed once for every pool that names them,
// its content rendered); a panic fails only this pool.
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
	pipe, err := r.pipeline(p)
	if err != nil {
		return fail(errStep(err, "push"), KindInput, poolError(p, err))
	}
	pr.plan, err = pipe.Prepare(ctx)
	for _, s := range pr.plan.RenderSeconds {
		pr.renderSecs += s
	}
	if err != nil {
		step := errStep(err, "base")
		if step == "render" {
			pr.res.Phases = []pipeline.Phase{{Name: "render", Seconds: pr.renderSecs}}
		}
		return fail(step, stepKind(ctx, step, err), err)
	}
	pr.prepSecs = time.Since(pr.start).Seconds() - pr.renderSecs
	return pr
}

// repo is the pool's target repository (a layout's "oci:DIR").
func (pr *prepared) repo() string {
	if r := pr.plan.Pipeline.Repository; r != "" {
		return r
	}
	dir, _, _ := registry.SplitLayout(pr.pool.Target)
	return registry.LayoutPrefix + dir
}

// errStep is the build step a pipeline.Error names (else def).
func errStep(err error, def string) string {
	if pe := (*pipeline.Error)(nil); errors.As(err, &pe) && pe.Step != "" {
		return pe.Step
	}
	return def
}

// pipeline makes the pool's pipeline from its Spec, with what the run
// shares: the cache (bases, imageRef readers, the publishers' sessions
// and known blobs), the decrypted keys. The run is the sole writer of
// its tags (see Run) and each image is signed by one pool: the signer is
// the sole writer of its signature and attestation tags.
func (r *run) pipeline(p *Pool) (*pipeline.Pipeline, error) {
	spec, err := p.Spec(r.o)
	if err != nil {
		return nil, err
	}
	return pipeline.New(spec, pipeline.Env{Version: r.o.Version, Logger: r.log, Keys: &r.keys, Cache: &r.cache,
		SoleWriter: true, SingleRequestUploads: true, ManifestByTag: true, PublishBaseIndex: true})
}

func (p *Pool) bake() bool { return isTrue(p.BakeSecrets) }

func isTrue(b *bool) bool { return b != nil && *b }

// group puts the prepared pools that become one image (one plan
// identity) together, in plan order; pools done already are left out.
func group(prep []*prepared) [][]*prepared {
	var groups [][]*prepared
	byKey := map[string]int{}
	for _, pr := range prep {
		if pr.done {
			continue
		}
		if key := pr.plan.Identity; key != "" {
			if g, ok := byKey[key]; ok {
				groups[g] = append(groups[g], pr)
				continue
			}
			byKey[key] = len(groups)
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
	r.buildPool(ctx, lead, strings.Join(label, ","))
	for _, pr := range g[1:] {
		pr.res.SameImageAs = lead.pool.Path
		if lead.res.Status != "built" {
			// The same image: it would fail the same way.
			pr.res.Phases = []pipeline.Phase{{Name: "render", Seconds: pr.renderSecs}}
			pr.res.fail(lead.res.Step, lead.res.Kind, fmt.Errorf("%s (the same image as %s, which failed)", lead.res.Error, lead.pool.Path))
			pr.res.Seconds = pr.prepSecs + pr.renderSecs
			continue
		}
		// Only the tag moves to the first pool's image or index: it was
		// checked, pushed and signed already (see moveTag).
		pr.same = lead
		r.buildPool(ctx, pr, "")
	}
	// The group is done: its image need not stay in memory.
	lead.built = nil
	return g
}

// buildPool builds one prepared pool's plan under the pool label name;
// a panic fails only this pool.
func (r *run) buildPool(ctx context.Context, pr *prepared, name string) {
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
	// The image serves every pool of its group: its pool label and
	// provenance name them all.
	br, err := pr.plan.Build(ctx, name)
	pr.built = br
	r.record(ctx, pr, br, err)
}

// moveTag moves the tag of a pool that shares the image or index of its
// group's first pool (pr.same) to it (Pipeline.Retag): it passed the
// checks, was pushed and signed (its signature is per digest) when that
// pool built it, so nothing is assembled, checked, uploaded or signed
// again. The registry sees a look at the tag and, unless it names the
// image already, one PUT of the manifest by tag.
func (r *run) moveTag(ctx context.Context, pr *prepared) {
	br, err := pr.plan.Pipeline.Retag(ctx, pr.same.built)
	if br != nil {
		// The pool's phases: its own render (prepare), then the tag.
		br.Phases = append([]pipeline.Phase{{Name: "render"}}, br.Phases...)
		for _, p := range br.Platforms {
			p.Phases = []pipeline.Phase{{Name: "render"}}
		}
	}
	r.record(ctx, pr, br, err)
}

// record puts a build's result (br, err) into the pool's summary row,
// with the pool's own render times and inputs digest (the image may
// carry the group's first).
func (r *run) record(ctx context.Context, pr *prepared, br *pipeline.Result, err error) {
	res := &pr.res
	setRender := func(phases []pipeline.Phase, secs float64) {
		for i := range phases {
			if phases[i].Name == "render" {
				phases[i].Seconds = secs
			}
		}
	}
	in, secs := pr.plan.Inputs, pr.plan.RenderSeconds
	if br != nil && len(in) > 0 {
		if br.IsIndex() {
			for i, p := range br.Platforms {
				if i < len(secs) {
					setRender(p.Phases, secs[i])
				}
			}
		} else {
			setRender(br.Phases, pr.renderSecs)
		}
	}
	res.fill(br)
	if len(in) > 0 {
		res.InputsDigest = in[0].Rendered.InputsDigest
	}
	if err != nil {
		step := lastStep(br)
		res.fail(step, stepKind(ctx, step, err), err)
	}
}

// lastStep is the step a build stopped at: its last phase (for an index
// that had none yet, its last platform's).
func lastStep(br *pipeline.Result) string {
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

// stepKind says whether a failure at step is the input's (or a preflight
// check's) or a failure to run. What the pipeline refuses as input
// (pipeline.IsInput) is the input's at any step; a render that fails
// otherwise could not read its inputs (imageRef content from a registry).
func stepKind(ctx context.Context, step string, err error) string {
	switch {
	case ctx.Err() != nil:
		return KindRun
	case pipeline.IsInput(err):
		return KindInput
	}
	switch step {
	case "assemble", pipeline.StepPreflight, pipeline.StepPreflightWritten:
		return KindInput
	}
	return KindRun
}
