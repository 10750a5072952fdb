package model

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// MarkInput marks what is the user's input; a Failure or a context's end
// stays a failure wherever it is wrapped or joined.
func TestMarkInput(t *testing.T) {
	bad := errors.New("osc.yaml: kind \"ConfigMap\"")
	down := &Failure{Err: errors.New("registry down")}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"plain error", MarkInput(bad), true},
		{"wrapped", fmt.Errorf("render: %w", MarkInput(bad)), true},
		{"an item's Error", fmt.Errorf("render: %w", Errorf(Origin{Document: "osc.yaml"}, "/etc/x", "bad")), true},
		{"a Failure", MarkInput(fmt.Errorf("imageRef: %w", down)), false},
		{"joined with a Failure", MarkInput(errors.Join(bad, down)), false},
		{"a Failure holding an item's Error", fmt.Errorf("render: %w", &Failure{Err: Errorf(Origin{Document: "osc.yaml"}, "/etc/x", "imageRef: down")}), false},
		{"input joined with a Failure", errors.Join(MarkInput(bad), down), false},
		{"a context's end", MarkInput(fmt.Errorf("load: %w", context.Canceled)), false},
		{"unmarked", bad, false},
		{"nil", MarkInput(nil), false},
	} {
		if got := IsInput(tc.err); got != tc.want {
			t.Errorf("%s: IsInput(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}
