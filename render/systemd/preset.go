package systemd

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
)

// presetDirs are the system preset directories, in systemd's order of
// precedence (runtime ones under /run are empty in an image).
var presetDirs = [...]string{
	"/etc/systemd/system-preset",
	"/usr/local/lib/systemd/system-preset",
	"/usr/lib/systemd/system-preset",
	"/lib/systemd/system-preset",
}

// PresetAction is what a preset rule says about a unit.
type PresetAction int

// Preset actions.
const (
	PresetEnable PresetAction = iota + 1
	PresetDisable
)

// PresetRule is one "enable PATTERN [INSTANCE...]" or "disable PATTERN"
// line of a preset file.
type PresetRule struct {
	Action PresetAction
	// Pattern is a shell glob (fnmatch without escapes) on unit names.
	Pattern string
	// Instances are the instances an "enable TEMPLATE INSTANCE..." line
	// names.
	Instances []string
	// File and Line say where the rule is.
	File string
	Line int
}

// Presets are the preset rules of a tree in the order systemd reads them.
type Presets []PresetRule

// LoadPresets reads the ".preset" files of the preset directories of a
// root tree the way systemd 252 does: a file name seen in a directory of
// higher precedence hides the same name in later ones, a file linked to
// /dev/null (or empty) hides it and contributes nothing, and the files are
// read in lexical order of their names. Lines are "enable PATTERN",
// "enable TEMPLATE INSTANCE..." and "disable PATTERN" (the rest of the line
// is the pattern); empty lines and lines starting with '#' or ';' are
// skipped, and other lines, or an "enable" with instances of a name that is
// not a template, are ignored (systemd warns).
func LoadPresets(fsys fs.FS) (Presets, error) {
	byName := map[string]string{} // file name -> node path ("" when masked)
	for _, dir := range presetDirs {
		entries, err := fs.ReadDir(fsys, rel(dir))
		if err != nil {
			continue
		}
		for _, e := range entries {
			n := e.Name()
			if !strings.HasSuffix(n, ".preset") {
				continue
			}
			if _, ok := byName[n]; ok {
				continue
			}
			p, err := resolve(fsys, dir+"/"+n)
			switch {
			case errors.Is(err, ErrMasked):
				byName[n] = ""
			case err != nil:
				byName[n] = "" // dangling: nothing to read
			default:
				byName[n] = p
			}
		}
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)
	var ps Presets
	for _, n := range names {
		p := byName[n]
		if p == "" {
			continue
		}
		data, err := readUnit(fsys, p)
		if err != nil {
			return nil, fmt.Errorf("preset file %w", err)
		}
		for i, line := range strings.Split(string(data), "\n") {
			if r, ok := parsePresetLine(line); ok {
				r.File, r.Line = p, i+1
				ps = append(ps, r)
			}
		}
	}
	return ps, nil
}

const whitespace = " \t\n\r"

// firstWord returns what follows word and whitespace at the start of s
// (systemd's first_word); ok is false when s does not start with the word.
func firstWord(s, word string) (rest string, ok bool) {
	rest, ok = strings.CutPrefix(s, word)
	if !ok {
		return "", false
	}
	if rest == "" {
		return "", true
	}
	if !strings.ContainsRune(whitespace, rune(rest[0])) {
		return "", false
	}
	return strings.TrimLeft(rest, whitespace), true
}

func parsePresetLine(line string) (PresetRule, bool) {
	l := strings.Trim(line, whitespace)
	if l == "" || l[0] == '#' || l[0] == ';' {
		return PresetRule{}, false
	}
	if rest, ok := firstWord(l, "enable"); ok {
		words, err := splitWords(rest, true)
		if err != nil || len(words) == 0 {
			if err != nil {
				return PresetRule{}, false
			}
			return PresetRule{Action: PresetEnable, Pattern: ""}, true
		}
		r := PresetRule{Action: PresetEnable, Pattern: words[0]}
		if len(words) > 1 {
			if Classify(words[0]) != Template {
				return PresetRule{}, false
			}
			r.Instances = words[1:]
		}
		return r, true
	}
	if rest, ok := firstWord(l, "disable"); ok {
		return PresetRule{Action: PresetDisable, Pattern: rest}, true
	}
	return PresetRule{}, false
}

