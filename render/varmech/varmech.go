// Package varmech keeps content under /var and its aliases (/opt,
// /usr/local, /root, /home, /srv, /mnt) following the image on
// ostree-native nodes.
//
// ostree copies a derived layer's /var content only on the first deployment
// and never updates nor removes it afterwards, and on Fedora CoreOS and RHCOS
// /opt is a symlink to var/opt, /usr/local to ../var/usrlocal, /root to
// var/roothome, /home to var/home, /srv to var/srv and /mnt to var/mnt (the
// ostree root layout of rpm-ostree's "tmp-is-dir" FCOS/RHCOS). So such
// content is stored read-only under StoreDir in /usr (which every deployment
// replaces) and materialised in /var on the node:
//
//   - a tmpfiles.d file (TmpfilesPath) with one "L+ NODEPATH - - - - STORE"
//     line per file: a symlink into /usr, so content, mode and owner follow
//     the image on every deployment and rollback; "L+" lines for configured
//     symlinks; "d" lines with mode and owner for configured directories.
//     Other parent directories get no line: systemd-tmpfiles creates
//     missing ones 0755 root and leaves existing ones alone, and a line of
//     ours for a directory the OS also has a line for (/var/tmp, /var/log)
//     would hide the OS's line, as tmpfiles keeps only the first line per
//     path;
//   - removal of what the configuration dropped: the image lists the paths
//     it owns (ListPath); a oneshot unit (PruneUnit, statically enabled in
//     sysinit.target.wants, ordered before systemd-tmpfiles-setup.service)
//     runs a POSIX sh script (PruneScript) that compares the previous
//     deployment's list (StatePath) with the new one and removes each path
//     no longer owned, then saves the new list as the state.
//
// The prune script touches nothing oslayer does not own. A dropped file is
// removed only while it is still a symlink into StoreDir; a dropped
// symlink only while it still points where the previous image made it
// point; a dropped directory only while it is an empty directory (rmdir,
// never recursive). Anything an admin replaced is left alone. An entry
// whose kind changed (file to directory, ...) counts as dropped for its old
// kind. Implicit parent directories are never listed and never removed.
// RootEnv (OSLAYER_ROOT) prefixes every path the script touches so tests
// can run it against a directory.
//
// Known limit: rolling back to an image without oslayer leaves the symlinks
// dangling (that image has no prune unit); they point into /usr and do no
// harm but are not removed.
package varmech

