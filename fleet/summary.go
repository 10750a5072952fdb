package fleet

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/oslayer/oslayer/pipeline"
)

// Summary is the result of a fleet run, written by --summary as JSON.
type Summary struct {
	// Shard is "I/N" when the run built a slice of the plan.
	Shard   string  `json:"shard,omitempty"`
	Total   int     `json:"total"`
	Built   int     `json:"built"`
	Failed  int     `json:"failed"`
	Seconds float64 `json:"seconds"`
	// BytesUploaded is the sum over pools.
	BytesUploaded int64 `json:"bytesUploaded"`
	// Shared is what was resolved once for several pools.
	Shared []Shared     `json:"shared,omitempty"`
	Pools  []PoolResult `json:"pools"`
}

// PoolResult is one pool's outcome.
type PoolResult struct {
	Cluster string `json:"cluster"`
	Pool    string `json:"pool"`
	// Path is the pool's place in the plan.
	Path   string `json:"path"`
	Target string `json:"target"`
	// Image is the digested reference ("REG/REPO@sha256:...").
	Image        string `json:"image,omitempty"`
	Digest       string `json:"digest,omitempty"`
	InputsDigest string `json:"inputsDigest,omitempty"`
	BaseDigest   string `json:"baseDigest,omitempty"`
	// SameImageAs is the pool (its place in the plan) whose image this
	// pool shares: same repository, content, base and options; only the
	// tag was moved.
	SameImageAs string `json:"sameImageAs,omitempty"`
	// Signature is the cosign signature tag, when signed.
	Signature string `json:"signature,omitempty"`
	// Platforms are the images of a multi-platform pool (its Image and
	// Digest are the OCI index's).
	Platforms     []PlatformResult `json:"platforms,omitempty"`
	BytesUploaded int64            `json:"bytesUploaded"`
	Phases        []pipeline.Phase `json:"phases"`
	Seconds       float64          `json:"seconds"`
	Warnings      []string         `json:"warnings,omitempty"`
	// Status is "built" or "failed".
	Status string `json:"status"`
	// Step is where a failed build stopped, Kind whether retrying may help
	// (KindInput, KindRun), Error why.
	Step  string `json:"step,omitempty"`
	Kind  string `json:"kind,omitempty"`
	Error string `json:"error,omitempty"`
}

func (r *PoolResult) fill(b *pipeline.Result) {
	r.Status = "built"
	if b == nil {
		return
	}
	if b.IsIndex() {
		r.fillIndex(b)
		return
	}
	r.Image, r.InputsDigest, r.BytesUploaded, r.Phases = b.Image, b.InputsDigest, b.BytesUploaded, b.Phases
	if b.Digest.Hex != "" {
		r.Digest = b.Digest.String()
	}
	if b.Base.Digest.Hex != "" {
		r.BaseDigest = b.Base.Digest.String()
	}
	if b.Report != nil {
		r.Warnings = append(r.Warnings, b.Report.Warnings...)
	}
	r.Warnings = append(r.Warnings, b.Warnings...)
	if v, ok := b.Stages[pipeline.StepSign].(*pipeline.SignResult); ok {
		r.Signature = v.SignatureTag
	}
}

// PlatformResult is one platform's image of a multi-platform pool.
type PlatformResult struct {
	Platform   string `json:"platform"`
	Digest     string `json:"digest,omitempty"`
	BaseDigest string `json:"baseDigest,omitempty"`
	Signature  string `json:"signature,omitempty"`
}

// fillIndex records a multi-platform build: the index is the pool's
// image; uploaded bytes and phases add up over the platforms.
func (r *PoolResult) fillIndex(m *pipeline.Result) {
	r.Image = m.Image
	if m.Digest.Hex != "" {
		r.Digest = m.Digest.String()
	}
	r.BytesUploaded, r.Phases = 0, nil
	for _, p := range m.Platforms {
		var one PoolResult
		one.fill(p)
		r.BytesUploaded += one.BytesUploaded
		r.Phases = append(r.Phases, one.Phases...)
		r.Warnings = append(r.Warnings, one.Warnings...)
		if r.InputsDigest == "" {
			r.InputsDigest = one.InputsDigest
		}
		r.Platforms = append(r.Platforms, PlatformResult{Platform: p.Platform, Digest: one.Digest, BaseDigest: one.BaseDigest, Signature: one.Signature})
	}
	r.Phases = append(r.Phases, m.Phases...)
	if v, ok := m.Stages[pipeline.StepSign].(*pipeline.SignResult); ok {
		r.Signature = v.SignatureTag
	}
}