// Query returns what the presets say about unit name: enable (true) or
// disable, from the first rule that matches, and enable when none does.
// For a template, a matching "enable TEMPLATE INSTANCE..." rule returns the
// instance names to enable; an instance matches such a rule when the rule
// lists its instance.
func (ps Presets) Query(name string) (enable bool, instances []string) {
	for _, r := range ps {
		if len(r.Instances) > 0 {
			if t, ok := templateName(name); ok && t == r.Pattern {
				if Classify(name) == Template {
					for _, in := range r.Instances {
						instances = append(instances, withInstance(name, in))
					}
					return r.Action == PresetEnable, instances
				}
				for _, in := range r.Instances {
					if in == instanceOf(name) {
						return r.Action == PresetEnable, nil
					}
				}
			}
		}
		if ok, _ := path.Match(r.Pattern, name); ok && fnmatchable(r.Pattern) {
			return r.Action == PresetEnable, nil
		}
	}
	return true, nil
}

// templateName returns the template of an instance, or a template itself.
func templateName(name string) (string, bool) {
	if Classify(name) == Template {
		return name, true
	}
	return TemplateOf(name)
}

// fnmatchable reports whether path.Match treats pattern as fnmatch with
// FNM_NOESCAPE does: a backslash is an ordinary character there, while
// path.Match uses it as an escape; unit names contain backslashes only in
// escaped instances, so a pattern with one matches only itself.
func fnmatchable(pattern string) bool { return !strings.Contains(pattern, `\`) }

// PresetMode is systemctl's --preset-mode.
type PresetMode int

// Preset modes.
const (
	// PresetFull enables what the presets enable and disables the rest.
	PresetFull PresetMode = iota
	// PresetEnableOnly only enables (what systemd does on first boot
	// unless built with first-boot-full-preset).
	PresetEnableOnly
	// PresetDisableOnly only disables.
	PresetDisableOnly
)

// PresetChange is what applying presets changes in a tree.
type PresetChange struct {
	// Removed is what the disabling part removes.
	Removed Removal
	// Links are the symlinks created, sorted by path.
	Links []Link
}

// PresetAll returns what `systemctl --root=DIR preset-all
// --preset-mode=MODE` (systemd 252) changes in the root tree fsys, without
// changing it. Every unit file or symlink directly in a unit directory is
// considered once by name (aliases, masked and unloadable units are
// skipped); the presets decide enable (with the instances a template rule
// names) or disable. The disabled units are disabled first as with
// DisableLinks; then the enabled ones are enabled as with EnableLinks
// (with Also=, whose failures are ignored), creating only links whose path
// does not exist yet: systemctl without --force keeps an existing link.
// Errors of single units (a template without an instance, an invalid
// [Install] value) are returned joined, with the changes that succeeded,
// as systemctl reports them.
func PresetAll(fsys fs.FS, mode PresetMode) (PresetChange, error) {
	ps, err := LoadPresets(fsys)
	if err != nil {
		return PresetChange{}, err
	}
	plus, minus := presetUnits(fsys, ps)
	var ch PresetChange
	var errs []error
	view := fsys
	if mode != PresetEnableOnly && len(minus) > 0 {
		ch.Removed, err = DisableLinks(fsys, minus...)
		if err != nil {
			errs = append(errs, err)
		}
		view = Without(fsys, ch.Removed)
	}
	if mode != PresetDisableOnly {
		ch.Links, errs = presetEnable(view, plus, errs)
	}
	return ch, errors.Join(errs...)
}

// presetUnits sorts every unit directly in a unit directory, once by name,
// by what the presets say: plus are the units (or a template's named
// instances) to enable, minus the names to disable.
func presetUnits(fsys fs.FS, ps Presets) (plus []UnitFile, minus []string) {
	seen := map[string]bool{}
	for _, dir := range unitDirs {
		entries, err := fs.ReadDir(fsys, rel(dir))
		if err != nil {
			continue
		}
		for _, e := range entries {
			u, ok := presetCandidate(fsys, e, seen)
			if !ok {
				continue
			}
			enable, instances := ps.Query(u.Name)
			switch {
			case !enable:
				minus = append(minus, u.Name)
			case len(instances) > 0:
				for _, in := range instances {
					if iu, err := LoadFromFS(fsys, in); err == nil {
						plus = append(plus, iu)
					}
				}
			default:
				plus = append(plus, u)
			}
		}
	}
	return plus, minus
}

// presetCandidate loads the unit of directory entry e when presets
// consider it: a unit file or symlink with a valid name not seen yet,
// loadable, neither masked nor an alias of another unit.
func presetCandidate(fsys fs.FS, e fs.DirEntry, seen map[string]bool) (UnitFile, bool) {
	name := e.Name()
	if Classify(name) == Invalid || seen[name] {
		return UnitFile{}, false
	}
	if t := e.Type(); t != fs.ModeSymlink && t != 0 {
		return UnitFile{}, false
	}
	seen[name] = true
	u, err := loadFollowingLinks(fsys, name)
	if err != nil || u.Name != name {
		return UnitFile{}, false
	}
	return u, true
}

// presetEnable enables the units plus in view as EnableLinks does (its
// Also= failures ignored) and returns the links whose path does not exist
// yet, by path, with errs and the errors of the others.
func presetEnable(view fs.FS, plus []UnitFile, errs []error) ([]Link, []error) {
	var out []Link
	created := map[string]string{}
	for _, u := range plus {
		links, err := EnableLinks(u, FSLookup(view))
		if err != nil && !alsoOnly(err) {
			errs = append(errs, err)
		}
		for _, l := range links {
			if _, ok := created[l.Path]; ok {
				continue
			}
			if _, err := lstat(view, l.Path); err == nil {
				continue
			}
			created[l.Path] = l.Target
			out = append(out, l)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, errs
}

// alsoOnly reports whether every error of a joined EnableLinks error is
// about a unit pulled in by Also= (systemctl ignores those when presetting).
func alsoOnly(err error) bool {
	var list []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		list = j.Unwrap()
	} else {
		list = []error{err}
	}
	for _, e := range list {
		if !strings.Contains(e.Error(), "(Also=)") {
			return false
		}
	}
	return true
}

// loadFollowingLinks is LoadFromFS, but a symlink in /etc/systemd/system to
// another unit of the search path is followed like an alias (systemctl's
// SEARCH_FOLLOW_CONFIG_SYMLINKS) instead of being refused.
func loadFollowingLinks(fsys fs.FS, name string) (UnitFile, error) {
	u, err := LoadFromFS(fsys, name)
	if errors.Is(err, ErrLinked) {
		p, rerr := resolve(fsys, SystemDir+"/"+name)
		if rerr != nil {
			return UnitFile{}, err
		}
		return UnitFile{Name: path.Base(p), Path: p}, nil
	}
	return u, err
}

// Without returns a read-only view of fsys without the removed links and
// directories (and what lies below them): the tree after a disable, or a
// base with a layer's whiteouts applied.
func Without(fsys fs.FS, r Removal) fs.FS {
	gone := map[string]bool{}
	for _, p := range r.Links {
		gone[rel(p)] = true
	}
	for _, p := range r.Dirs {
		gone[rel(p)] = true
	}
	return removedFS{fsys, gone}
}

// removedFS hides paths (and everything below them) of a tree.
type removedFS struct {
	fs.FS
	gone map[string]bool
}

var (
	_ fs.ReadDirFS  = removedFS{}
	_ fs.ReadLinkFS = removedFS{}
	_ fs.StatFS     = removedFS{}
)

func (r removedFS) hidden(name string) bool {
	for p := name; p != "." && p != "/" && p != ""; p = path.Dir(p) {
		if r.gone[p] {
			return true
		}
	}
	return false
}

func (r removedFS) notExist(op, name string) error {
	return &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
}

func (r removedFS) Open(name string) (fs.File, error) {
	if r.hidden(name) {
		return nil, r.notExist("open", name)
	}
	f, err := r.FS.Open(name)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil || !fi.IsDir() {
		return f, err
	}
	entries, err := r.ReadDir(name)
	if err != nil {
		f.Close()
		return nil, err
	}
	return &dir{File: f, info: fi, entries: entries}, nil
}

func (r removedFS) Stat(name string) (fs.FileInfo, error) {
	if r.hidden(name) {
		return nil, r.notExist("stat", name)
	}
	return fs.Stat(r.FS, name)
}

func (r removedFS) Lstat(name string) (fs.FileInfo, error) {
	if r.hidden(name) {
		return nil, r.notExist("lstat", name)
	}
	return lstatFS(r.FS, name)
}

func (r removedFS) ReadLink(name string) (string, error) {
	if r.hidden(name) {
		return "", r.notExist("readlink", name)
	}
	return fs.ReadLink(r.FS, name)
}

func (r removedFS) ReadDir(name string) ([]fs.DirEntry, error) {
	if r.hidden(name) {
		return nil, r.notExist("readdir", name)
	}
	entries, err := fs.ReadDir(r.FS, name)
	if err != nil {
		return nil, err
	}
	out := entries[:0:0]
	for _, e := range entries {
		if !r.gone[path.Join(name, e.Name())] {
			out = append(out, e)
		}
	}
	return out, nil
}
