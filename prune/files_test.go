package prune_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/oslayer/oslayer/internal/inputfile"
	"github.com/oslayer/oslayer/prune"
)

const digestA = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

// A reference file holds several documents and Lists; every kind is read.
func TestReferenceFile(t *testing.T) {
	p := writeFile(t, `apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Node
  metadata: {name: n1, annotations: {machineconfiguration.openshift.io/currentImage: "ostree-unverified-registry:reg.example.com/os/pools@`+digestA+`"}}
---
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata: {name: rendered-worker-0}
spec: {osImageURL: "reg.example.com/os/pools@`+digestA+`"}
---
`)
	refs, err := prune.Collect(context.Background(), prune.File(p))
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, r := range refs.List {
		kinds = append(kinds, r.Kind+" "+r.Repo)
	}
	if len(refs.List) != 2 || kinds[0] != "Node reg.example.com/os/pools" || kinds[1] != "MachineConfig reg.example.com/os/pools" {
		t.Errorf("references %v", kinds)
	}
}

// Bad input is an InputError naming the file, the document, the object
// and the field.
func TestReferenceFileErrors(t *testing.T) {
	for _, c := range []struct{ doc, want string }{
		{"kind: Node\nmetadata: {name: a}\n---\nkind: Node\nmetadata: {name: b, annotations: {machineconfiguration.openshift.io/desiredImage: 'not a ref!'}}\n",
			`document 2 (Node b): metadata.annotations[machineconfiguration.openshift.io/desiredImage]: invalid image reference "not a ref!"`},
		{"apiVersion: oslayer.dev/v1alpha1\nkind: PoolImage\nmetadata: {name: w, namespace: ns}\nstatus: {builds: [{image: 'r/x@" + digestA + "', time: yesterday}]}\n",
			`document 1 (PoolImage ns/w): status.builds[0].time: invalid time "yesterday"`},
		{"kind: MachineConfig\nmetadata: {name: m}\nspec: {osImageURL: 7}\n", `document 1 (MachineConfig m): spec.osImageURL: not a string`},
		{"kind: Secret\nmetadata: {name: s}\n", `document 1 (Secret s): kind: "Secret" is not a kind that references images`},
		{"metadata: {name: s}\n", `document 1 (s): kind: missing`},
		{"kind: [\n", `document 1: not a YAML or JSON object`},
	} {
		p := writeFile(t, c.doc)
		_, err := prune.Collect(context.Background(), prune.File(p))
		var ie *prune.InputError
		if !errors.As(err, &ie) || !strings.HasPrefix(err.Error(), "references "+p+": ") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q:\n got %v\nwant %s", c.doc, err, c.want)
		}
	}
}

func writeFile(t *testing.T, s string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "refs.yaml")
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// A references file must be a regular file with a size bound: a named
// pipe (which would block the run for ever) or a device is refused at once
// with an InputError naming the file.
func TestReferenceFileNotRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "refs.fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, want string }{
		{fifo, "not a regular file: it is a named pipe (FIFO)"},
		{"/dev/zero", "not a regular file: it is a character device"},
		{dir, "is a directory"},
	} {
		done := make(chan error, 1)
		go func() { _, err := prune.Collect(context.Background(), prune.File(c.path)); done <- err }()
		select {
		case err := <-done:
			var ie *prune.InputError
			if !errors.As(err, &ie) || err.Error() != "references "+c.path+": "+c.want {
				t.Errorf("%s: got %v, want an InputError %q", c.path, err, c.want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: still reading after 10 s", c.path)
		}
	}
}

// A references file over the input size bound is refused before it is
// decoded (a sparse file: no disk used).
func TestReferenceFileTooLarge(t *testing.T) {
	p := filepath.Join(t.TempDir(), "refs.yaml")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(inputfile.MaxSize + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	_, err = prune.Collect(context.Background(), prune.File(p))
	var ie *prune.InputError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "references "+p+": ") || !strings.Contains(err.Error(), "exceed the limit") {
		t.Errorf("got %v, want an InputError naming the file and the limit", err)
	}
}
