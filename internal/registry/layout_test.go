package registry

import (
	"strings"
	"testing"
)

func TestParseLayout(t *testing.T) {
	hex := strings.Repeat("ab", 32)
	for _, c := range []struct {
		ref, dir, tag, digest, err string
	}{
		{ref: "oci:out/worker", dir: "out/worker"},
		{ref: "oci:out/worker:latest", dir: "out/worker", tag: "latest"},
		{ref: "oci:/tmp/o@sha256:" + hex, dir: "/tmp/o", digest: "sha256:" + hex},
		{ref: "oci:a:b/c@sha256:" + hex, dir: "a:b/c", digest: "sha256:" + hex},
		{ref: "oci:dir@sha256:abc", err: "invalid digest"},
		{ref: "oci:@sha256:" + hex, err: "missing directory"},
		{ref: "oci:", err: "missing directory"},
		{ref: "oci:dir:bad tag", err: "invalid tag"},
	} {
		l, err := ParseLayout(c.ref)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: %+v, %v; want an error with %q", c.ref, l, err, c.err)
			}
			continue
		}
		d := ""
		if l.Digest.Hex != "" {
			d = l.Digest.String()
		}
		if err != nil || l.Dir != c.dir || l.Tag != c.tag || d != c.digest {
			t.Errorf("%s: %+v (digest %q), %v; want dir %q tag %q digest %q", c.ref, l, d, err, c.dir, c.tag, c.digest)
		}
	}
}
