package preflight

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/oslayer/oslayer/builder"
)

// StageName is the name the preflight stage has in a build result.
const StageName = "preflight"

// Stage returns the builder stage that runs the checks on a built image
// after it was written by digest and before its tag moves. Errors fail the
// build (the tag does not move); warnings are logged and kept in the
// returned *Report, which the build records under StageName.
func Stage(opts Options) builder.Stage { return &stage{opts: opts} }

type stage struct{ opts Options }

func (s *stage) Name() string { return StageName }

func (s *stage) Run(ctx context.Context, b *builder.Built, p *builder.Published) (any, error) {
	if b == nil || b.Image == nil {
		return nil, errors.New("no built image")
	}
	log := s.opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	t := Target{Image: b.Image, Base: b.Base.Image, BaseRef: b.Base.Ref}
	if p != nil {
		t.Ref = p.Ref
	}
	if t.Ref == "" {
		t.Ref = "pool " + b.Pool
	}
	if s.opts.RequireBase != "" {
		if s.opts.Open == nil {
			return nil, fmt.Errorf("--require-base %s: no way to open images", s.opts.RequireBase)
		}
		var plat *v1.Platform
		if cf, err := b.Image.ConfigFile(); err == nil && cf.Architecture != "" {
			plat = &v1.Platform{OS: cf.OS, Architecture: cf.Architecture, Variant: cf.Variant}
		}
		img, err := s.opts.Open(ctx, s.opts.RequireBase, plat)
		if err != nil {
			return nil, fmt.Errorf("--require-base %s: %w", s.opts.RequireBase, err)
		}
		t.Require, t.RequireRef = img, s.opts.RequireBase
	}
	rep, err := Run(ctx, t, s.opts)
	if err != nil {
		// The build names the stage already.
		return nil, unprefixed{err}
	}
	var errs []string
	for _, f := range rep.Findings {
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
		switch f.Severity {
		case Error:
			log.Error("preflight: "+f.Message, attrs...)
			if len(errs) < 5 {
				errs = append(errs, f.String())
			}
		case Warning:
			log.Warn("preflight: "+f.Message, attrs...)
		default:
			log.Info("preflight: "+f.Message, attrs...)
		}
	}
	if rep.Errors > 0 {
		more := ""
		if rep.Errors > len(errs) {
			more = fmt.Sprintf("; and %d more", rep.Errors-len(errs))
		}
		return rep, fmt.Errorf("%d error(s) in %s: %s%s", rep.Errors, t.Ref, strings.Join(errs, "; "), more)
	}
	log.Info("preflight passed", "image", t.Ref, "warnings", rep.Warnings)
	return rep, nil
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

// unprefixed drops Run's "preflight: " prefix: the build prefixes the stage name.
type unprefixed struct{ err error }

func (u unprefixed) Error() string { return strings.TrimPrefix(u.err.Error(), "preflight: ") }
func (u unprefixed) Unwrap() error { return u.err }
