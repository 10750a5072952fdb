package model_test

import (
	"strings"
	"testing"

	"github.com/oslayer/oslayer/sources/model"
)

func TestValidateUnitName(t *testing.T) {
	ok := []string{"a.service", "kubelet.service", "getty@.service", "getty@tty1.service", "a-b_c:d\\x2d.mount",
		"var-lib.mount", "x.socket", "x.device", "x.automount", "x.swap", "multi-user.target", "x.path", "x.timer",
		"x.slice", "x.scope", "a@b@c.service", "a.b.service", strings.Repeat("a", 247) + ".service"}
	for _, n := range ok {
		if err := model.ValidateUnitName(n); err != nil {
			t.Errorf("%q: %v", n, err)
		}
	}
	bad := map[string]string{
		"":                                    "invalid unit name: empty",
		"unit1":                               `invalid unit name "unit1": no unit type suffix`,
		"a.conf":                              `unknown unit type "conf"`,
		".service":                            "empty name before the type suffix",
		"@.service":                           "empty name before the type suffix",
		"@x.service":                          "empty name before the type suffix",
		"a b.service":                         `character ' ' not allowed`,
		"../x.service":                        `character '/' not allowed`,
		"a/b.service":                         `character '/' not allowed`,
		"a@b c.service":                       `character ' ' not allowed in the instance`,
		"a\x00.service":                       `character '\x00' not allowed`,
		"ä.service":                           `not allowed`,
		strings.Repeat("a", 248) + ".service": "longer than 255 bytes",
	}
	for n, want := range bad {
		err := model.ValidateUnitName(n)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want %q", n, err, want)
		}
	}
}

func TestValidateDropInName(t *testing.T) {
	for _, n := range []string{"10-x.conf", "a.conf"} {
		if err := model.ValidateDropInName(n); err != nil {
			t.Errorf("%q: %v", n, err)
		}
	}
	for n, want := range map[string]string{"": "empty", "drop": "must end in .conf", ".conf": "must end in .conf", "a/b.conf": "without '/'", "a\x00.conf": "NUL", "\xff.conf": "UTF-8"} {
		if err := model.ValidateDropInName(n); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want %q", n, err, want)
		}
	}
}

func TestValidatePath(t *testing.T) {
	for _, p := range []string{"/", "/etc/x", "/etc//x", "/etc/./x", "/opt/bin/kubelet", "/etc/..x"} {
		if err := model.ValidatePath(p); err != nil {
			t.Errorf("%q: %v", p, err)
		}
	}
	for p, want := range map[string]string{
		"":           "empty path",
		"etc/x":      `relative path "etc/x": paths must be absolute`,
		"/etc/../x":  `path "/etc/../x" contains a ".." element`,
		"/..":        `contains a ".." element`,
		"/etc/a\x00": "contains a NUL byte",
		"/etc/\xff":  "is not valid UTF-8",
	} {
		if err := model.ValidatePath(p); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want %q", p, err, want)
		}
	}
}

func TestSplitDocuments(t *testing.T) {
	one := []byte("---\na: 1\n")
	if d := model.SplitDocuments(one); len(d) != 1 || string(d[0]) != string(one) {
		t.Errorf("single: %q", d)
	}
	d := model.SplitDocuments([]byte("a: 1\n---\n# c\n---\nb: |\n  ---x\n  ---\n--- # x\nc: 3\n...\n"))
	if len(d) != 3 || string(d[0]) != "a: 1\n" || string(d[1]) != "b: |\n  ---x\n  ---\n" || string(d[2]) != "c: 3\n" {
		t.Errorf("multi: %q", d)
	}
	if d := model.SplitDocuments([]byte("# only\n---\n")); len(d) != 0 {
		t.Errorf("empty: %q", d)
	}
}

func TestDecodeStrict(t *testing.T) {
	var v struct {
		A struct {
			B int `json:"b"`
		} `json:"a"`
	}
	if err := model.DecodeStrict([]byte("a: {b: 1}\n"), &v); err != nil || v.A.B != 1 {
		t.Fatal(err)
	}
	if err := model.DecodeStrict([]byte("a: {b: 1, c: 2}\n"), &v); err == nil || err.Error() != `unknown field "a.c"` {
		t.Errorf("unknown: %v", err)
	}
	if err := model.DecodeStrict([]byte("a: {B: 1}\n"), &v); err == nil || err.Error() != `unknown field "a.B"` {
		t.Errorf("case: %v", err)
	}
	if err := model.DecodeStrict([]byte(`{"a": {"b": 1, "b": 2}}`), &v); err == nil || !strings.Contains(err.Error(), `"b"`) {
		t.Errorf("duplicate: %v", err)
	}
}
