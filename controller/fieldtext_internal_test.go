package controller

import (
	"fmt"
	"testing"

	"github.com/oslayer/oslayer/internal/field"
)

// A library message names the PoolImage's field, not a CLI flag.
func TestSpecText(t *testing.T) {
	err := fmt.Errorf("assemble: %w", field.Inputf("base b: image is for architecture %q, %v is %q", "amd64", field.Name("arch"), "arm64"))
	if got, want := specText(err), `assemble: base b: image is for architecture "amd64", spec.arch is "arm64"`; got != want {
		t.Errorf("specText = %q, want %q", got, want)
	}
}
