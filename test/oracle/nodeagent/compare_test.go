package nodeagent

import (
	"bufio"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// ignored says why a path is left out of the comparison, or "" when it is
// compared. Every reason is a deliberate difference the README lists.
type ignored func(p string) string

// compareTrees compares what the node agent did to the base (node) with
// what the image adds to it (img). base, node and img are snapshots of the
// same base before the node agent ran, after it ran, and of the unpacked
// image after its first boot's tmpfiles run. It returns the differences
// and the number of node paths that agree.
func compareTrees(base, node, img map[string]node, nodeRoot, imgRoot string, skip ignored) (diffs []string, agreed int) {
	nodeChanged, imgChanged := delta(base, node), delta(base, img)
	skipNode, skipImg := withParents(nodeChanged, node, skip), withParents(imgChanged, img, skip)
	nodeDelta := map[string]bool{}
	for _, p := range nodeChanged {
		if skipNode[p] {
			continue
		}
		nodeDelta[p] = true
		n, onNode := node[p]
		i, inImg := img[p]
		switch {
		case !onNode:
			if inImg {
				diffs = append(diffs, "removed on node, kept in image: "+p)
				continue
			}
		case n.Type == 'l':
			if !inImg {
				// Named by where the link ends: systemctl writes
				// /lib/systemd/... or /usr/lib/systemd/... depending on
				// how it was built.
				to := n.Link
				if rp, err := resolve(nodeRoot, p); err == nil {
					to = rp
				}
				diffs = append(diffs, fmt.Sprintf("missing in image: %s (node: symlink to %s)", p, to))
				continue
			}
			if i != n && !sameTarget(nodeRoot, imgRoot, p) {
				diffs = append(diffs, fmt.Sprintf("link %s: node %s, image %s", p, n, i))
				continue
			}
		default:
			d := compareResolved(p, n, imgRoot)
			if len(d) > 0 {
				diffs = append(diffs, d...)
				continue
			}
		}
		agreed++
	}
	for _, p := range imgChanged {
		if nodeDelta[p] || skipImg[p] {
			continue
		}
		i, inImg := img[p]
		switch {
		case !inImg:
			diffs = append(diffs, "removed in image, kept on node: "+p)
		case i.Type == 'd':
			// A directory the image adds is only a difference when the
			// node agent would not have created it (checked by the paths
			// below it) or when it shows up with nothing below.
			if !hasChildIn(p, nodeDelta) {
				diffs = append(diffs, fmt.Sprintf("extra in image: %s (%s)", p, i))
			}
		default:
			diffs = append(diffs, fmt.Sprintf("extra in image: %s (%s)", p, i))
		}
	}
	sort.Strings(diffs)
	return diffs, agreed
}

// withParents returns the changed paths left out of the comparison: those
// skip names, and the directories in changed whose changed descendants
// are all left out (the directory only exists for them).
func withParents(changed []string, tree map[string]node, skip ignored) map[string]bool {
	out := map[string]bool{}
	for _, p := range changed {
		if skip(p) != "" {
			out[p] = true
		}
	}
	// Deepest first, so that a directory sees its subdirectories' verdict.
	for i := len(changed) - 1; i >= 0; i-- {
		p := changed[i]
		if out[p] || tree[p].Type != 'd' {
			continue
		}
		kids, all := 0, true
		for _, q := range changed {
			if strings.HasPrefix(q, p+"/") {
				kids++
				all = all && out[q]
			}
		}
		if kids > 0 && all {
			out[p] = true
		}
	}
	return out
}

// sameTarget reports whether the symlink p ends at the same path in both
// trees: systemctl writes /lib/systemd/... or /usr/lib/systemd/...
// depending on the unit search path it was built with, and a node sees the
// same unit either way.
func sameTarget(nodeRoot, imgRoot, p string) bool {
	a, errA := resolve(nodeRoot, p)
	b, errB := resolve(imgRoot, p)
	return errA == nil && errB == nil && a == b
}

func hasChildIn(dir string, set map[string]bool) bool {
	for p := range set {
		if strings.HasPrefix(p, dir+"/") {
			return true
		}
	}
	return false
}

// compareResolved compares a file or directory the node agent wrote at p
// with what a process on the booted image reads at p: symlinks are
// followed, so content relocated below /usr/lib/oslayer/var and linked
// into /var by tmpfiles is compared by its target (the deliberate /var
// relocation).
func compareResolved(p string, n node, imgRoot string) []string {
	rp, err := resolve(imgRoot, p)
	if err != nil {
		return []string{fmt.Sprintf("missing in image: %s (node: %s)", p, n)}
	}
	i, err := stat(filepath.Join(imgRoot, rp))
	if err != nil {
		return []string{fmt.Sprintf("missing in image: %s (node: %s)", p, n)}
	}
	if i.Type != n.Type {
		return []string{fmt.Sprintf("type %s: node %s, image %s", p, n, i)}
	}
	var d []string
	if i.Mode != n.Mode {
		d = append(d, fmt.Sprintf("mode %s: node %04o, image %04o", p, n.Mode, i.Mode))
	}
	if ownersComparable && (i.UID != n.UID || i.GID != n.GID) {
		d = append(d, fmt.Sprintf("owner %s: node %d:%d, image %d:%d", p, n.UID, n.GID, i.UID, i.GID))
	}
	if n.Type == 'f' && i.Sum != n.Sum {
		d = append(d, "content "+p+" differs")
	}
	return d
}

// ownersComparable is false when the test does not run as root: then
// neither the node agent's files nor umoci's unpack carry real owners.
var ownersComparable = os.Geteuid() == 0

// runDiffs checks the node agent's start and stop calls against what the
// image starts at boot: a unit the node agent (re)starts must start when a
// node boots the image (pulled in, or activated by a timer or by a path
// unit); a unit it stops must not be pulled in at boot, unless the node
// agent left it enabled (command: stop with enable), so that the node
// starts it again on its next boot too.
func runDiffs(actions []string, nodeRoot, imgRoot string) []string {
	state := map[string]string{}
	var order []string
	for _, a := range actions {
		verb, unit, _ := strings.Cut(a, " ")
		switch verb {
		case "restart", "start", "stop":
			if _, ok := state[unit]; !ok {
				order = append(order, unit)
			}
			state[unit] = verb
		}
	}
	pulled, activated := bootUnits(imgRoot)
	nodePulled, _ := bootUnits(nodeRoot)
	var d []string
	for _, u := range order {
		switch {
		case state[u] == "stop" && pulled[u] && !nodePulled[u]:
			d = append(d, "stopped on node, started at boot from image: "+u)
		case state[u] != "stop" && !pulled[u] && !activated[u]:
			d = append(d, "started on node, not started at boot from image: "+u)
		}
	}
	sort.Strings(d)
	return d
}

var unitDirs = []string{"/etc/systemd/system", "/run/systemd/system", "/usr/lib/systemd/system"}

// bootUnits returns the units a boot of root pulls in (default.target and
// everything it reaches through .wants/.requires directories and
// Wants=/Requires= of unit files and drop-ins) and the units that timers
// and path units among them activate.
func bootUnits(root string) (pulled, activated map[string]bool) {
	start := "multi-user.target"
	for _, d := range unitDirs {
		if t, err := os.Readlink(filepath.Join(root, d, "default.target")); err == nil {
			start = path.Base(t)
			break
		}
	}
	pulled, activated = map[string]bool{}, map[string]bool{}
	todo := []string{start}
	for len(todo) > 0 {
		u := todo[0]
		todo = todo[1:]
		if pulled[u] {
			continue
		}
		pulled[u] = true
		for _, d := range unitDirs {
			for _, sfx := range []string{".wants", ".requires"} {
				ents, _ := os.ReadDir(filepath.Join(root, d, u+sfx))
				for _, e := range ents {
					todo = append(todo, e.Name())
				}
			}
		}
		deps, trig := unitDeps(root, u)
		todo = append(todo, deps...)
		if trig != "" {
			activated[trig] = true
		}
	}
	return pulled, activated
}

// unitDeps reads Wants=/Requires= of u's unit file and drop-ins, and the
// unit a timer, path or socket activates.
func unitDeps(root, u string) (deps []string, trigger string) {
	var files []string
	for _, d := range unitDirs {
		p := filepath.Join(root, d, u)
		if _, err := os.Stat(p); err == nil {
			files = append(files, p)
			break
		}
	}
	for _, d := range unitDirs {
		ms, _ := filepath.Glob(filepath.Join(root, d, u+".d", "*.conf"))
		files = append(files, ms...)
	}
	// A timer in the boot transaction runs its service (soon or on its
	// calendar); a path unit only when its condition holds at boot
	// (PathExists=, PathExistsGlob=, DirectoryNotEmpty=), not for
	// PathChanged=/PathModified=, which wait for a change after boot.
	ext := path.Ext(u)
	if ext == ".timer" {
		trigger = strings.TrimSuffix(u, ext) + ".service"
	}
	var pathUnit string
	if ext == ".path" {
		pathUnit = strings.TrimSuffix(u, ext) + ".service"
	}
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "=")
			if !ok {
				continue
			}
			switch strings.TrimSpace(k) {
			case "Wants", "Requires":
				deps = append(deps, strings.Fields(v)...)
			case "Unit":
				if ext == ".timer" {
					trigger = strings.TrimSpace(v)
				} else if ext == ".path" {
					pathUnit = strings.TrimSpace(v)
				}
			case "PathExists", "PathExistsGlob", "DirectoryNotEmpty":
				if ext == ".path" && pathHolds(root, strings.TrimSpace(k), strings.TrimSpace(v)) {
					trigger = "?"
				}
			}
		}
		fh.Close()
	}
	if trigger == "?" {
		trigger = pathUnit
	}
	return deps, trigger
}

// pathHolds evaluates a path unit's condition on root.
func pathHolds(root, kind, p string) bool {
	switch kind {
	case "PathExistsGlob":
		m, _ := filepath.Glob(filepath.Join(root, p))
		return len(m) > 0
	case "DirectoryNotEmpty":
		rp, err := resolve(root, p)
		if err != nil {
			return false
		}
		ents, _ := os.ReadDir(filepath.Join(root, rp))
		return len(ents) > 0
	}
	_, err := resolve(root, p)
	return err == nil
}
