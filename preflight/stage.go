package preflight

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/oslayer/oslayer/assemble"
	"github.com/oslayer/oslayer/internal/field"
)

// Stage names in a build result.
const (
	// StageName is the content half: every check that reads only the
	// built image, run before anything is written.
	StageName = "preflight"
	// StageWritten is the half that checks the image as written to the
	// target, by digest, before its tag moves.
	StageWritten = "preflight-written"
)

// Stages returns preflight as two builder stages:
//
//   - StageName runs every check that needs only the assembled image
//     (content, secrets, units, size, platform, ...) before anything is
//     written (it implements build.PreWrite): a build it stops uploads
//     no blob to a registry and writes none into a layout;
//   - StageWritten runs the checks that are about what was written
//     (NeedWritten: the base's layers are an ordered prefix of the layers
//     the target now lists; for an image built on a package base, the
//     official base's layers too, as with --require-base) after the write
//     by digest and before the tag moves. With Options.Open it reads the
//     image back from the registry by digest (unless NoReadBack); for a
//     layout, or without Open, it checks the assembled image, which is
//     byte for byte the one written.
//
// Errors fail the build (nothing written, or the tag does not move);
// warnings are logged and kept in the returned *Report, recorded under the
// stage's name.
func Stages(opts Options) []assemble.Stage {
	sh := &shared{opts: opts}
	return []assemble.Stage{&stage{sh: sh}, &stage{sh: sh, written: true}}
}

// Stage returns preflight as one stage that runs every check before the
// image is written (the checks of what was written then see the assembled
// image). Builds use Stages.
func Stage(opts Options) assemble.Stage { return &stage{sh: &shared{opts: opts}, all: true} }

// shared is what the two halves share: the options and the required base,
// opened once per platform.
type shared struct {
	opts Options

	mu sync.Mutex
	// required holds the required base per platform (a multi-platform
	// build checks each platform against its own).
	required map[string]*required
}

// required is the required base for one platform, opened once.
type required struct {
	once sync.Once
	img  v1.Image
	err  error
}

