package sign

import "testing"

func TestBaseURI(t *testing.T) {
	d := "sha256:" + "ab"
	for _, c := range []struct{ ref, want string }{
		{"quay.io/fedora/fedora-coreos:stable", "docker://quay.io/fedora/fedora-coreos@" + d},
		{"quay.io/fedora/fedora-coreos@sha256:0000", "docker://quay.io/fedora/fedora-coreos@" + d},
		{"127.0.0.1:5000/fcos/base", "docker://127.0.0.1:5000/fcos/base@" + d},
		{"oci:examples/base", "oci:examples/base@" + d},
		{"oci:out/base:latest", "oci:out/base@" + d},
	} {
		if got := baseURI(c.ref, d); got != c.want {
			t.Errorf("baseURI(%q) = %q, want %q", c.ref, got, c.want)
		}
	}
}
