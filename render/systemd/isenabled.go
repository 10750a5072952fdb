package systemd

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
)

// EnablementState is what `systemctl is-enabled` prints for a unit.
type EnablementState string

// The states IsEnabled returns (systemd 252, system scope, no runtime or
// generated units in an image).
const (
	StateEnabled  EnablementState = "enabled"
	StateLinked   EnablementState = "linked"
	StateAlias    EnablementState = "alias"
	StateMasked   EnablementState = "masked"
	StateStatic   EnablementState = "static"
	StateIndirect EnablementState = "indirect"
	StateDisabled EnablementState = "disabled"
	StateNotFound EnablementState = "not-found"
)

// Succeeds reports whether `systemctl is-enabled` exits 0 in this state
// (enabled, static, indirect, alias); Ignition, for example, writes a
// "disable" preset only for such a unit.
func (s EnablementState) Succeeds() bool {
	switch s {
	case StateEnabled, StateStatic, StateIndirect, StateAlias:
		return true
	}
	return false
}

// IsEnabled returns what `systemctl --root=DIR is-enabled NAME` (systemd
// 252) says about unit name in the root tree fsys:
//
//   - masked, not-found; alias when name resolves to a unit file of
//     another name (not for an instance of a template);
//   - enabled when a symlink in /etc/systemd/system (directly, or in a
//     .wants or .requires directory) is named like the unit, or one of its
//     Alias= names, or its DefaultInstance= instance, and is named so or
//     points to the unit's file name; linked when the only such link is
//     /etc/systemd/system/NAME itself; static for an instance linked from
//     a .wants directory of another unit directory;
//   - indirect when the unit has only Also=; disabled when it has
//     WantedBy=, RequiredBy= or Alias= and no such link (systemctl 252
//     reports a link of another name to the unit's file as disabled too,
//     which the oracle test checks); static otherwise.
//
// An error names a name that is not a unit name, or a unit that cannot
// be read.
func IsEnabled(fsys fs.FS, name string) (EnablementState, error) {
	if Classify(name) == Invalid {
		return "", fmt.Errorf("is-enabled: %q is not a valid unit name", name)
	}
	u, err := loadFollowingLinks(fsys, name)
	switch {
	case errors.Is(err, ErrMasked):
		return StateMasked, nil
	case errors.Is(err, ErrNotFound):
		return StateNotFound, nil
	case err != nil:
		return "", fmt.Errorf("is-enabled %s: %w", name, err)
	}
	if name != path.Base(u.Path) && Classify(u.Name) != Instance {
		return StateAlias, nil
	}
	if st, ok := findSymlinks(fsys, u); ok {
		return st, nil
	}
	in := u.Install
	switch {
	case len(in.Alias) > 0 || len(in.WantedBy) > 0 || len(in.RequiredBy) > 0:
		return StateDisabled, nil
	case len(in.Also) > 0:
		return StateIndirect, nil
	}
	return StateStatic, nil
}

// findSymlinks looks for links to u through the unit directories as
// systemctl's find_symlinks_in_scope does, with link names limited to the
// unit's own, its aliases and its default instance.
func findSymlinks(fsys fs.FS, u UnitFile) (EnablementState, bool) {
	ignoreSameName := false
	sameNameConfig := false
	enabledAtAll := false
	for _, dir := range unitDirs {
		found, sameName := findSymlinksIn(fsys, dir, u, ignoreSameName)
		switch {
		case found && dir == SystemDir:
			return StateEnabled, true
		case found:
			enabledAtAll = true
		case sameName && dir == SystemDir:
			sameNameConfig = true
		}
		if !ignoreSameName && strings.HasPrefix(u.Path, dir+"/") {
			ignoreSameName = true
		}
	}
	if enabledAtAll && Classify(u.Name) == Instance {
		return StateStatic, true
	}
	if sameNameConfig {
		return StateLinked, true
	}
	return "", false
}

// findSymlinksIn checks the .wants and .requires directories of unit
// directory dir, then dir itself.
func findSymlinksIn(fsys fs.FS, dir string, u UnitFile, ignoreSameName bool) (found, sameName bool) {
	entries, err := fs.ReadDir(fsys, rel(dir))
	if err != nil {
		return false, false
	}
	for _, e := range entries {
		n := e.Name()
		if !e.IsDir() || !(strings.HasSuffix(n, ".wants") || strings.HasSuffix(n, ".requires")) {
			continue
		}
		sub, err := fs.ReadDir(fsys, rel(dir+"/"+n))
		if err != nil {
			continue
		}
		f, s := matchLinks(fsys, dir+"/"+n, dir, sub, u, ignoreSameName)
		sameName = sameName || s
		if f {
			return true, sameName
		}
	}
	f, s := matchLinks(fsys, dir, dir, entries, u, ignoreSameName)
	return f, sameName || s
}

// matchLinks is systemctl's find_symlinks_in_directory.
func matchLinks(fsys fs.FS, dir, configDir string, entries []fs.DirEntry, u UnitFile, ignoreSameName bool) (found, sameName bool) {
	for _, e := range entries {
		if e.Type()&fs.ModeSymlink == 0 {
			continue
		}
		dest, err := fs.ReadLink(fsys, rel(dir+"/"+e.Name()))
		if err != nil {
			continue
		}
		foundPath := !ignoreSameName && e.Name() == u.Name
		foundDest := path.Base(dest) == u.Name
		switch {
		case foundPath && foundDest && dir+"/"+e.Name() == configDir+"/"+u.Name:
			sameName = true
		case foundPath || foundDest:
			if knownName(u, e.Name()) {
				return true, sameName
			}
		}
	}
	return false, sameName
}

// knownName reports whether a link name is one enabling u creates: its
// name, an Alias=, or its DefaultInstance= instance of a template.
func knownName(u UnitFile, n string) bool {
	if n == u.Name {
		return true
	}
	for _, a := range u.Install.Alias {
		if a == n {
			return true
		}
	}
	return Classify(u.Name) == Template && u.Install.DefaultInstance != "" && withInstance(u.Name, u.Install.DefaultInstance) == n
}
