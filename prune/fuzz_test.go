package prune

import (
	"errors"
	"testing"
)

// FuzzReferences feeds arbitrary bytes to the references decoder and the
// collector, as a --references file: it never panics, and what it refuses
// is an *InputError naming the file (exit 2), never another error.
func FuzzReferences(f *testing.F) {
	for _, s := range []string{
		"kind: Node\nmetadata: {name: n, annotations: {machineconfiguration.openshift.io/currentImage: 'ostree-unverified-registry:r.example/x@sha256:" + hex64 + "'}}\n",
		"apiVersion: v1\nkind: List\nitems:\n- kind: MachineConfig\n  metadata: {name: rendered-w}\n  spec: {osImageURL: 'r.example/x:t'}\n",
		"kind: PoolImage\nmetadata: {name: w}\nstatus: {image: 'r/x@sha256:" + hex64 + "', lastBuildTime: '2026-01-01T00:00:00Z', builds: [{image: 'sha256:" + hex64 + "', time: '2026-01-01T00:00:00Z', result: Failed}]}\n",
		`{"kind":"BootcNode","metadata":{"name":"b"},"status":{"booted":{"imageDigest":"sha256:` + hex64 + `"}}}`,
		"kind: ConfigMap\ndata: {image: 'r/x@sha256:" + hex64 + "'}\n---\n---\nkind: MachineConfigPool\nstatus: {configuration: {name: x}}\n",
		"kind: [\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c := newCollector(true)
		err := decode("references f.yaml", b, c.add)
		var ie *InputError
		if err != nil && (!errors.As(err, &ie) || ie.Input != "references f.yaml") {
			t.Fatalf("%T %v: want an *InputError naming the file", err, err)
		}
		if err == nil {
			for _, r := range c.finish().List {
				if r.Image == "" || r.From == "" {
					t.Fatalf("reference %+v without image or origin", r)
				}
			}
		}
	})
}

const hex64 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
