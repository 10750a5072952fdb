package preflight

import (
	"fmt"
	"path"
	"sort"
	"strings"
)

// kernels tracks the kernels of the image as the added layers are read:
// release → where it was added ("" for the base's). An ostree image must
// have exactly one.
type kernels struct {
	base string
	at   map[string]kernelAt
}

type kernelAt struct{ layer, path string }

// newKernels starts from the base's kernel (its ostree.linux label).
func newKernels(t *Target) *kernels {
	k := &kernels{base: t.Labels[LabelOstreeLinux], at: map[string]kernelAt{}}
	if _, bc, _ := t.base(); bc != nil && bc.Config.Labels[LabelOstreeLinux] != "" {
		k.base = bc.Config.Labels[LabelOstreeLinux]
	}
	if k.base != "" {
		k.at[k.base] = kernelAt{}
	}
	return k
}

// removed notes a whiteout of p: a whited-out usr/lib/modules/RELEASE
// removes that kernel.
func (k *kernels) removed(p string) {
	if kv, ok := strings.CutPrefix(p, "usr/lib/modules/"); ok && !strings.Contains(kv, "/") {
		delete(k.at, kv)
	}
}

// added notes a usr/lib/modules/RELEASE/vmlinuz of layer l.
func (k *kernels) added(l *LayerContent, e *Entry) {
	kv, ok := strings.CutPrefix(e.Path, "usr/lib/modules/")
	if ok && path.Base(e.Path) == "vmlinuz" && path.Dir(kv) != "." && !strings.Contains(path.Dir(kv), "/") {
		k.at[path.Dir(kv)] = kernelAt{layer: l.Digest.String(), path: e.Path}
	}
}

// finding reports more than one kernel, at the first added one.
func (k *kernels) finding() (Finding, bool) {
	if len(k.at) <= 1 {
		return Finding{}, false
	}
	rels := make([]string, 0, len(k.at))
	for r := range k.at {
		rels = append(rels, r)
	}
	sort.Strings(rels)
	var f Finding
	for _, r := range rels {
		if k.at[r].layer != "" {
			f = Finding{Layer: k.at[r].layer, Path: k.at[r].path}
			break
		}
	}
	f.Rule = "kernel"
	f.Message = fmt.Sprintf("the image has %d kernels under usr/lib/modules (%s): exactly one is allowed; remove the base kernel (usr/lib/modules/%s) when installing another", len(rels), strings.Join(rels, ", "), k.base)
	return f, true
}
