package render

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/oslayer/oslayer/sources/model"
)

// Report accounts for every input item of a render: what was baked into
// which layer, what must be delivered at runtime (and why), what needs a
// package stage, the kernel arguments and the warnings.
type Report struct {
	// Baked lists every entry oslayer writes, in tree order: input items
	// and what oslayer generates for them (enablement links, the /var
	// mechanism, kernel arguments, the ownership manifest).
	Baked []Baked `json:"baked"`
	// Units says what was done for each unit.
	Units []UnitReport `json:"units,omitempty"`
	// Runtime lists items that are not part of the image.
	Runtime []model.Runtime `json:"runtime,omitempty"`
	// Packages need a package stage (see Result.Packages).
	Packages   []string `json:"packages,omitempty"`
	KernelArgs []string `json:"kernelArgs,omitempty"`
	Warnings   []string `json:"warnings,omitempty"`
	// FirstBoot lists the enablement links ("PATH -> TARGET") that the
	// presets of a first boot add to the image (enable-only preset-all of
	// the base with the layers); only computed when the base tree is known.
	FirstBoot []string `json:"firstBoot,omitempty"`
}

// Baked is one entry of the image.
type Baked struct {
	// Path is the node path the configuration asked for.
	Path string `json:"path"`
	// StoredAt is the path inside the image when it differs from Path
	// (content under /var and its aliases /opt, /usr/local, /root, /home,
	// /srv and /mnt is kept under /usr/lib/oslayer/var and materialised on
	// the node).
	StoredAt string `json:"storedAt,omitempty"`
	Type     string `json:"type"`
	// Mode is octal, e.g. "0644".
	Mode   string `json:"mode"`
	UID    int    `json:"uid"`
	GID    int    `json:"gid"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256,omitempty"`
	Target string `json:"target,omitempty"`
	// FromImage is the pinned image an imageRef file was read from.
	FromImage string `json:"fromImage,omitempty"`
	// Secret marks baked secretRef content (--bake-secrets).
	Secret bool `json:"secret,omitempty"`
	// Ignition is the SHA-256 of the MachineConfig file entry
	// (model.File.Ignition).
	Ignition string `json:"ignition,omitempty"`
	// Generated marks entries oslayer derives (links, tmpfiles rules, ...)
	// rather than copies from an input item; Source then names the item it
	// was derived from, or Document "oslayer".
	Generated bool         `json:"generated,omitempty"`
	Layer     string       `json:"layer"`
	Source    model.Origin `json:"source"`
}

// UnitReport says what Render did for one unit.
type UnitReport struct {
	Name string `json:"name"`
	// Written is set when the unit file itself is baked.
	Written bool     `json:"written,omitempty"`
	DropIns []string `json:"dropIns,omitempty"`
	// Enablement: "enabled", "disabled", "masked" or "" (left alone).
	Enablement string `json:"enablement,omitempty"`
	// Links are the enablement links created ("PATH -> TARGET").
	Links []string `json:"links,omitempty"`
	// Removed are the enablement links (and the directories they leave
	// empty) a disabled unit's `systemctl disable` removes from the base
	// and this layer: the image removes the base's with whiteouts.
	Removed []string `json:"removed,omitempty"`
	// InstallFrom says where the enabled unit's file came from: "unit"
	// (the configuration writes it, or the template of the instance),
	// "base" (Request.Base ships it), "missing" (Request.Base is given and
	// neither ships it: no links, as systemctl enable fails), or
	// "fallback" (no base tree given and the configuration does not have
	// it: WantedBy=multi-user.target). Drop-ins add to its [Install].
	InstallFrom string `json:"installFrom,omitempty"`
	// StartedBy is StartTarget when that target starts the unit at boot
	// (started on apply by the node agent, but no enablement links).
	StartedBy string       `json:"startedBy,omitempty"`
	Source    model.Origin `json:"source"`
}

// Summary writes a short human summary of r, its warnings last as
// "warning: ..." lines.
func (r *Result) Summary(w io.Writer) {
	r.SummaryWarn(w, func(msg string) { fmt.Fprintf(w, "warning: %s\n", msg) })
}

// SummaryWarn writes the summary of r to w and hands each warning to warn
// (a command prints them on stderr).
func (r *Result) SummaryWarn(w io.Writer, warn func(string)) {
	rep := r.Report
	if rep == nil {
		rep = &Report{}
	}
	var files, links, dirs, whiteouts int
	for _, b := range rep.Baked {
		switch b.Type {
		case "file":
			files++
		case "dir":
			dirs++
		case "whiteout":
			whiteouts++
		default:
			links++
		}
	}
	docs := "documents"
	if len(r.Inputs) == 1 {
		docs = "document"
	}
	fmt.Fprintf(w, "inputs: %d %s (%s)\n", len(r.Inputs), docs, r.InputsDigest)
	fmt.Fprintf(w, "baked: %d files, %d directories, %d links; %d units\n", files, dirs, links, len(rep.Units))
	if whiteouts > 0 {
		fmt.Fprintf(w, "removed from the base (whiteouts): %d\n", whiteouts)
	}
	for _, l := range r.Layers {
		fmt.Fprintf(w, "layer %-8s %s  %d entries, %s  %s\n", l.Name, l.Digest, l.Files, humanSize(l.Size), l.CreatedBy)
	}
	if len(rep.Runtime) > 0 {
		fmt.Fprintf(w, "runtime-delivered (not in the image): %d\n", len(rep.Runtime))
		rt := append([]model.Runtime(nil), rep.Runtime...)
		sort.SliceStable(rt, func(i, j int) bool { return rt[i].Item < rt[j].Item })
		for _, x := range rt {
			fmt.Fprintf(w, "  %s: %s\n", x.Item, x.Reason)
		}
	}
	if len(r.KernelArgs) > 0 {
		fmt.Fprintf(w, "kernel arguments: %s\n", strings.Join(r.KernelArgs, " "))
	}
	if len(r.Packages) > 0 {
		fmt.Fprintf(w, "needs a package stage: %s\n", strings.Join(r.Packages, ", "))
	}
	for _, x := range rep.Warnings {
		warn(x)
	}
}

func humanSize(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
