// Package preflight checks a candidate OS image before anything is
// published: that it still carries its ostree-native base, boots, targets
// the right platform and version, has a format nodes can pull, and that the
// layers added on top of the base hold nothing that ostree would drop, break
// on, or that must not ship (secrets, broken units, oversized content).
//
// Checks read only manifests, configs and the added layers: the layers after
// the base (by digest), or, when no base is given, the layers after the one
// whose diff_id is the config label ostree.final-diffid. Base layer blobs are
// never downloaded. Every added layer is streamed once (see [Scan]) and the
// entries and small file contents it yields are shared by all content checks.
//
// Run executes the checks on a [Target] and returns a [Report]:
//
//	rep, err := preflight.Run(ctx, preflight.Target{Image: img, Base: base}, preflight.Options{})
//	if err != nil { ... }        // the checks could not run
//	if rep.Errors > 0 { ... }    // the image must not be published
//
// [Stage] wraps Run as a build.Stage for `oslayer build`.
//
// # Adding a check
//
// A check is one file and one registration line. Write a type implementing
// [Check] in its own file:
//
//	// check_motd.go
//	type motdCheck struct{}
//
//	func (motdCheck) Name() string       { return "motd" }
//	func (motdCheck) Severity() Severity { return Warning }
//	func (motdCheck) Needs() Needs       { return NeedAdded }
//	func (c motdCheck) Run(ctx context.Context, t *Target) ([]Finding, error) {
//		var out []Finding
//		for _, l := range t.Added {
//			for _, e := range l.Entries {
//				if e.Path == "etc/motd" {
//					out = append(out, l.Finding(c, c.Severity(), e.Path, "etc/motd is replaced on every boot; use etc/motd.d/"))
//				}
//			}
//		}
//		return out, nil
//	}
//
// and add `motdCheck{},` to the list in [Default] (registry.go). Checks whose
// Needs are not met by the target (no base, no added layers) are reported as
// skipped, not run.
package preflight

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/oslayer/oslayer/assemble"
)

// Severity of a finding.
type Severity string

// Severities, from most to least serious.
const (
	Error   Severity = "error"
	Warning Severity = "warning"
	Info    Severity = "info"
)

// Needs says what a check reads besides the candidate's manifest and config.
type Needs uint8

// What a check may need.
const (
	// NeedBase: the check compares against a base image (--base / --require-base).
	NeedBase Needs = 1 << iota
	// NeedAdded: the check reads the entries of the added layers.
	NeedAdded
	// NeedBaseTree: the check reads the base's root tree (Target.BaseTree).
	NeedBaseTree
	// NeedWritten: the check is about the image as written to the target
	// (its layers as the registry lists them by digest), so in a build it
	// runs after the write (see Stages); every other check runs before
	// anything is written.
	NeedWritten
)

// Check is one preflight check.
type Check interface {
	// Name is the check's stable name (used by --skip and in findings).
	Name() string
	// Severity is the default severity of the check's findings.
	Severity() Severity
	// Needs says what the check reads besides manifest and config.
	Needs() Needs
	// Run returns the check's findings; an error means it could not run.
	Run(ctx context.Context, t *Target) ([]Finding, error)
}

// Finding is one problem (or note) found by a check.
type Finding struct {
	Check    string   `json:"check"`
	Severity Severity `json:"severity"`
	// Rule is a finer name inside the check (e.g. content's "var-log",
	// named like the matching `bootc container lint` lint).
	Rule string `json:"rule,omitempty"`
	// Layer is the digest of the layer the finding is about, if any.
	Layer string `json:"layer,omitempty"`
	// Path is the path inside the layer (no leading "/"), if any.
	Path    string `json:"path,omitempty"`
	Message string `json:"message"`
	// Field is the specification field the message names (arch, base,
	// preflight.maxLayers), spelled by its name; a front-end spells it
	// its own way (Text).
	Field string `json:"field,omitempty"`
}

