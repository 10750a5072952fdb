package preflight

import (
	"context"
	"fmt"
)

// Default layer count limits of the image as nodes and clients pull it.
// Rechunked bases (chunkah, rpm-ostree compose build-chunked-oci) carry up
// to about 400 layers, which bootc and rpm-ostree pull; other clients fail
// earlier.
const (
	// DefaultWarnLayers: above this many layers a warning (docker pull
	// fails at 128 layers).
	DefaultWarnLayers = 127
	// DefaultMaxLayers: at or above this many layers an error
	// (containers-storage cannot store about 500 layers: overlay's mount
	// options exceed a page).
	DefaultMaxLayers = 500
)

// LayerCount is the final image's layer count against the limits it was
// checked with, part of every [Report].
type LayerCount struct {
	Layers int `json:"layers"`
	// History is the number of non-empty config history entries.
	History int `json:"history"`
	// WarnAbove and ErrorAt are the limits (preflight.warnLayers, preflight.maxLayers).
	WarnAbove int `json:"warnAbove"`
	ErrorAt   int `json:"errorAt"`
}

// limits returns the layer limits of o, defaults filled in.
func (o *Options) limits() (warn, max int) {
	warn, max = o.WarnLayers, o.MaxLayers
	if warn <= 0 {
		warn = DefaultWarnLayers
	}
	if max <= 0 {
		max = DefaultMaxLayers
	}
	return warn, max
}

// countLayers returns the layer count of t against its options' limits.
func countLayers(t *Target) LayerCount {
	warn, max := t.Options.limits()
	nh := 0
	for _, h := range t.Config.History {
		if !h.EmptyLayer {
			nh++
		}
	}
	return LayerCount{Layers: len(t.Manifest.Layers), History: nh, WarnAbove: warn, ErrorAt: max}
}

// layersCheck: the final layer count stays within the limits (warning
// above preflight.warnLayers, error at or above preflight.maxLayers), and the config has
// one non-empty history entry per layer (bootc pairs them).
type layersCheck struct{}

func (layersCheck) Name() string       { return "layers" }
func (layersCheck) Severity() Severity { return Error }
func (layersCheck) Needs() Needs       { return 0 }

func (c layersCheck) Run(_ context.Context, t *Target) ([]Finding, error) {
	var out []Finding
	lc := countLayers(t)
	nl := lc.Layers
	if nd := len(t.Config.RootFS.DiffIDs); nd != nl {
		out = append(out, Finding{Rule: "diff-ids", Message: fmt.Sprintf("manifest has %d layers but config rootfs.diff_ids has %d", nl, nd)})
	}
	switch {
	case lc.History < nl:
		out = append(out, Finding{Rule: "history", Message: fmt.Sprintf("config history has %d non-empty entries for %d layers: bootc refuses it (\"Truncated history\"); add a history entry for every layer", lc.History, nl)})
	case lc.History > nl:
		out = append(out, Finding{Rule: "history", Severity: Warning, Message: fmt.Sprintf("config history has %d non-empty entries for %d layers: tools that pair history entries with layers describe the wrong layers; mark entries without a layer empty_layer", lc.History, nl)})
	}
	switch {
	case nl >= lc.ErrorAt:
		out = append(out, Finding{Rule: "count", Field: "preflight.maxLayers", Message: fmt.Sprintf("image has %d layers, at or above the limit of %d (preflight.maxLayers): containers-storage cannot store it; use a base with fewer layers (rechunk it with a lower maximum)", nl, lc.ErrorAt)})
	case nl > lc.WarnAbove:
		out = append(out, Finding{Rule: "count", Severity: Warning, Field: "preflight.warnLayers", Message: fmt.Sprintf("image has %d layers, more than %d (preflight.warnLayers): docker pull and other clients limited to 127 layers fail on it; bootc and rpm-ostree pull it", nl, lc.WarnAbove)})
	}
	return out, nil
}
