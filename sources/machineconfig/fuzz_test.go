package machineconfig_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/oslayer/oslayer/sources/machineconfig"
	"github.com/oslayer/oslayer/test/fixtures"
)

// FuzzDecode feeds arbitrary bytes to the MachineConfig decoder, seeded with
// the per-role fixtures (shrunk) and a spec 2.2 config. It must never panic and never return both a config
// and an error.
func FuzzDecode(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(fixtures.Dir(f), "mco", "aws", "*", "*.yaml"))
	files = append(files, filepath.Join(fixtures.Dir(f), "mco", "misc", "server-test-config.yaml")) // Ignition spec 2.2
	// Shrunk (fixtures.Seeds): whole fixtures keep a short run minimising.
	for _, seed := range fixtures.Seeds(f, files...) {
		f.Add(seed)
	}
	f.Add([]byte(fileMC(`{path: /etc/x, contents: {compression: gzip, source: "data:;base64,H4sIAAAAAAAA/w=="}}`)))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := machineconfig.Decode(context.Background(), "fuzz.yaml", data, machineconfig.Options{})
		if err != nil {
			if cfg != nil {
				t.Fatal("config and error")
			}
			return
		}
		for _, fl := range cfg.Files {
			if fl.Path == "" || fl.Path[0] != '/' || fl.Origin.Name == "" {
				t.Fatalf("bad file %+v", fl)
			}
		}
	})
}
