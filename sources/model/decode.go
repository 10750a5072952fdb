package model

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// SplitDocuments splits a YAML stream at document separators ("---" alone
// on a line, or followed by a space or comment). A stream with a single
// document is returned as one slice holding all of data, so its sha256 is
// that of the file. Empty documents (only blanks and comments) are dropped.
func SplitDocuments(data []byte) [][]byte {
	var docs [][]byte
	start := 0
	for i := 0; i <= len(data); {
		end := bytes.IndexByte(data[i:], '\n')
		var line []byte
		next := len(data) + 1
		if end < 0 {
			line = data[i:]
		} else {
			line = data[i : i+end]
			next = i + end + 1
		}
		l := bytes.TrimRight(line, "\r")
		if bytes.HasPrefix(l, []byte("---")) && (len(l) == 3 || l[3] == ' ' || l[3] == '\t') {
			docs = append(docs, data[start:i])
			start = min(next, len(data))
		} else if bytes.Equal(l, []byte("...")) {
			docs = append(docs, data[start:i])
			start = min(next, len(data))
		}
		i = next
	}
	docs = append(docs, data[start:])
	var out [][]byte
	for _, d := range docs {
		if !isBlankYAML(d) {
			out = append(out, d)
		}
	}
	if len(out) == 1 {
		// One document: keep the file's exact bytes (separators included).
		return [][]byte{data}
	}
	return out
}

func isBlankYAML(d []byte) bool {
	for _, line := range strings.Split(string(d), "\n") {
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "#") || t == "---" || t == "..." {
			continue
		}
		return false
	}
	return true
}

// TypeMeta is the apiVersion and kind of a Kubernetes-style document.
type TypeMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
}

// PeekType reads apiVersion, kind and metadata name/namespace of a YAML or
// JSON document without strictness.
func PeekType(doc []byte) (TypeMeta, error) {
	var tm TypeMeta
	j, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return tm, fmt.Errorf("not valid YAML/JSON: %v", err)
	}
	if bytes.Equal(bytes.TrimSpace(j), []byte("null")) {
		return tm, errors.New("empty document")
	}
	if j = bytes.TrimSpace(j); len(j) == 0 || j[0] != '{' {
		return tm, errors.New("not a YAML/JSON object")
	}
	// Lenient: only the type fields matter here; strict decoding follows.
	var loose struct {
		APIVersion any `json:"apiVersion"`
		Kind       any `json:"kind"`
		Metadata   any `json:"metadata"`
	}
	if err := kjson.UnmarshalCaseSensitivePreserveInts(j, &loose); err != nil {
		return tm, fmt.Errorf("not valid YAML/JSON: %v", err)
	}
	tm.APIVersion, _ = loose.APIVersion.(string)
	tm.Kind, _ = loose.Kind.(string)
	if m, ok := loose.Metadata.(map[string]any); ok {
		tm.Metadata.Name, _ = m["name"].(string)
		tm.Metadata.Namespace, _ = m["namespace"].(string)
	}
	return tm, nil
}

// DecodeStrict decodes a YAML or JSON document into v the way the
// Kubernetes API server does in strict mode: field names match
// case-sensitively, and an unknown or duplicate field is an error that names
// the field's path (e.g. `unknown field "spec.files[0].content.foo"`).
func DecodeStrict(doc []byte, v any) error {
	unknown, err := DecodeKnown(doc, v)
	if err != nil {
		return err
	}
	if len(unknown) > 0 {
		errs := make([]error, len(unknown))
		for i, f := range unknown {
			errs[i] = fmt.Errorf("unknown field %q", f)
		}
		return errors.Join(errs...)
	}
	return nil
}

// DecodeKnown decodes a YAML or JSON document into v like DecodeStrict,
// except that fields v has no place for are ignored, as a lenient
// Kubernetes decoder ignores them: their paths (e.g.
// "spec.files[0].encoding") are returned in the decoder's order. A duplicate
// field is still an error.
func DecodeKnown(doc []byte, v any) (unknown []string, err error) {
	j, err := yaml.YAMLToJSONStrict(doc)
	if err != nil && bytes.Contains(doc, []byte("<<")) {
		// A YAML merge key (<<: *anchor) brings in keys that the mapping
		// may override; the strict converter calls that a duplicate. Check
		// for real duplicates on the node tree, then convert.
		if derr := duplicateKeys(doc); derr != nil {
			return nil, fmt.Errorf("not valid YAML/JSON: %v", derr)
		}
		j, err = yaml.YAMLToJSON(doc)
	}
	if err != nil {
		return nil, fmt.Errorf("not valid YAML/JSON: %v", err)
	}
	strictErrs, err := kjson.UnmarshalStrict(j, v)
	if err != nil {
		return nil, err
	}
	var others []error
	for _, e := range strictErrs {
		var fe kjson.FieldError
		if errors.As(e, &fe) && strings.HasPrefix(e.Error(), "unknown field ") {
			unknown = append(unknown, fe.FieldPath())
			continue
		}
		others = append(others, e)
	}
	if len(others) > 0 {
		return nil, errors.Join(others...)
	}
	return unknown, nil
}

// DecodeLoose decodes a YAML or JSON document into v, ignoring unknown
// fields (for envelopes such as a List whose items are decoded strictly
// afterwards).
func DecodeLoose(doc []byte, v any) error {
	j, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return fmt.Errorf("not valid YAML/JSON: %v", err)
	}
	return kjson.UnmarshalCaseSensitivePreserveInts(j, v)
}

// duplicateKeys reports a key given twice in one mapping of doc. Keys a
// merge key (<<) brings in are not counted: the mapping's own keys
// override them, as YAML merge keys specify.
func duplicateKeys(doc []byte) error {
	var root yamlv3.Node
	dec := yamlv3.NewDecoder(bytes.NewReader(doc))
	for {
		err := dec.Decode(&root)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := walkDuplicates(&root); err != nil {
			return err
		}
	}
}

func walkDuplicates(n *yamlv3.Node) error {
	if n.Kind == yamlv3.MappingNode {
		seen := map[string]int{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Tag == "!!merge" {
				continue
			}
			if line, ok := seen[k.Value]; ok {
				return fmt.Errorf("line %d: key %q already set in map (line %d)", k.Line, k.Value, line)
			}
			seen[k.Value] = k.Line
		}
	}
	for _, c := range n.Content {
		if err := walkDuplicates(c); err != nil {
			return err
		}
	}
	return nil
}
