package prune

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/util/yaml"
)

// Source is where references come from: a cluster or a file.
type Source interface {
	// Name names the source in messages ("cluster", "references FILE").
	Name() string
	// read adds the source's objects to c.
	read(ctx context.Context, c *collector) error
}

// Collect reads every source and returns their references. A source that
// cannot be read, or an object with a field that is not what its kind
// says, is an error (an *InputError for bad content): prune must not
// decide on part of the references.
func Collect(ctx context.Context, sources ...Source) (*Refs, error) {
	all := &Refs{}
	for _, s := range sources {
		_, every := s.(*fileSource)
		c := newCollector(every)
		if err := s.read(ctx, c); err != nil {
			return nil, err
		}
		for _, r := range c.finish().List {
			all.add(r)
		}
	}
	return all, nil
}

// File is a reference file: YAML or JSON, one or more documents, each a
// PoolImage, MachineConfig, MachineConfigPool, Node, BootcNode,
// BootcNodePool, a PoolImage's published ConfigMap, or a List of them
// (kubectl get -o yaml). Every MachineConfig of a file counts, rendered
// or not.
func File(path string) Source { return &fileSource{path: path} }

type fileSource struct{ path string }

func (f *fileSource) Name() string { return "references " + f.path }

// maxDocuments bounds the documents read from one file.
const maxDocuments = 1 << 20

func (f *fileSource) read(_ context.Context, c *collector) error {
	fh, err := os.Open(f.path)
	if err != nil {
		return &InputError{Input: f.Name(), Err: err.Error()}
	}
	defer fh.Close()
	if st, err := fh.Stat(); err == nil && !st.Mode().IsRegular() {
		return &InputError{Input: f.Name(), Err: "not a regular file"}
	}
	dec := yaml.NewYAMLOrJSONDecoder(fh, 4096)
	for doc := 1; doc <= maxDocuments; doc++ {
		var m map[string]any
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return &InputError{Input: f.Name(), Doc: doc, Err: fmt.Sprintf("not a YAML or JSON object: %v", err)}
		}
		if m == nil {
			continue
		}
		if err := c.add(f.Name(), doc, m); err != nil {
			return err
		}
	}
	return &InputError{Input: f.Name(), Err: fmt.Sprintf("more than %d documents", maxDocuments)}
}
