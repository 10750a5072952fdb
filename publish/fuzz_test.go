package publish_test

import (
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/oslayer/oslayer/publish"
)

// Whatever ParseTarget accepts is a clean registry tag reference.
func FuzzParseTarget(f *testing.F) {
	for _, s := range []string{"127.0.0.1:5000/pools/worker:v1", "quay.io/x", "../x", "UPPER/case", "a b", "http://x/y", "x@sha256:00", "x//y", "oci:dir:tag"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tag, err := publish.ParseTarget(s)
		if err != nil {
			return
		}
		got := tag.Name()
		if strings.ContainsAny(got, " \t\r\n\\@") || strings.Contains(got, "://") || strings.Contains(got, "/../") || strings.Contains(got, "/./") {
			t.Fatalf("ParseTarget(%q) accepted %q", s, got)
		}
		if _, err := name.NewTag(got, name.StrictValidation); err != nil {
			t.Fatalf("ParseTarget(%q) = %q, which does not reparse: %v", s, got, err)
		}
	})
}
