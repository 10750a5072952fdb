package preflight

import (
	"fmt"
	"strings"
)

// varLinks are the top-level directories that are symlinks into /var (or
// /run) on Fedora CoreOS and RHCOS.
var varLinks = map[string]string{"opt": "var/opt", "root": "var/roothome", "home": "var/home", "srv": "var/srv", "mnt": "var/mnt", "media": "run/media"}

// usrMerged are the top-level symlinks into /usr.
var usrMerged = map[string]bool{"bin": true, "sbin": true, "lib": true, "lib64": true}

// standardTop are the top-level directories a layer may name (content
// rules for each follow).
var standardTop = map[string]bool{"usr": true, "etc": true, "var": true, "boot": true, "run": true, "tmp": true, "proc": true, "sys": true, "dev": true, "sysroot": true}

// underDir reports whether p is strictly below dir.
func underDir(p, dir string) bool { return strings.HasPrefix(p, dir+"/") }

// placementRule checks where an entry lands: symlinked and usr-merged
// top-level directories, non-standard top-level directories, and the
// standard ones (standardDirRule).
func placementRule(r *ruleCollector, e *Entry) {
	p := e.Path
	top, _, _ := strings.Cut(p, "/")
	switch {
	case p == "":
	case varLinks[top] != "" || p == "usr/local" || underDir(p, "usr/local"):
		if !(e.IsSymlink() && (p == top || p == "usr/local")) {
			d, to := top, varLinks[top]
			if top == "usr" {
				d, to = "usr/local", "var/usrlocal"
			}
			r.add("var-symlinks", Warning, p, fmt.Sprintf("/%s is a symlink to /%s on Fedora CoreOS and RHCOS: this entry replaces the link or only lands on the first deployment; ship it under usr/ (e.g. usr/lib/NAME, usr/bin) instead", d, to))
		}
	case usrMerged[top]:
		if !(e.IsSymlink() && p == top) {
			r.add("usrmerge", Error, p, fmt.Sprintf("/%s is a symlink to /usr/%s: write the entry under usr/%s instead", top, top, top))
		}
	case !standardTop[top]:
		r.add("toplevel", Warning, p, fmt.Sprintf("top-level directory /%s only survives on composefs bases; put the content under usr/", top))
	default:
		standardDirRule(r, e, top)
	}
}

// standardDirRule checks an entry under one of the standardTop
// directories: what ostree refuses, masks or drops there.
func standardDirRule(r *ruleCollector, e *Entry, top string) {
	p := e.Path
	switch {
	case top == "sysroot":
		r.add("sysroot", Error, p, "sysroot/ must never appear in a layer: it is the physical root of the node; remove it")
	case top == "usr" && (p == "usr/etc" || underDir(p, "usr/etc")):
		r.add("etc-usretc", Error, p, "usr/etc/ is where ostree keeps the image's /etc: never write it; put the file under etc/")
	case p == top:
	case top == "run" || top == "tmp":
		r.add("nonempty-run-tmp", Warning, p, fmt.Sprintf("%s/ is a tmpfs on the node: this entry is dropped; remove it from the layer (create it at runtime with a tmpfiles.d rule)", top))
	case top == "boot":
		r.add("nonempty-boot", Warning, p, "boot/ content of a layer is masked on the node: it is never installed; remove it")
	case top == "proc" || top == "sys" || top == "dev":
		r.add("api-base-directories", Error, p, fmt.Sprintf("%s/ is an API filesystem: content under it is dropped; remove it from the layer", top))
	case p == "var/run":
		if !e.IsSymlink() {
			r.add("var-run", Error, p, "var/run must stay a symlink to ../run; do not create it as a directory or file")
		}
	case top == "var" && underDir(p, "var/log") && !e.IsDir():
		r.add("var-log", Warning, p, "var/log content only lands on the first deployment and mixes with the node's logs; remove it")
	case top == "var" && !e.IsDir():
		r.add("var-tmpfiles", Warning, p, "var/ content only lands on the first deployment and is never updated; ship it under usr/ and create it with a usr/lib/tmpfiles.d rule (L+ or C)")
	}
}