import (
	"fmt"
	"path"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Locations of the mechanism in the image and on the node.
const (
	// StoreDir holds the content: StoreDir + nodePath, with the entry's
	// mode, uid and gid.
	StoreDir = "/usr/lib/oslayer/var"
	// TmpfilesPath materialises the content in /var.
	TmpfilesPath = "/usr/lib/tmpfiles.d/oslayer-var.conf"
	// ListPath lists the node paths this image owns.
	ListPath = "/usr/lib/oslayer/var.list"
	// StatePath is the previous deployment's list on the node.
	StatePath = stateDir + "/var.list"
	stateDir  = "/var/lib/oslayer"
	// PruneScript removes what the configuration dropped.
	PruneScript = "/usr/libexec/oslayer/var-prune"
	// PruneUnit runs PruneScript at boot.
	PruneUnit = "oslayer-var-prune.service"
	// PruneUnitPath is where PruneUnit lives.
	PruneUnitPath = "/usr/lib/systemd/system/" + PruneUnit
	// PruneWantsPath enables PruneUnit statically.
	PruneWantsPath = "/usr/lib/systemd/system/sysinit.target.wants/" + PruneUnit
	// RootEnv names the environment variable that prefixes every path the
	// prune script touches (empty on a node).
	RootEnv = "OSLAYER_ROOT"
)

// Canonical maps a configured path to where it lives on the node:
// /var/x → /var/x, /opt/x → /var/opt/x, /usr/local/x → /var/usrlocal/x,
// /root/x → /var/roothome/x, /home/x → /var/home/x, /srv/x → /var/srv/x,
// /mnt/x → /var/mnt/x (the FCOS/RHCOS symlinks /opt -> var/opt,
// /usr/local -> ../var/usrlocal, /root -> var/roothome, /home -> var/home,
// /srv -> var/srv, /mnt -> var/mnt; ignition-apply follows them the same
// way). ok is false for other paths and for the aliases themselves. path
// must be absolute and clean.
func Canonical(p string) (nodePath string, ok bool) {
	if !path.IsAbs(p) || path.Clean(p) != p {
		return "", false
	}
	for _, m := range [...]struct{ from, to string }{
		{"/var/", "/var/"},
		{"/opt/", "/var/opt/"},
		{"/usr/local/", "/var/usrlocal/"},
		{"/root/", "/var/roothome/"},
		{"/home/", "/var/home/"},
		{"/srv/", "/var/srv/"},
		{"/mnt/", "/var/mnt/"},
	} {
		if rest, found := strings.CutPrefix(p, m.from); found && rest != "" {
			return m.to + rest, true
		}
	}
	return "", false
}

// Kind is what an Entry is.
type Kind int

// Kinds of entries.
const (
	File Kind = iota
	Dir
	Symlink
)

func (k Kind) String() string {
	switch k {
	case File:
		return "file"
	case Dir:
		return "dir"
	case Symlink:
		return "symlink"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// listCode is the kind's letter in the list file.
func (k Kind) listCode() string {
	return [...]string{"f", "d", "l"}[k]
}

// Entry is one item under /var (or one of its aliases) the configuration owns.
type Entry struct {
	// Path is the node path; /opt/x, /usr/local/x and the other aliases are accepted and
	// canonicalised (see Canonical).
	Path string
	Kind Kind
	// Mode is the permission bits (07777) of a file or directory; a
	// directory with Mode 0 gets 0755.
	Mode     uint32
	UID, GID int
	// Target is a symlink's target.
	Target string
}

// Generated is a file the mechanism adds to the image.
type Generated struct {
	// Path is the absolute path in the image.
	Path string
	Mode uint32
	Data []byte
	// Symlink, when non-empty, makes this a symlink to Symlink (Data and
	// Mode are unused).
	Symlink string
}

// Plan is what the renderer adds to the image for a set of entries.
type Plan struct {
	// Store maps each file's canonical node path to its path in the image
	// (under StoreDir); the renderer writes the file's content there with
	// the entry's mode, uid and gid.
	Store map[string]string
	// Files are the generated files, sorted by Path: the tmpfiles.d
	// configuration, the list file, the prune script (0755), the prune unit
	// and its enablement link. Parent directories are the renderer's
	// (0755 root).
	Files []Generated
	// Entries are the canonicalised entries, sorted by Path.
	Entries []Entry
}

// NewPlan validates entries and builds the plan. Errors name the path:
// a path that Canonical rejects, a path under /var/run or /var/lock (links
// to /run on the node) or under /var/lib/oslayer (the mechanism's state),
// a path or symlink target with whitespace,
// control characters, quotes or backslashes (they would need escaping in
// tmpfiles.d and in the list), duplicates (also /opt/x beside /var/opt/x),
// an entry below a file or symlink entry, an unknown kind, a symlink without
// a target, a mode outside 07777, a negative uid or gid.
//
// An empty entries list still yields the list file, the prune script and
// its unit (and an empty tmpfiles.d file), so that an image which drops its
// last /var entry removes what the previous image owned.
func NewPlan(entries []Entry) (*Plan, error) {
	return newPlan(entries)
}

func checkName(what, s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("%s %q is not valid UTF-8", what, s)
	}
	for _, r := range s {
		if unicode.IsSpace(r) || unicode.IsControl(r) || r == '\\' || r == '"' || r == '\'' {
			return fmt.Errorf("%s %q contains whitespace, a control character, a quote or a backslash", what, s)
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
