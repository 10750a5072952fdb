package model

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
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
		return nil, LocateTypeError(j, err)
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
	return LocateTypeError(j, kjson.UnmarshalCaseSensitivePreserveInts(j, v))
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

// FieldTypeError is a value of the wrong JSON type for its field, located
// in the document: Path names the field with the index of every list item
// on the way ("spec.files[4].permissions"), as the other errors about an
// input do.
type FieldTypeError struct {
	Path string // "spec.files[4].permissions"
	Got  string // `a string ("rwx")`
	Want string // "a number (uint32)"
}

func (e *FieldTypeError) Error() string { return e.Path + ": " + e.Problem() }

// Problem is the error without the field's path.
func (e *FieldTypeError) Problem() string { return fmt.Sprintf("got %s, want %s", e.Got, e.Want) }

// maxLocateTokens bounds the walk that locates a type error (documents are
// bounded by the input size limit; this bounds the work on any).
const maxLocateTokens = 1 << 22

// LocateTypeError turns err, a JSON decoder's type error (encoding/json's
// or the Kubernetes decoder's) about the JSON document j, into a
// *FieldTypeError naming the field with its item indices. Any other error
// is returned as it is.
func LocateTypeError(j []byte, err error) error {
	offset, want, ok := typeErrorOf(err)
	if !ok {
		return err
	}
	path, got, ok := valueAt(j, offset)
	if !ok || path == "" {
		return err
	}
	return &FieldTypeError{Path: path, Got: got, Want: describeType(want)}
}

// LocateTypeErrorIn decodes the JSON document j into a new value of v's
// type with encoding/json and returns the located type error, if any (for
// a decoder, such as Ignition's, that reports a type error without the
// field's path); nil when there is none.
func LocateTypeErrorIn(j []byte, v any) *FieldTypeError {
	t := reflect.TypeOf(v)
	if t == nil || t.Kind() != reflect.Pointer {
		return nil
	}
	err := json.Unmarshal(j, reflect.New(t.Elem()).Interface())
	var fe *FieldTypeError
	if errors.As(LocateTypeError(j, err), &fe) {
		return fe
	}
	return nil
}

// typeErrorOf reads the offset and the wanted Go type of a type error:
// encoding/json's *UnmarshalTypeError, or the same struct of the
// Kubernetes decoder (sigs.k8s.io/json, whose copy of encoding/json is
// internal, so its error is read by its field names).
func typeErrorOf(err error) (offset int64, want reflect.Type, ok bool) {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return te.Offset, te.Type, te.Type != nil
	}
	v := reflect.ValueOf(err)
	if err == nil || v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct || v.Elem().Type().Name() != "UnmarshalTypeError" {
		return 0, nil, false
	}
	s := v.Elem()
	off, typ := s.FieldByName("Offset"), s.FieldByName("Type")
	if !off.IsValid() || off.Kind() != reflect.Int64 || !typ.IsValid() || !typ.CanInterface() {
		return 0, nil, false
	}
	want, ok = typ.Interface().(reflect.Type)
	return off.Int(), want, ok && want != nil
}

// valueAt walks the JSON document j to the value the decoder stopped at
// (the first one ending at or after offset) and returns its path and a
// description of it.
func valueAt(j []byte, offset int64) (path, got string, ok bool) {
	type frame struct {
		array   bool
		index   int
		key     string
		wantKey bool
	}
	var stack []*frame
	where := func() string {
		var b strings.Builder
		for _, f := range stack {
			if f.array {
				fmt.Fprintf(&b, "[%d]", f.index)
				continue
			}
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(f.key)
		}
		return b.String()
	}
	// next moves the innermost container past the value just read.
	next := func() {
		if len(stack) == 0 {
			return
		}
		if f := stack[len(stack)-1]; f.array {
			f.index++
		} else {
			f.wantKey = true
		}
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber()
	for range maxLocateTokens {
		tok, err := dec.Token()
		if err != nil {
			return "", "", false
		}
		if len(stack) > 0 {
			if f := stack[len(stack)-1]; !f.array && f.wantKey {
				if k, isKey := tok.(string); isKey {
					f.key, f.wantKey = k, false
					continue
				}
			}
		}
		if d, isDelim := tok.(json.Delim); isDelim && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			next()
			continue
		}
		if dec.InputOffset() >= offset {
			return where(), describeValue(tok), true
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{wantKey: true})
		case json.Delim('['):
			stack = append(stack, &frame{array: true})
		default:
			next()
		}
	}
	return "", "", false
}

// describeValue describes a JSON token as a user wrote it.
func describeValue(tok json.Token) string {
	switch v := tok.(type) {
	case json.Delim:
		if v == '[' {
			return "a list"
		}
		return "an object"
	case string:
		if r := []rune(v); len(r) > 40 {
			v = string(r[:40]) + "…"
		}
		return fmt.Sprintf("a string (%q)", v)
	case json.Number:
		return fmt.Sprintf("a number (%s)", v)
	case bool:
		return fmt.Sprintf("a boolean (%t)", v)
	case nil:
		return "null"
	}
	return fmt.Sprint(tok)
}

// describeType describes what a field of Go type t takes, in JSON terms.
func describeType(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return "a base64 string"
		}
		return "a list"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return fmt.Sprintf("a number (%s)", t.Kind())
	}
	return t.String()
}
