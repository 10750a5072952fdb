package pipeline

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/oslayer/oslayer/pipeline/settings"
)

// TestIsInput: what Check, SetSettings and New refuse is bad input, also
// wrapped or joined; a failure to run (the base of Prepare that cannot be
// read) or any other error is not, nor a join of both.
func TestIsInput(t *testing.T) {
	dir := t.TempDir()
	checked := Spec{Target: "oci:" + dir, BaseIndex: "sometimes", Preflight: Preflight{Skip: []string{"nope"}, WarnLayers: 9, MaxLayers: 3}}.Check()
	var s Spec
	set := s.SetSettings(settings.Settings{Preflight: &settings.Preflight{MaxAddedBytes: "lots"}})
	_, target := New(Spec{Target: "oci:" + dir + "@sha256:00"}, Env{})
	for name, err := range map[string]error{"Check": checked, "SetSettings": set, "New's target": target,
		"wrapped": fmt.Errorf("build: %w", checked)} {
		if !IsInput(err) {
			t.Errorf("%s: %v is not bad input", name, err)
		}
	}
	p, err := New(Spec{Target: "oci:" + filepath.Join(dir, "out"), Base: "oci:" + filepath.Join(dir, "none"),
		Inputs: Inputs{Pool: "worker", OSCs: []string{"none.yaml"}}}, Env{})
	if err != nil {
		t.Fatal(err)
	}
	_, prepared := p.Prepare(context.Background())
	if prepared == nil {
		t.Fatal("Prepare of a base that does not exist: no error")
	}
	for name, err := range map[string]error{"nil": nil, "Prepare's base": prepared, "other": errors.New("x"),
		"joined with a failure": errors.Join(checked, errors.New("registry down"))} {
		if IsInput(err) {
			t.Errorf("%s: %v is bad input", name, err)
		}
	}
}