// Target is what the checks look at.
type Target struct {
	// Image is the candidate (remote, OCI layout, or a build's in-memory image).
	Image v1.Image
	// Ref names the candidate in messages.
	Ref string
	// Base is the image the candidate was built on (optional): platform and
	// version are compared to it, and its layers must be a prefix.
	Base    v1.Image
	BaseRef string
	// Require is an image whose layers must also be a prefix of the
	// candidate (--require-base: the official image a customer base claims
	// to derive from). When Base is nil it also plays the base's role.
	Require    v1.Image
	RequireRef string
	// BaseTree is the base's root tree (the base index's FS a build made;
	// optional): which paths the base has, never read from layer blobs.
	BaseTree fs.FS

	// Filled by Run before the checks run: manifests and configs of the
	// candidate, the base and the required base; the index of the first
	// added layer (-1: unknown) and the scanned added layers; the options;
	// the candidate's labels (never nil).
	Manifest     *v1.Manifest
	MediaType    types.MediaType
	Config       *v1.ConfigFile
	BaseManifest *v1.Manifest
	BaseConfig   *v1.ConfigFile
	ReqManifest  *v1.Manifest
	ReqConfig    *v1.ConfigFile
	FirstAdded   int
	Added        []*LayerContent
	Options      *Options
	Labels       map[string]string
}

// base returns the manifest, config and name of "the base" for
// comparisons: Base, else Require.
func (t *Target) base() (*v1.Manifest, *v1.ConfigFile, string) {
	if t.BaseManifest != nil {
		return t.BaseManifest, t.BaseConfig, t.BaseRef
	}
	if t.ReqManifest != nil {
		return t.ReqManifest, t.ReqConfig, t.RequireRef
	}
	return nil, nil, ""
}

// DefaultMaxAddedBytes is the default budget of compressed added bytes (2 GiB).
const DefaultMaxAddedBytes int64 = 2 << 30

// Options configure a run. The zero value runs every Default check.
type Options struct {
	// Checks to run; nil means Default().
	Checks []Check
	// Skip names checks not to run.
	Skip []string
	// Arch is the architecture nodes have (e.g. "amd64"); empty: not checked.
	Arch string
	// ExpectVersion is the OS version the image must have; empty: not checked.
	ExpectVersion string
	// FatalWarnings turns warnings into errors.
	FatalWarnings bool
	// DenyUsrOverride makes the usr-override findings (added files that
	// replace a file of the base under /usr) errors.
	DenyUsrOverride bool
	// AllowSecrets are paths (or path.Match patterns) that may hold secrets.
	AllowSecrets []string
	// WarnLayers and MaxLayers are the layer count limits of the final
	// image: a warning above WarnLayers, an error at or above MaxLayers;
	// 0: DefaultWarnLayers, DefaultMaxLayers.
	WarnLayers, MaxLayers int
	// MaxAddedBytes is the budget of compressed added bytes; 0: DefaultMaxAddedBytes.
	MaxAddedBytes int64
	// Scan bounds the added-layer scan; zero values use the defaults.
	Scan ScanLimits
	// Log receives progress and warnings; nil discards.
	Log *slog.Logger

	// RequireBase and Open are used by Stages only: when RequireBase is
	// set, Open(ctx, RequireBase, platform of the built image) opens it
	// (without reading layer blobs) as the Target's Require; the written
	// half also opens the written image by digest with Open.
	RequireBase string
	Open        func(ctx context.Context, ref string, platform *v1.Platform) (v1.Image, error)
	// NoReadBack makes the written half check the assembled image instead
	// of opening the written one with Open: a registry keeps a manifest
	// under its digest only with exactly those bytes (it checks the
	// digest), so reading it back tells nothing new when the publisher
	// wrote it by that digest or found it there. A fleet sets it (two
	// requests fewer per pool); Open still opens RequireBase. Without it
	// the image is read back only when the publisher did not prove the
	// write (assemble.Published Found or Proven).
	NoReadBack bool

	// onlyWritten: the run is the written half of a build (see Stages),
	// after the content half reported on the added layers.
	onlyWritten bool
}

// CheckResult says how one check went.
type CheckResult struct {
	Name string `json:"name"`
	// Status is "passed", "failed" (an error finding), "warned", or "skipped".
	Status   string `json:"status"`
	Reason   string `json:"reason,omitempty"`
	Findings int    `json:"findings"`
}

