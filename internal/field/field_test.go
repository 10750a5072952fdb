package field

import (
	"errors"
	"fmt"
	"testing"
)

func flag(n Name) string { return "--" + string(n) }

func TestSpell(t *testing.T) {
	inner := Inputf("no base image: give %v", Name("base"))
	err := fmt.Errorf("assemble: %w", Errorf("pool %s: %w (%v)", "workers", inner, Name("pool")))
	if got, want := err.Error(), "assemble: pool workers: no base image: give base (pool)"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if got, want := Spell(err, flag), "assemble: pool workers: no base image: give --base (--pool)"; got != want {
		t.Errorf("Spell = %q, want %q", got, want)
	}
	joined := errors.Join(Errorf("%v is empty", Name("pool")), errors.New("other"))
	if got, want := Spell(joined, flag), "--pool is empty\nother"; got != want {
		t.Errorf("Spell(joined) = %q, want %q", got, want)
	}
	if !errors.Is(err, inner) {
		t.Error("the wrapped error is not in the chain")
	}
	var in interface{ InputError() bool }
	if !errors.As(err, &in) || in.InputError() {
		t.Error("the outer Errorf is not input, and it is the first in the chain")
	}
	if !inner.InputError() {
		t.Error("Inputf is not input")
	}
	if got := inner.Fields(); len(got) != 1 || got[0] != "base" {
		t.Errorf("Fields = %v", got)
	}
}