func (r *PoolResult) fail(step, kind string, err error) {
	r.Status, r.Step, r.Kind, r.Error = "failed", step, kind, err.Error()
}

func (s *Summary) tally() {
	s.Built, s.Failed, s.BytesUploaded = 0, 0, 0
	for _, p := range s.Pools {
		if p.Status == "built" {
			s.Built++
		} else {
			s.Failed++
		}
		s.BytesUploaded += p.BytesUploaded
	}
	sort.Slice(s.Shared, func(i, j int) bool { return s.Shared[i].Ref < s.Shared[j].Ref })
}

// ExitCode is 0 when every pool was built, 1 when some pool failed to run
// (registry, credentials, cancelled: retrying may help), else 2: every
// failed pool was refused as input (a field, a source that does not parse,
// a preflight check: retrying won't help), the rule for bad input.
func (s *Summary) ExitCode() int {
	code := 0
	for _, p := range s.Pools {
		switch {
		case p.Status == "built":
		case p.Kind == KindRun:
			return 1
		default:
			code = 2
		}
	}
	return code
}

// WriteJSON writes the summary as indented JSON.
func (s *Summary) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(s)
}

// WriteTable writes one line per pool and a total.
func (s *Summary) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CLUSTER\tPOOL\tSTATUS\tUPLOADED\tTIME\tIMAGE / ERROR")
	for _, p := range s.Pools {
		what := p.Image
		status := p.Status
		if p.Status != "built" {
			status = "failed (" + p.Kind + ")"
			what = stepError(p.Step, p.Error)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d B\t%.2fs\t%s\n", p.Cluster, p.Pool, status, p.BytesUploaded, p.Seconds, what)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	shard := ""
	if s.Shard != "" {
		shard = " (shard " + s.Shard + ")"
	}
	_, err := fmt.Fprintf(w, "%d pools%s: %d built, %d failed; uploaded %d B in %.2fs\n", s.Total, shard, s.Built, s.Failed, s.BytesUploaded, s.Seconds)
	return err
}

// stepError is the first line of err, starting with its step.
func stepError(step, err string) string {
	if !strings.HasPrefix(err, step+": ") {
		err = step + ": " + err
	}
	return firstLine(err)
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// progress reports finished pools: a line each, or one self-updating
// status line (done, failed, total, rate) on a terminal, where failures
// still get a line of their own.
type progress struct {
	w        io.Writer
	terminal bool
	total    int
	start    time.Time

	mu           sync.Mutex
	built, fails int
}

func newProgress(w io.Writer, terminal bool, total int) *progress {
	return &progress{w: w, terminal: terminal, total: total, start: time.Now()}
}

func (p *progress) done(r *PoolResult) {
	if p == nil || p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if r.Status == "built" {
		p.built++
	} else {
		p.fails++
	}
	n := p.built + p.fails
	line := fmt.Sprintf("[%d/%d] %s/%s ", n, p.total, r.Cluster, r.Pool)
	if r.Status == "built" {
		line += fmt.Sprintf("built %s (%d B uploaded, %.2fs)", r.Image, r.BytesUploaded, r.Seconds)
	} else {
		line += "failed: " + stepError(r.Step, r.Error)
	}
	if !p.terminal {
		fmt.Fprintln(p.w, line)
		return
	}
	if r.Status != "built" {
		fmt.Fprintf(p.w, "\r\033[K%s\n", line)
	}
	rate := float64(n) / time.Since(p.start).Seconds()
	fmt.Fprintf(p.w, "\r\033[Kfleet: %d/%d done, %d failed, %.1f pools/s", n, p.total, p.fails, rate)
}

func (p *progress) finish() {
	if p != nil && p.w != nil && p.terminal {
		fmt.Fprintln(p.w)
	}
}

// WriteTektonResults writes the Tekton results Tekton Chains reads into
// dir: IMAGES (every built image, "REPO@sha256:...", one per line, each
// once), IMAGE_URL and IMAGE_DIGEST (the first of them: Chains takes them
// as the one image of a task that built a single one). Failed pools are
// not listed.
func (s *Summary) WriteTektonResults(dir string) error {
	var images []string
	seen := map[string]bool{}
	for _, p := range s.Pools {
		if p.Status != "built" || p.Image == "" || seen[p.Image] {
			continue
		}
		seen[p.Image] = true
		images = append(images, p.Image)
	}
	url, digest := "", ""
	if len(images) > 0 {
		url, digest, _ = strings.Cut(images[0], "@")
	}
	for name, v := range map[string]string{"IMAGES": strings.Join(images, "\n"), "IMAGE_URL": url, "IMAGE_DIGEST": digest} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o644); err != nil {
			return err
		}
	}
	return nil
}