func (sh *shared) requiredFor(plat *v1.Platform) *required {
	key := ""
	if plat != nil {
		key = plat.String()
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.required == nil {
		sh.required = map[string]*required{}
	}
	if sh.required[key] == nil {
		sh.required[key] = &required{}
	}
	return sh.required[key]
}

type stage struct {
	sh      *shared
	written bool // the half after the write
	all     bool // both halves in one
}

func (s *stage) Name() string {
	if s.written {
		return StageWritten
	}
	return StageName
}

// PreWrite implements build.PreWrite: the content half runs before the
// write.
func (s *stage) PreWrite() bool { return !s.written }

// split returns the options of this half: its checks, and the --skip names
// among them. Skip names no check at all is refused by Run of the content
// half, which sees the full list.
func (s *stage) split() (Options, bool) {
	o := s.sh.opts
	if s.all {
		return o, true
	}
	all := o.Checks
	if all == nil {
		all = Default()
	}
	var mine []Check
	names := map[string]bool{}
	for _, c := range all {
		if (c.Needs()&NeedWritten != 0) == s.written {
			mine = append(mine, c)
			names[c.Name()] = true
		}
	}
	if s.written {
		var skip []string
		for _, n := range o.Skip {
			if names[n] {
				skip = append(skip, n)
			}
		}
		o.Skip, o.onlyWritten = skip, true
		active := 0
		for _, c := range mine {
			if !slices.Contains(skip, c.Name()) {
				active++
			}
		}
		if active == 0 {
			return o, false
		}
	} else {
		// Names of the other half are valid --skip values here too.
		for _, c := range all {
			if !names[c.Name()] {
				mine = append(mine, skipped{c})
			}
		}
	}
	o.Checks = mine
	return o, true
}

// skipped stands for a check of the other half in the content half's run:
// it is listed (so --skip may name it) but never run.
type skipped struct{ Check }

func (skipped) Needs() Needs { return notHere }

// notHere marks a check that belongs to the other half of a build.
const notHere Needs = 1 << 7

func (s *stage) Run(ctx context.Context, b *assemble.Built, p *assemble.Published) (any, error) {
	if b == nil || b.Image == nil {
		return nil, errors.New("no built image")
	}
	opts, run := s.split()
	if !run {
		return nil, nil
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	t, err := s.target(ctx, opts, b, p)
	if err != nil {
		return nil, err
	}
	rep, err := runChecks(ctx, t, opts) // the build names the stage
	if err != nil {
		return nil, err
	}
	errs := logFindings(log, rep.Findings)
	if rep.Errors > 0 {
		more := ""
		if rep.Errors > len(errs) {
			more = fmt.Sprintf("; and %d more", rep.Errors-len(errs))
		}
		return rep, &RefusedError{msg: fmt.Sprintf("%d error(s) in %s: %s%s", rep.Errors, t.Ref, strings.Join(errs, "; "), more), fields: fieldsOf(rep.Findings)}
	}
	log.Info("preflight passed", "image", t.Ref, "warnings", rep.Warnings)
	return rep, nil
}

// target is what the checks look at: the built image (or, for the
// written half, the image read back by digest), its base, and the
// required base (--require-base, or the official base of a package base).
func (s *stage) target(ctx context.Context, opts Options, b *assemble.Built, p *assemble.Published) (Target, error) {
	t := Target{Image: b.Image, Base: b.Base.Image, BaseRef: b.Base.Ref}
	if b.Base.Index != nil {
		t.BaseTree = b.Base.Index.FS()
	}
	if p != nil {
		t.Ref = p.Ref
	}
	if t.Ref == "" {
		t.Ref = "pool " + b.Pool
	}
	var plat *v1.Platform
	if cf, err := b.Image.ConfigFile(); err == nil && cf.Architecture != "" {
		plat = &v1.Platform{OS: cf.OS, Architecture: cf.Architecture, Variant: cf.Variant}
	}
	// The image is read back only for what the write did not prove. An
	// image the publisher found there already is what it built (the
	// registry keeps a manifest under its digest only with those bytes),
	// and so is one whose PUT by digest the registry answered with that
	// digest, which it accepted only with every blob it names in the
	// repository (Published.Proven). What the read-back still catches: a
	// registry that answered no digest and then does not serve the image
	// by digest (it lost it, or stored other bytes), and a publisher that
	// proves nothing (a layout target is checked from the assembled image).
	if s.written && p != nil && p.Digest != nil && opts.Open != nil && !opts.NoReadBack && !p.Found && !p.Proven {
		img, err := opts.Open(ctx, p.Ref, plat)
		if err != nil {
			return t, fmt.Errorf("read back %s: %w", p.Ref, err)
		}
		t.Image = img
	}
	if opts.RequireBase != "" {
		if opts.Open == nil {
			return t, &OptionError{Field: "preflight.requireBase", Err: fmt.Errorf("%s: no way to open images", opts.RequireBase)}
		}
		rq := s.sh.requiredFor(plat)
		rq.once.Do(func() { rq.img, rq.err = opts.Open(ctx, opts.RequireBase, plat) })
		if rq.err != nil {
			return t, &OptionError{Field: "preflight.requireBase", Err: fmt.Errorf("%s: %w", opts.RequireBase, rq.err)}
		}
		t.Require, t.RequireRef = rq.img, opts.RequireBase
	} else if o := b.Official; o != nil && o.Image != nil {
		// Built on a package base: the official base it was built from
		// is the required base (its layers an ordered prefix).
		t.Require, t.RequireRef = o.Image, o.Ref+" (official base "+o.Digest.String()+")"
	}
	return t, nil
}

// logFindings logs each finding at its severity and returns the first
// five errors, for the returned error (those are not logged again).
func logFindings(log *slog.Logger, findings []Finding) []string {
	var errs []string
	for _, f := range findings {
		attrs := []any{"check", f.Check, "severity", f.Severity}
		if f.Rule != "" {
			attrs = append(attrs, "rule", f.Rule)
		}
		if f.Layer != "" {
			attrs = append(attrs, "layer", f.Layer)
		}
		if f.Path != "" {
			attrs = append(attrs, "path", f.Path)
		}
		if f.Field != "" {
			attrs = append(attrs, "field", f.Field)
		}
		switch f.Severity {
		case Error:
			if len(errs) < 5 {
				errs = append(errs, f.String())
				log.Debug("preflight: "+f.Message, attrs...)
			} else {
				log.Error("preflight: "+f.Message, attrs...)
			}
		case Warning:
			log.Warn("preflight: "+f.Message, attrs...)
		default:
			log.Info("preflight: "+f.Message, attrs...)
		}
	}
	return errs
}

// String renders a finding on one line: "check[/rule] PATH (LAYER): message".
func (f Finding) String() string {
	var b strings.Builder
	b.WriteString(f.Check)
	if f.Rule != "" {
		b.WriteString("/" + f.Rule)
	}
	if f.Path != "" {
		b.WriteString(" /" + f.Path)
	}
	if f.Layer != "" {
		fmt.Fprintf(&b, " (layer %s)", short12(f.Layer))
	}
	b.WriteString(": " + f.Message)
	return b.String()
}

func short12(d string) string {
	if len(d) > 19 {
		return d[:19]
	}
	return d
}

// RefusedError is a build the checks refused: the image the pool's input
// makes would not boot or would break the node (the findings say why).
// It is the input's fault, as a field the specification refuses is, so a
// front-end exits 2 for it (InputError), as the fleet counts it (kind
// input); a check that could not run returns another error.
//
// Its message names specification fields by their names (Spell spells
// them as a front-end does).
type RefusedError struct {
	msg    string
	fields []field.Name
}

func (e *RefusedError) Error() string { return e.msg }

// InputError reports that the refusal is bad input.
func (e *RefusedError) InputError() bool { return true }
