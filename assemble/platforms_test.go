package assemble

import (
	"context"
	"slices"
	"strings"
	"testing"
)

// TestParsePlatforms: a list is parsed once into what every later step
// asks of it (one image or an index, all of the base's platforms, the
// single architecture as given, the normalized names), and a bad list is
// an error that quotes it and names no flag.
func TestParsePlatforms(t *testing.T) {
	for _, tc := range []struct {
		in         string
		multi, all bool
		arch       string
		norm       []string
	}{
		{"", false, false, "", nil},
		{"x86_64", false, false, "x86_64", []string{"amd64"}},
		{"arm64", false, false, "arm64", []string{"arm64"}},
		{"amd64, aarch64", true, false, "", []string{"amd64", "arm64"}},
		{"all", true, true, "", []string{"all"}},
	} {
		p, err := ParsePlatforms(tc.in)
		if err != nil {
			t.Fatalf("%q: %v", tc.in, err)
		}
		if p.Multi() != tc.multi || p.All() != tc.all || p.Arch() != tc.arch || !slices.Equal(p.Normalized(), tc.norm) {
			t.Errorf("%q: multi %v all %v arch %q normalized %v", tc.in, p.Multi(), p.All(), p.Arch(), p.Normalized())
		}
	}
	for in, want := range map[string]string{
		"amd64,x86_64": `"amd64,x86_64": amd64 given twice`,
		"all,arm64":    `"all,arm64": "all" stands alone`,
		"amd64,":       `"amd64,": empty architecture`,
	} {
		_, err := ParsePlatforms(in)
		if err == nil || err.Error() != want || strings.Contains(err.Error(), "--") {
			t.Errorf("%q: %v, want %s", in, err, want)
		}
	}
	ps, err := OnePlatform("aarch64").Resolve(context.Background(), "", nil)
	if err != nil || len(ps) != 1 || ps[0].Architecture != "arm64" || ps[0].OS != "linux" {
		t.Errorf("resolve aarch64: %v %v", ps, err)
	}
	if ps, err := (Platforms{}).Resolve(context.Background(), "", nil); err != nil || len(ps) != 1 || ps[0].Architecture != "amd64" {
		t.Errorf("resolve none: %v %v", ps, err)
	}
}