// Report is the outcome of Run.
type Report struct {
	Image       string         `json:"image,omitempty"`
	Digest      string         `json:"digest,omitempty"`
	Base        string         `json:"base,omitempty"`
	RequireBase string         `json:"requireBase,omitempty"`
	AddedLayers []LayerSummary `json:"addedLayers"`
	// Layers is the final layer count against the limits.
	Layers   LayerCount    `json:"layerCount"`
	Checks   []CheckResult `json:"checks"`
	Findings []Finding     `json:"findings"`
	// Result is "passed" (no error) or "failed".
	Result   string `json:"result"`
	Errors   int    `json:"errors"`
	Warnings int    `json:"warnings"`
	Infos    int    `json:"infos"`
}

// LayerSummary describes one added layer in the report.
type LayerSummary struct {
	Index     int    `json:"index"`
	Digest    string `json:"digest"`
	DiffID    string `json:"diffID"`
	Size      int64  `json:"size"`
	MediaType string `json:"mediaType"`
	Entries   int    `json:"entries"`
}

// Passed reports whether no error was found.
func (r *Report) Passed() bool { return r.Errors == 0 }

func names(cs []Check) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name())
	}
	return out
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

func manifestConfig(img v1.Image, ref string) (*v1.Manifest, *v1.ConfigFile, error) {
	m, err := img.Manifest()
	if err != nil {
		return nil, nil, fmt.Errorf("%s: manifest: %w", ref, err)
	}
	c, err := img.ConfigFile()
	if err != nil {
		return nil, nil, fmt.Errorf("%s: config: %w", ref, err)
	}
	return m, c, nil
}

// LabelFinalDiffID marks the last layer of the OS itself.
const LabelFinalDiffID = "ostree.final-diffid"

// addedStart finds the index of the first added layer: after the base's
// layers when a base is given (the layers of the candidate whose digest is
// not a base layer are all scanned, see Scan), else after the layer whose
// diff_id is ostree.final-diffid, else (a rechunked base drops that label)
// the trailing layers whose history entries oslayer wrote. -1 when unknown.
func addedStart(t *Target) (int, []Finding) {
	if bm, _, _ := t.base(); bm != nil {
		return min(len(bm.Layers), len(t.Manifest.Layers)), nil
	}
	fd := t.Labels[LabelFinalDiffID]
	if fd == "" {
		if i := addedByHistory(t); i >= 0 {
			return i, nil
		}
		return -1, []Finding{{Check: "preflight", Severity: Warning, Rule: "added-layers", Field: "base",
			Message: "no base image given, no " + LabelFinalDiffID + " label and no layer oslayer added (config history): the added layers are unknown, content checks are skipped; give the base it was built on (base REF)"}}
	}
	for i, d := range t.Config.RootFS.DiffIDs {
		if d.String() == fd {
			return i + 1, nil
		}
	}
	return -1, []Finding{{Check: "preflight", Severity: Error, Rule: "added-layers", Field: "base",
		Message: fmt.Sprintf("label %s=%s names no layer of the image (rootfs.diff_ids): the OS layers were changed; compare with the base it was built on (base REF)", LabelFinalDiffID, fd)}}
}

// addedByHistory returns the index of the first of the trailing layers
// whose history comment oslayer wrote (build.HistoryCommentPrefix), when
// the image has the oslayer labels and one non-empty history entry per
// layer; -1 otherwise.
func addedByHistory(t *Target) int {
	if t.Labels[assemble.LabelBaseDigest] == "" {
		return -1
	}
	var hist []v1.History
	for _, h := range t.Config.History {
		if !h.EmptyLayer {
			hist = append(hist, h)
		}
	}
	if len(hist) != len(t.Manifest.Layers) {
		return -1
	}
	i := len(hist)
	for i > 0 && strings.HasPrefix(hist[i-1].Comment, assemble.HistoryCommentPrefix) {
		i--
	}
	if i == len(hist) {
		return -1
	}
	return i
}

// cleanPath turns a tar entry name into a clean relative path ("" for the root).
func cleanPath(name string) string {
	p := path.Clean("/" + name)
	return strings.TrimPrefix(p, "/")
}

// CheckKnown returns an error naming the checks there are when name is
// none of checks (nil: Default()): for --skip and its equivalents.
func CheckKnown(name string, checks []Check) error {
	if checks == nil {
		checks = Default()
	}
	for _, c := range checks {
		if c.Name() == name {
			return nil
		}
	}
	return fmt.Errorf("%q: no such check (have %s)", name, strings.Join(names(checks), ", "))
}
