package imageref_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"sigs.k8s.io/yaml"

	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/sources/gardener"
	"github.com/oslayer/oslayer/sources/imageref"
	"github.com/oslayer/oslayer/test/fixtures"
	"github.com/oslayer/oslayer/test/regtest"
)

// TestGardenerFixtureThroughMirror loads the full worker OSC, whose imageRefs
// point at europe-docker.pkg.dev, with a real image reader mirrored to a
// loopback registry seeded with images holding those files.
func TestGardenerFixtureThroughMirror(t *testing.T) {
	p := fixtures.Path(t, "gardener", "generated", "osc-worker-a-reconcile-full.yaml")
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	reg := regtest.Memory(t)
	const host = "europe-docker.pkg.dev"
	// Every imageRef of the fixture: image and filePathInImage.
	re := regexp.MustCompile(`imageRef:\n\s+filePathInImage: (\S+)\n\s+image: (\S+)`)
	refs := re.FindAllStringSubmatch(string(data), -1)
	if len(refs) != 3 {
		t.Fatalf("found %d imageRefs in the fixture, want 3", len(refs))
	}
	want := map[string]string{}
	for _, m := range refs {
		file, image := m[1], m[2]
		if !strings.HasPrefix(image, host+"/") {
			t.Fatalf("imageRef %s is not on %s", image, host)
		}
		body := "binary " + file + " of " + image
		img, err := mutate.AppendLayers(empty.Image,
			layer(t, entry{name: strings.TrimPrefix(file, "/"), body: "old"}),
			layer(t, entry{name: strings.TrimPrefix(file, "/"), body: body, mode: 0o755}))
		if err != nil {
			t.Fatal(err)
		}
		d := push(t, img, reg.Host+strings.TrimPrefix(image, host))
		repo := image[:strings.LastIndex(image, ":")]
		want[file] = body + "|" + reg.Host + strings.TrimPrefix(repo, host) + "@" + d.String()
	}
	var osc struct {
		Spec struct {
			Files []struct {
				Path        string  `json:"path"`
				Permissions *uint32 `json:"permissions"`
			} `json:"files"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &osc); err != nil {
		t.Fatal(err)
	}
	perms := map[string]uint32{}
	for _, f := range osc.Spec.Files {
		perms[f.Path] = 0o600
		if f.Permissions != nil {
			perms[f.Path] = *f.Permissions
		}
	}
	r := imageref.New(&registry.Options{Mirrors: []registry.Mirror{{From: host, To: reg.Host}}, Keychain: authn.NewMultiKeychain()})
	cfg, err := gardener.Load(context.Background(), []string{p}, gardener.Options{Images: r, SecretsDir: filepath.Dir(p)})
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for _, f := range cfg.Files {
		if f.FromImage == "" {
			continue
		}
		got++
		var file string
		for _, m := range refs {
			if strings.HasSuffix(f.Path, filepath.Base(m[1])) || (f.Path == "/opt/bin/opentelemetry-collector" && m[1] == "/bin/otelcol") {
				file = m[1]
			}
		}
		if w := want[file]; string(f.Data)+"|"+f.FromImage != w {
			t.Errorf("%s: got %q|%s, want %s", f.Path, f.Data, f.FromImage, w)
		}
		// The mode follows the OSC permissions, not the image (0755 in
		// the image; gardener-node-agent ignores it).
		if wm := perms[f.Path]; f.Mode != wm {
			t.Errorf("%s: mode %04o, want the OSC's %04o", f.Path, f.Mode, wm)
		}
	}
	if got != 3 {
		t.Errorf("%d files from images, want 3", got)
	}
}
