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

func TestSpellText(t *testing.T) {
	for _, c := range []struct {
		msg  string
		n    Name
		want string
	}{
		{"image has 9 layers, more than 8 (preflight.warnLayers): split", "preflight.warnLayers", "image has 9 layers, more than 8 (--warn-layers): split"},
		{"allowed by preflight.allowSecrets /x", "preflight.allowSecrets", "allowed by --allow-secret /x"},
		{"none of the layers of the base (base) are in the base", "base", "none of the layers of the base (--base) are in the base"},
		{"nodes are amd64 (arch amd64)", "arch", "nodes are amd64 (--arch amd64)"},
		{"no field named", "", "no field named"},
	} {
		spell := func(n Name) string {
			return map[Name]string{"preflight.warnLayers": "--warn-layers", "preflight.allowSecrets": "--allow-secret", "base": "--base", "arch": "--arch"}[n]
		}
		if got := SpellText(c.msg, c.n, spell); got != c.want {
			t.Errorf("SpellText(%q, %s) = %q, want %q", c.msg, c.n, got, c.want)
		}
	}
}

// An error formatted into another (%v) is spelled with it.
func TestSpellNested(t *testing.T) {
	err := Errorf("file f: %v", Errorf("build with %v", Name("base")))
	if got, want := Spell(err, flag), "file f: build with --base"; got != want {
		t.Errorf("Spell = %q, want %q", got, want)
	}
	if !err.Names() {
		t.Error("Names is false for a Speller argument")
	}
}
