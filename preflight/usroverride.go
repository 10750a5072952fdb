package preflight

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/oslayer/oslayer/render"
)

// usrOverrideCheck: a file or link the added layers write under usr/ at a
// path where the base image has one replaces the OS's own file, which an
// OS update then no longer changes. It reads the base's root tree
// (Target.BaseTree, the base index a build made), never a base layer blob.
// Findings are warnings, errors with Options.DenyUsrOverride. oslayer's own
// files (a path with an "oslayer" component or file name prefix) are not
// findings: a base built by oslayer has them too.
type usrOverrideCheck struct{}

func (usrOverrideCheck) Name() string       { return "usr-override" }
func (usrOverrideCheck) Severity() Severity { return Warning }
func (usrOverrideCheck) Needs() Needs       { return NeedAdded | NeedBaseTree }

func ownedByOslayer(p string) bool {
	for _, c := range strings.Split(p, "/") {
		if c == "oslayer" || strings.HasPrefix(c, "oslayer-") || strings.HasPrefix(c, "oslayer.") {
			return true
		}
	}
	return false
}

func (c usrOverrideCheck) Run(ctx context.Context, t *Target) ([]Finding, error) {
	sev := c.Severity()
	if t.Options != nil && t.Options.DenyUsrOverride {
		sev = Error
	}
	var out []Finding
	for _, l := range t.Added {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		for i := range l.Entries {
			e := &l.Entries[i]
			if e.Whiteout || e.Opaque || e.IsDir() || !strings.HasPrefix(e.Path, "usr/") || ownedByOslayer(e.Path) {
				continue
			}
			fi, err := fs.Lstat(t.BaseTree, e.Path)
			if err != nil || fi.IsDir() {
				continue
			}
			out = append(out, l.Finding(c, sev, e.Path, fmt.Sprintf("replaces the base image's %s /%s: an OS update no longer changes it", render.BaseFileKind(fi), path.Clean(e.Path))))
		}
	}
	return out, nil
}
