package preflight

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
)

// Run runs the checks on t. An error means the checks could not run (an
// image or a layer could not be read); problems with the image are
// findings. Its errors start with "preflight: ".
func Run(ctx context.Context, t Target, opts Options) (*Report, error) {
	rep, err := runChecks(ctx, t, opts)
	if err != nil {
		return nil, fmt.Errorf("preflight: %w", err)
	}
	return rep, nil
}

// runChecks is Run without its errors' prefix: the build's stage calls
// it (the build prefixes the stage's errors with its name).
func runChecks(ctx context.Context, t Target, opts Options) (*Report, error) {
	if t.Image == nil {
		return nil, errors.New("no candidate image")
	}
	r := &runner{opts: opts, checks: opts.Checks, log: opts.Log, ref: orDefault(t.Ref, "candidate image")}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	if r.checks == nil {
		r.checks = Default()
	}
	if err := r.validateSkip(); err != nil {
		return nil, err
	}
	r.t = &t
	r.t.Options = &r.opts
	if err := r.load(); err != nil {
		return nil, err
	}
	r.rep = &Report{Image: t.Ref, Base: t.BaseRef, RequireBase: t.RequireRef, AddedLayers: []LayerSummary{}, Findings: []Finding{}}
	if d, err := t.Image.Digest(); err == nil {
		r.rep.Digest = d.String()
	}
	r.rep.Layers = countLayers(r.t)
	if err := r.scan(ctx); err != nil {
		return nil, err
	}
	for _, c := range r.checks {
		if err := r.runCheck(ctx, c); err != nil {
			return nil, err
		}
	}
	r.rep.tally()
	return r.rep, nil
}

// runner is the state of one Run.
type runner struct {
	opts   Options
	checks []Check
	log    *slog.Logger
	ref    string
	t      *Target
	rep    *Report
}

// validateSkip refuses a skipped name that names no check.
func (r *runner) validateSkip() error {
	for i, s := range r.opts.Skip {
		if err := CheckKnown(s, r.checks); err != nil {
			return &OptionError{Field: fmt.Sprintf("preflight.skip[%d]", i), Err: err}
		}
	}
	return nil
}

// load reads the manifests and configs of the candidate, its base and the
// required base.
func (r *runner) load() error {
	t := r.t
	var err error
	if t.Manifest, err = t.Image.Manifest(); err != nil {
		return fmt.Errorf("%s: manifest: %w", r.ref, err)
	}
	if t.MediaType, err = t.Image.MediaType(); err != nil {
		return fmt.Errorf("%s: manifest media type: %w", r.ref, err)
	}
	if t.Config, err = t.Image.ConfigFile(); err != nil {
		return fmt.Errorf("%s: config: %w", r.ref, err)
	}
	t.Labels = t.Config.Config.Labels
	if t.Labels == nil {
		t.Labels = map[string]string{}
	}
	if t.Base != nil {
		if t.BaseManifest, t.BaseConfig, err = manifestConfig(t.Base, orDefault(t.BaseRef, "base image")); err != nil {
			return err
		}
	}
	if t.Require != nil {
		if t.ReqManifest, t.ReqConfig, err = manifestConfig(t.Require, orDefault(t.RequireRef, "required base image")); err != nil {
			return err
		}
	}
	return nil
}

