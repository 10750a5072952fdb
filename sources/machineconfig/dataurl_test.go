package machineconfig_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vincent-petithory/dataurl"
	"sigs.k8s.io/yaml"

	"github.com/oslayer/oslayer/sources/machineconfig"
	"github.com/oslayer/oslayer/test/fixtures"
)

func TestDecodeDataURL(t *testing.T) {
	cases := []struct{ in, out, err string }{
		{"data:,", "", ""},
		{"data:,hi%20you%0A", "hi you\n", ""},
		{"data:,a+b", "a+b", ""},
		{"data:text/plain;charset=utf-8;base64,aGVsbG8=", "hello", ""},
		{"data:;base64,aGVsbG8", "hello", ""},
		{"data:;base64,aGVs%0AbG8=", "hello", ""},
		{"DATA:,x", "x", ""},
		{"data:;base64,!!!!", "", "invalid data URL: invalid base64: illegal base64 data at input byte 0"},
		{"data:,%zz", "", `invalid data URL: invalid escape "%zz" at offset 0`},
		{"data:,%4", "", `invalid data URL: truncated escape "%4" at offset 0`},
		{"data:text/plain", "", "invalid data URL: missing ','"},
		{"data:;base64;charset=x,aGk=", "", ";base64 must be the last parameter"},
		{"http://x", "", "not a data URL"},
		{"data:,0123456789a", "", "data URL content of 11 bytes exceeds the limit of 10 bytes"},
		{"data:;base64,MDEyMzQ1Njc4OWE=", "", "data URL content of 11 bytes exceeds the limit of 10 bytes"},
	}
	for _, c := range cases {
		got, err := machineconfig.DecodeDataURL(c.in, 10)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: error %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || string(got) != c.out {
			t.Errorf("%q: got %q, %v; want %q", c.in, got, err, c.out)
		}
	}
}

// FuzzDecodeDataURL: never panics, output within the limit, and plain
// percent-encoded round trips hold.
func FuzzDecodeDataURL(f *testing.F) {
	for _, s := range []string{"data:,", "data:,a%20b", "data:;base64,aGVsbG8=", "data:text/plain;charset=utf-8;base64,aGk", "data:,%", "data:;base64,====", "data:a;b;base64,%41%41%3D%3D"} {
		f.Add(s)
	}
	// Seed with every data URL of the MachineConfig fixtures.
	{
		files, _ := filepath.Glob(filepath.Join(fixtures.Dir(f), "mco", "*", "rendered-*.yaml"))
		for _, p := range files {
			data, err := os.ReadFile(p)
			if err != nil {
				f.Fatal(err)
			}
			var m map[string]any
			if err := yaml.Unmarshal(data, &m); err != nil {
				f.Fatal(err)
			}
			for _, fl := range list(m["spec"], "config", "storage", "files") {
				if src := str(fl.(map[string]any)["contents"], "source"); src != "" {
					f.Add(src)
				}
			}
		}
	}
	f.Fuzz(func(t *testing.T, s string) {
		const limit = 1 << 16
		out, err := machineconfig.DecodeDataURL(s, limit)
		if err == nil && len(out) > limit {
			t.Fatalf("output %d bytes over the limit", len(out))
		}
		// Differential: where Ignition's own data URL parser accepts the
		// input, both must produce the same bytes (what Ignition would
		// write on a node is what the image holds).
		if du, ierr := dataurl.DecodeString(s); ierr == nil && err == nil && !bytes.Equal(du.Data, out) {
			t.Fatalf("%q: Ignition decodes %q, we decode %q", s, du.Data, out)
		}
	})
}

// TestDataURLsMatchIgnition: every data URL of the MachineConfig fixtures
// decodes to the same bytes as with the parser Ignition uses.
func TestDataURLsMatchIgnition(t *testing.T) {
	files, _ := filepath.Glob(fixtures.Path(t, "mco", "*", "*", "*.yaml"))
	n := 0
	for _, p := range files {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := yaml.Unmarshal(data, &m); err != nil {
			t.Fatal(err)
		}
		for _, fl := range list(m["spec"], "config", "storage", "files") {
			src := str(fl.(map[string]any)["contents"], "source")
			if src == "" {
				continue
			}
			n++
			du, err := dataurl.DecodeString(src)
			if err != nil {
				t.Fatalf("%s: Ignition's parser: %v", p, err)
			}
			got, err := machineconfig.DecodeDataURL(src, 1<<26)
			if err != nil || !bytes.Equal(got, du.Data) {
				t.Errorf("%s: %.60q: got %d bytes (%v), want %d", p, src, len(got), err, len(du.Data))
			}
		}
	}
	if n < 100 {
		t.Errorf("only %d data URLs checked", n)
	}
}
