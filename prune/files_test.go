package prune_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
