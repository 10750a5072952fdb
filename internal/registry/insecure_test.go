package registry

import "testing"

func TestInsecureRegistries(t *testing.T) {
	o := &Options{Insecure: []string{"registry.example.com:5000"}}
	for ref, scheme := range map[string]string{
		"registry.example.com:5000/pools/worker:v1": "http",
		"registry.example.com/pools/worker:v1":      "https",
		"quay.io/fedora/fedora-coreos:stable":       "https",
		"127.0.0.1:5000/x:y":                        "http",
	} {
		r, err := o.ParseReference(ref)
		if err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
		if got := r.Context().Scheme(); got != scheme {
			t.Errorf("%s: scheme %s, want %s", ref, got, scheme)
		}
		if r.String() != ref {
			t.Errorf("%s: parsed as %s", ref, r)
		}
	}
	for _, bad := range []string{"", "http://x.example.com", "x.example.com/path", "a b"} {
		if _, err := ParseInsecure(bad); err == nil {
			t.Errorf("ParseInsecure(%q) accepted", bad)
		}
	}
	if h, err := ParseInsecure(" reg.example.com:5000 "); err != nil || h != "reg.example.com:5000" {
		t.Errorf("ParseInsecure: %q, %v", h, err)
	}
}
