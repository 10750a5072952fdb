package model

import (
	"errors"
	"strings"
	"testing"
)

// A YAML merge key is YAML: the mapping's own keys override the merged
// ones. A key given twice in one mapping stays an error.
func TestDecodeStrictMergeKeys(t *testing.T) {
	type labels struct {
		Labels map[string]string `json:"labels"`
		Other  map[string]string `json:"other"`
	}
	var v labels
	doc := "labels: &l\n  a: \"1\"\n  b: \"2\"\nother:\n  <<: *l\n  b: \"3\"\n"
	if err := DecodeStrict([]byte(doc), &v); err != nil || v.Other["a"] != "1" || v.Other["b"] != "3" {
		t.Errorf("merge key with an override: %+v, %v", v, err)
	}
	for _, bad := range []string{
		"labels:\n  a: \"1\"\n  a: \"2\"\n",
		"labels: &l\n  a: \"1\"\nother:\n  <<: *l\n  b: \"3\"\n  b: \"4\"\n",
	} {
		if err := DecodeStrict([]byte(bad), &v); err == nil || !strings.Contains(err.Error(), "already set in map") {
			t.Errorf("duplicate key in %q: %v", bad, err)
		}
	}
}

func TestLocateTypeError(t *testing.T) {
	type item struct {
		Mode *uint32          `json:"mode"`
		Tags []string         `json:"tags"`
		Meta map[string]int64 `json:"meta"`
	}
	type doc struct {
		Spec struct {
			Items []item `json:"items"`
		} `json:"spec"`
	}
	for _, tc := range []struct{ doc, want string }{
		{`{"spec": {"items": [{"mode": 1}, {"mode": "rwx"}]}}`, `spec.items[1].mode: got a string ("rwx"), want a number (uint32)`},
		{`{"spec": {"items": [{"tags": ["a"]}, {}, {"tags": ["a", {"b": 1}]}]}}`, `spec.items[2].tags[1]: got an object, want a string`},
		{`{"spec": {"items": [{"meta": {"a": 1, "b": true}}]}}`, `spec.items[0].meta.b: got a boolean (true), want a number (int64)`},
		{`{"spec": {"items": {"mode": 1}}}`, `spec.items: got an object, want a list`},
		{"spec:\n  items:\n  - mode: -1\n", `spec.items[0].mode: got a number (-1), want a number (uint32)`},
	} {
		for name, decode := range map[string]func([]byte, any) error{
			"DecodeStrict": DecodeStrict, "DecodeLoose": DecodeLoose,
		} {
			var d doc
			err := decode([]byte(tc.doc), &d)
			var fe *FieldTypeError
			if !errors.As(err, &fe) || err.Error() != tc.want {
				t.Errorf("%s %s:\n got %v\nwant %s", name, tc.doc, err, tc.want)
			}
		}
	}
}
