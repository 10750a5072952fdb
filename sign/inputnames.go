package sign

import (
	"path/filepath"
	"strings"

	"github.com/oslayer/oslayer/sources/model"
)

// inputURIs are the provenance's names of the input files: each path
// relative to the deepest directory that holds all of them (inputRoot).
// The provenance then does not depend on where the inputs were (the
// working directory, a checkout's location, a temporary directory a
// front-end wrote them to: the extension's reconcile writes the OSC to
// oslayer-os-extension-RANDOM/osc.yaml): the same inputs give the same
// statement, so an unchanged rebuild pushes no new attestation.
func inputURIs(inputs []model.Input) []string {
	root := inputRoot(inputs)
	out := make([]string, len(inputs))
	for i, in := range inputs {
		out[i] = inputURI(root, in.Path)
	}
	return out
}

// inputRoot is the deepest directory that holds every input file.
func inputRoot(inputs []model.Input) string {
	var dirs []string
	for _, in := range inputs {
		if in.Path == "" || in.Path == "-" {
			continue
		}
		if a, err := filepath.Abs(in.Path); err == nil {
			dirs = append(dirs, filepath.Dir(a))
		}
	}
	return commonDir(dirs)
}

// inputURI is the file p relative to root (slash-separated). A name that
// is not a file ("", "-" for standard input, "oslayer" for what oslayer
// generates) and a file outside root keep their name as given.
func inputURI(root, p string) string {
	if root == "" || p == "" || p == "-" || p == "oslayer" {
		return p
	}
	a, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	r, err := filepath.Rel(root, a)
	if err != nil || r == ".." || strings.HasPrefix(r, "../") {
		return p
	}
	return filepath.ToSlash(r)
}

// commonDir is the deepest directory that holds every one of dirs
// (absolute, clean); "" for none.
func commonDir(dirs []string) string {
	if len(dirs) == 0 {
		return ""
	}
	common := strings.Split(dirs[0], string(filepath.Separator))
	for _, d := range dirs[1:] {
		parts := strings.Split(d, string(filepath.Separator))
		n := 0
		for n < len(common) && n < len(parts) && common[n] == parts[n] {
			n++
		}
		common = common[:n]
	}
	if len(common) == 1 && common[0] == "" { // only the root
		return string(filepath.Separator)
	}
	return strings.Join(common, string(filepath.Separator))
}
