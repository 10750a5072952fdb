package render

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oslayer/oslayer/render/tree"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// fakeImages is a model.ImageFiles that returns deterministic bytes derived
// from the image and the path, of size bytes (at least the header).
type fakeImages struct {
	size  int
	calls int
}

func (f *fakeImages) ReadFile(ctx context.Context, image, path string) ([]byte, uint32, string, error) {
	f.calls++
	head := fmt.Sprintf("#!/bin/sh\n# fake content of %s from %s\n", path, image)
	data := []byte(head)
	if len(data) < f.size {
		data = append(data, bytes.Repeat([]byte{'x'}, f.size-len(data))...)
	}
	sum := sha256.Sum256([]byte(image))
	repo := image
	if i := strings.IndexAny(repo, "@"); i >= 0 {
		repo = repo[:i]
	} else if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		repo = repo[:i]
	}
	return data, 0o755, repo + "@sha256:" + hex.EncodeToString(sum[:]), nil
}

// listing renders a tree for the golden files: one line per entry.
func listing(t *tree.Tree) string {
	var b strings.Builder
	for _, e := range t.Entries() {
		fmt.Fprintf(&b, "%-8s %04o %d:%d %s", e.Kind, e.Mode, e.UID, e.GID, e.Path)
		switch e.Kind {
		case tree.File:
			s := sha256.Sum256(e.Data)
			fmt.Fprintf(&b, " sha256:%s size=%d", hex.EncodeToString(s[:8]), len(e.Data))
		case tree.Symlink, tree.Hardlink:
			fmt.Fprintf(&b, " -> %s", e.Target)
		}
		if e.Layer != "" {
			fmt.Fprintf(&b, " [%s]", e.Layer)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// golden compares got with testdata/golden/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	p := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run the test with -update to create it)", err)
	}
	if string(want) != got {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := 0; i < len(gl) || i < len(wl); i++ {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("%s differs at line %d:\n got: %s\nwant: %s\n(run with -update if the change is intended)", p, i+1, g, w)
			}
		}
	}
}
