package controller

import (
	"strings"
	"testing"

	"github.com/oslayer/oslayer/api/v1alpha1"
)

// TestChangePlatform: the platform compared when the built image is one
// image comes from spec.arch as the build parses it: the first
// architecture, normalised (x86_64 and aarch64 are amd64 and arm64);
// none, and all, compare linux/amd64 (nil); an arch the build refuses is
// refused here too, naming the field.
func TestChangePlatform(t *testing.T) {
	for _, c := range []struct {
		arch []string
		want string // "" for nil
	}{
		{nil, ""},
		{[]string{"all"}, ""},
		{[]string{"amd64"}, "linux/amd64"},
		{[]string{"x86_64"}, "linux/amd64"},
		{[]string{"aarch64", "amd64"}, "linux/arm64"},
		{[]string{" arm64"}, "linux/arm64"},
	} {
		pi := &v1alpha1.PoolImage{Spec: v1alpha1.PoolImageSpec{Arch: c.arch}}
		arch, err := platformsOf(pi)
		if err != nil {
			t.Errorf("%q: %v", c.arch, err)
			continue
		}
		got := ""
		if p := changePlatform(arch); p != nil {
			got = p.OS + "/" + p.Architecture
		}
		if got != c.want {
			t.Errorf("%q: compares %q, want %q", c.arch, got, c.want)
		}
	}
	for _, bad := range [][]string{{"amd64", "all"}, {"amd64", "x86_64"}, {"amd64", ""}} {
		pi := &v1alpha1.PoolImage{Spec: v1alpha1.PoolImageSpec{Arch: bad}}
		if _, err := platformsOf(pi); err == nil || !strings.HasPrefix(err.Error(), "spec.arch: ") {
			t.Errorf("%q: %v, want an error naming spec.arch", bad, err)
		}
	}
}
