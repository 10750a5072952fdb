package gardener_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/oslayer/oslayer/sources/gardener"
	"github.com/oslayer/oslayer/test/fixtures"
)

// FuzzDecode feeds arbitrary bytes to the OSC decoder, seeded with every
// Gardener fixture. It must never panic; when it succeeds, every item has a
// valid origin and no content over the limit.
func FuzzDecode(f *testing.F) {
	for _, sub := range []string{"generated", "verbatim"} {
		files, _ := filepath.Glob(filepath.Join(fixtures.Dir(f), "gardener", sub, "*"))
		for _, seed := range fixtures.Seeds(f, files...) { // shrunk: a short run explores
			f.Add(seed)
		}
	}
	f.Add([]byte(fileDoc("/etc/x", "      inline: {encoding: b64, data: eA==}\n")))
	const limit = 1 << 16
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := gardener.Decode(context.Background(), "fuzz.yaml", data, gardener.Options{Images: &fakeImages{}, MaxContentSize: limit})
		if err != nil {
			if cfg != nil {
				t.Fatal("config and error")
			}
			return
		}
		for _, fl := range cfg.Files {
			if fl.Path == "" || fl.Path[0] != '/' || fl.Origin.Document != "fuzz.yaml" || len(fl.Data) > limit && fl.FromImage == "" {
				t.Fatalf("bad file %+v", fl)
			}
		}
		for _, u := range cfg.Units {
			if u.Enabled == nil || u.Origin.Field == "" {
				t.Fatalf("bad unit %+v", u)
			}
		}
	})
}