// scan finds the added layers and, when a check needs them, reads them;
// the runner's own findings (where the added layers start, scan limits)
// go first in the report.
func (r *runner) scan(ctx context.Context) error {
	t := r.t
	var runnerFindings []Finding
	t.FirstAdded, runnerFindings = addedStart(t)
	if r.opts.onlyWritten {
		// The content half of the build reported on the added layers.
		runnerFindings = nil
	}
	if t.FirstAdded >= 0 && r.needAdded() {
		var err error
		if t.Added, err = scanAdded(ctx, t, r.opts.Scan); err != nil {
			return err
		}
	}
	for _, l := range t.Added {
		r.rep.AddedLayers = append(r.rep.AddedLayers, LayerSummary{Index: l.Index, Digest: l.Digest.String(), DiffID: l.DiffID.String(), Size: l.Size, MediaType: string(l.MediaType), Entries: len(l.Entries)})
		r.log.Debug("preflight: scanned added layer", "image", r.ref, "index", l.Index, "digest", l.Digest.String(), "entries", len(l.Entries), "keptFiles", len(l.Files), "truncated", l.Truncated)
		if l.Truncated {
			runnerFindings = append(runnerFindings, Finding{Check: "preflight", Severity: Warning, Rule: "scan-limits", Layer: l.Digest.String(),
				Message: "the layer has more entries or secret-like content than the scan keeps: some content checks saw only part of it"})
		}
	}
	for i := range runnerFindings {
		if r.opts.FatalWarnings && runnerFindings[i].Severity == Warning {
			runnerFindings[i].Severity = Error
		}
	}
	r.rep.Findings = append(r.rep.Findings, runnerFindings...)
	return nil
}

// needAdded reports whether a check that runs needs the added layers.
func (r *runner) needAdded() bool {
	for _, c := range r.checks {
		if !slices.Contains(r.opts.Skip, c.Name()) && c.Needs()&NeedAdded != 0 {
			return true
		}
	}
	return false
}

// skipReason says why c does not run ("" when it runs), naming fields by
// their specification names.
func (r *runner) skipReason(c Check) string {
	switch {
	case slices.Contains(r.opts.Skip, c.Name()):
		return "skipped (preflight.skip)"
	case c.Needs()&NeedBase != 0 && r.t.Base == nil && r.t.Require == nil:
		return "no base image given (base / preflight.requireBase)"
	case c.Needs()&NeedBaseTree != 0 && r.t.BaseTree == nil:
		return "the base's tree is not known (no base index: build indexes the base; a base given to preflight uses the index a build cached)"
	case c.Needs()&NeedAdded != 0 && r.t.FirstAdded < 0:
		return "added layers unknown: no base, no ostree.final-diffid label, no oslayer history"
	}
	return ""
}

// runCheck runs c (unless skipped) and records its result and findings.
func (r *runner) runCheck(ctx context.Context, c Check) error {
	if c.Needs()&notHere != 0 {
		return nil // the other half of a build runs it (see Stages)
	}
	cr := CheckResult{Name: c.Name()}
	if reason := r.skipReason(c); reason != "" {
		cr.Status, cr.Reason = "skipped", reason
		r.rep.Checks = append(r.rep.Checks, cr)
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	fs, err := c.Run(ctx, r.t)
	if err != nil {
		return fmt.Errorf("check %s on %s: %w", c.Name(), r.ref, err)
	}
	cr.Status = "passed"
	for i := range fs {
		f := &fs[i]
		f.Check = orDefault(f.Check, c.Name())
		if f.Severity == "" {
			f.Severity = c.Severity()
		}
		if r.opts.FatalWarnings && f.Severity == Warning {
			f.Severity = Error
		}
		switch {
		case f.Severity == Error:
			cr.Status = "failed"
		case f.Severity == Warning && cr.Status == "passed":
			cr.Status = "warned"
		}
	}
	cr.Findings = len(fs)
	r.log.Debug("preflight: check done", "image", r.ref, "check", c.Name(), "status", cr.Status, "findings", len(fs))
	r.rep.Findings = append(r.rep.Findings, fs...)
	r.rep.Checks = append(r.rep.Checks, cr)
	return nil
}

// tally counts the findings by severity and sets the result.
func (rep *Report) tally() {
	for _, f := range rep.Findings {
		switch f.Severity {
		case Error:
			rep.Errors++
		case Warning:
			rep.Warnings++
		default:
			rep.Infos++
		}
	}
	rep.Result = "passed"
	if rep.Errors > 0 {
		rep.Result = "failed"
	}
}
