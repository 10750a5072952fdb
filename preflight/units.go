package preflight

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"path"
	"strings"

	"github.com/oslayer/oslayer/render/systemd"
)

// unitsCheck: every unit file and drop-in in the added layers parses as a
// systemd unit file, and enablement links (*.wants/, *.requires/) point to
// units that exist in the added layers or are plausibly shipped by the base.
type unitsCheck struct{}

func (unitsCheck) Name() string       { return "units" }
func (unitsCheck) Severity() Severity { return Error }
func (unitsCheck) Needs() Needs       { return NeedAdded }

var unitSuffixes = []string{".service", ".socket", ".target", ".timer", ".path", ".mount", ".automount", ".swap", ".slice", ".scope", ".device"}

func hasUnitSuffix(name string) bool {
	for _, s := range unitSuffixes {
		if strings.HasSuffix(name, s) && len(name) > len(s) {
			return true
		}
	}
	return false
}

// unitRel returns p relative to a unit directory.
func unitRel(p string) (string, bool) {
	for _, d := range systemd.UnitDirs() {
		if r, ok := strings.CutPrefix(p, strings.TrimPrefix(d, "/")+"/"); ok {
			return r, true
		}
	}
	return "", false
}

// isUnitPath reports whether p is a unit file or drop-in in a unit directory.
func isUnitPath(p string) bool {
	r, ok := unitRel(p)
	if !ok {
		return false
	}
	dir, name := path.Split(r)
	dir = strings.TrimSuffix(dir, "/")
	switch {
	case dir == "":
		return hasUnitSuffix(name)
	case !strings.Contains(dir, "/") && strings.HasSuffix(dir, ".d"):
		return strings.HasSuffix(name, ".conf")
	}
	return false
}

// ParseUnit checks that data is a systemd unit file: [Section] headers,
// KEY=VALUE lines (inside a section), comments (# ;), blank lines and
// backslash continuation lines.
func ParseUnit(data []byte) error {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	section := ""
	cont := false
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimRight(sc.Text(), "\r")
		trim := strings.TrimSpace(line)
		if cont {
			// systemd skips comment lines inside a continuation.
			if !strings.HasPrefix(trim, "#") && !strings.HasPrefix(trim, ";") {
				cont = strings.HasSuffix(trim, "\\")
			}
			continue
		}
		switch {
		case trim == "" || strings.HasPrefix(trim, "#") || strings.HasPrefix(trim, ";"):
		case strings.HasPrefix(trim, "["):
			if !strings.HasSuffix(trim, "]") || len(trim) < 3 || strings.ContainsAny(trim[1:len(trim)-1], "[]") {
				return fmt.Errorf("line %d: invalid section header %q", n, trim)
			}
			section = trim[1 : len(trim)-1]
		default:
			k, _, ok := strings.Cut(trim, "=")
			k = strings.TrimSpace(k)
			switch {
			case !ok:
				return fmt.Errorf("line %d: %q is not KEY=VALUE", n, trim)
			case k == "" || strings.ContainsAny(k, " \t"):
				return fmt.Errorf("line %d: invalid key %q", n, k)
			case section == "":
				return fmt.Errorf("line %d: %s= before any [Section]", n, k)
			}
			cont = strings.HasSuffix(trim, "\\")
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if section == "" && len(bytes.TrimSpace(data)) > 0 {
		return fmt.Errorf("no [Section]")
	}
	return nil
}

// templateOf returns "foo@.service" for "foo@bar.service", else "".
func templateOf(name string) string {
	at := strings.Index(name, "@")
	dot := strings.LastIndex(name, ".")
	if at < 0 || dot < at || at+1 == dot {
		return ""
	}
	return name[:at+1] + name[dot:]
}

// Run checks every unit file and enablement link the added layers hold.
func (c unitsCheck) Run(ctx context.Context, t *Target) ([]Finding, error) {
	var out []Finding
	units := addedUnits(t.Added)
	for _, l := range t.Added {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		for i := range l.Entries {
			e := &l.Entries[i]
			if e.Whiteout || e.Opaque || e.IsDir() {
				continue
			}
			if f, ok := c.entry(l, e, units); ok {
				out = append(out, f)
			}
		}
	}
	return out, nil
}

// addedUnits are the unit names the added layers hold in a unit
// directory.
func addedUnits(added []*LayerContent) map[string]bool {
	units := map[string]bool{}
	for _, l := range added {
		for i := range l.Entries {
			e := &l.Entries[i]
			if e.Whiteout || e.Opaque || e.IsDir() {
				continue
			}
			if r, ok := unitRel(e.Path); ok && !strings.Contains(r, "/") && hasUnitSuffix(r) {
				units[r] = true
			}
		}
	}
	return units
}

// entry checks entry e of layer l under a unit directory: a unit file
// must parse, an enablement link (in a .wants or .requires directory)
// must name its unit; ok reports a finding.
func (c unitsCheck) entry(l *LayerContent, e *Entry, units map[string]bool) (Finding, bool) {
	r, ok := unitRel(e.Path)
	if !ok {
		return Finding{}, false
	}
	if isUnitPath(e.Path) && e.IsReg() {
		return c.unitFile(l, e)
	}
	dir, name := path.Split(r)
	dir = strings.TrimSuffix(dir, "/")
	if strings.Contains(dir, "/") || !(strings.HasSuffix(dir, ".wants") || strings.HasSuffix(dir, ".requires")) {
		return Finding{}, false
	}
	if msg := c.checkLink(e, name, units); msg != "" {
		return l.Finding(c, Warning, e.Path, msg), true
	}
	return Finding{}, false
}

// unitFile checks that unit file e parses as systemd reads it.
func (c unitsCheck) unitFile(l *LayerContent, e *Entry) (Finding, bool) {
	f, ok := l.Files[e.Path]
	if !ok || f.Truncated {
		return l.Finding(c, Warning, e.Path, "unit file too large to check (over the scan limit)"), true
	}
	if err := ParseUnit(f.Data); err != nil {
		return l.Finding(c, Error, e.Path, fmt.Sprintf("not a valid systemd unit file: %v; systemd ignores it", err)), true
	}
	return Finding{}, false
}

// checkLink checks one enablement link; "" means fine.
func (unitsCheck) checkLink(e *Entry, name string, units map[string]bool) string {
	if !hasUnitSuffix(name) {
		return fmt.Sprintf("enablement link %q is not named like a unit", name)
	}
	if !e.IsSymlink() {
		if e.IsReg() {
			return "enablement entry is a regular file, not a symlink to the unit: systemd treats it as a unit copy; use a symlink"
		}
		return ""
	}
	tgt := e.Linkname
	if !path.IsAbs(tgt) {
		tgt = path.Join("/", path.Dir(e.Path), tgt)
	}
	tgt = strings.TrimPrefix(path.Clean(tgt), "/")
	tname := path.Base(tgt)
	if tname != name && tname != templateOf(name) {
		return fmt.Sprintf("enablement link %s points to %s, a unit of another name", name, e.Linkname)
	}
	if units[tname] {
		return ""
	}
	tdir := path.Dir(tgt)
	if tdir == "usr/lib/systemd/system" || tdir == "lib/systemd/system" {
		return "" // plausibly shipped by the base
	}
	if tdir == "etc/systemd/system" {
		return fmt.Sprintf("enables %s, but no added layer has etc/systemd/system/%s and base images do not ship units in /etc: add the unit or drop the link", tname, tname)
	}
	return fmt.Sprintf("enables %s via %s, outside the unit directories and not in the added layers", tname, e.Linkname)
}
