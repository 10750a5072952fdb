package prune

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"

	"k8s.io/apimachinery/pkg/util/yaml"

	"github.com/oslayer/oslayer/internal/inputfile"
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
// or not. It must be a regular file (a link to one is followed) of at
// most inputfile.MaxSize bytes: anything else is an InputError naming it.
func File(path string) Source { return &fileSource{path: path} }

type fileSource struct{ path string }

func (f *fileSource) Name() string { return "references " + f.path }

// maxDocuments bounds the documents read from one file.
const maxDocuments = 1 << 20

func (f *fileSource) read(_ context.Context, c *collector) error {
	// A regular file with a size bound: a named pipe would block the run
	// and an unbounded file would take memory without end.
	b, err := inputfile.Read(f.path)
	if err != nil {
		return &InputError{Input: f.Name(), Err: inputErr(err)}
	}
	return decode(f.Name(), b, c.add)
}

// inputErr is err without the path the InputError names already.
func inputErr(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// decode reads the documents of a references file's content b (YAML or
// JSON, one or more documents) and hands each object to add with its
// 1-based document number; empty documents are skipped. input names the
// file in errors.
func decode(input string, b []byte, add func(input string, doc int, m map[string]any) error) error {
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for doc := 1; doc <= maxDocuments; doc++ {
		var m map[string]any
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return &InputError{Input: input, Doc: doc, Err: fmt.Sprintf("not a YAML or JSON object: %v", err)}
		}
		if m == nil {
			continue
		}
		if err := add(input, doc, m); err != nil {
			return err
		}
	}
	return &InputError{Input: input, Err: fmt.Sprintf("more than %d documents", maxDocuments)}
}
