package model

import (
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
