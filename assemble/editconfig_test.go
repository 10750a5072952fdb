package assemble

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// editConfigCases are base configs as registries serve them: indented,
// with characters JSON escapes for HTML, unknown fields, no labels, null
// members; want is the sha256 of what assembling made of them before the
// base's config was parsed once per base (the image digests must not
// change).
var editConfigCases = []struct {
	name, raw, want string
}{
	{"indented", `{
  "architecture": "amd64",
  "os": "linux",
  "x-unknown": {"b": [1, 2,  3], "a": "<&>"},
  "config": {"Env": ["PATH=/usr/bin"], "Labels": {"ostree.bootable": "true", "z": "a<b>&c"}, "Cmd": null},
  "history": [ {"created": "2023-01-01T00:00:00Z", "created_by": "rpm-ostree <compose>"},
    {"empty_layer": true} ],
  "rootfs": {"type": "layers", "diff_ids": ["sha256:` + strings.Repeat("a", 64) + `"]},
  "created": "2023-01-01T00:00:00Z"
}`, "2ca225a34fb4076df91e9a8cdbfbb36f5537dab1b94030a3ab98cdd63a0ee25c"},
	{"bare", `{"architecture":"arm64","os":"linux","rootfs":{"type":"layers","diff_ids":[]}}`, "e532a782da7a7544a8433af7a4209afaad56d289f0ff155743e166109eca7909"},
	{"nulls", `{"config":null,"history":null,"rootfs":null,"created":null,"\u00e9t\u00e9":"\u2028"}`, "73c55b2cf7f854207038f910f9823e3c600fdc4fff997bf8d6c03bbc3c08f9e5"},
}

func TestEditConfigBytes(t *testing.T) {
	labels := map[string]string{LabelPool: "worker<1>", LabelKernelArgs: `["a&b"]`}
	h1, _ := json.Marshal(v1.History{Created: v1.Time{Time: time.Unix(1700000000, 0).UTC()}, CreatedBy: "oslayer <files>", Comment: HistoryCommentPrefix + "files"})
	diffIDs := []v1.Hash{{Algorithm: "sha256", Hex: strings.Repeat("b", 64)}, {Algorithm: "sha256", Hex: strings.Repeat("c", 64)}}
	for _, c := range editConfigCases {
		p, err := splitConfig([]byte(c.raw))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		out, err := p.edit(labels, []json.RawMessage{h1}, diffIDs, time.Unix(1700000000, 0).UTC())
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		sum := sha256.Sum256(out)
		if got := hex.EncodeToString(sum[:]); got != c.want {
			t.Errorf("%s: sha256 %s, want %s\n%s", c.name, got, c.want, out)
		}
	}
}

// countingImage counts how often the base's manifest and config are read.
type countingImage struct {
	v1.Image
	manifests, configs atomic.Int32
}

func (c *countingImage) Manifest() (*v1.Manifest, error) {
	c.manifests.Add(1)
	return c.Image.Manifest()
}

func (c *countingImage) RawConfigFile() ([]byte, error) {
	c.configs.Add(1)
	return c.Image.RawConfigFile()
}

// TestAssembleParsesBaseOnce: pools assembled on one resolved base read
// and parse its manifest and config once between them, and each image's
// parsed config is what its config bytes say.
func TestAssembleParsesBaseOnce(t *testing.T) {
	ctx := context.Background()
	base, err := ResolveBase(ctx, layoutBase(t, synthBase(t)), nil, "")
	if err != nil {
		t.Fatal(err)
	}
	counted := &countingImage{Image: base.Image.(*baseImage).Image}
	shared := *base
	shared.Image = cacheBase(counted)
	var digests []v1.Hash
	for _, pool := range []string{"worker", "infra", "worker"} {
		b, err := Assemble(ctx, AssembleRequest{BaseImage: &shared, Pool: pool, Rendered: rendered(t), Version: "v1"})
		if err != nil {
			t.Fatal(err)
		}
		// The uncached base gives the same image.
		plain := *base
		plain.Image = counted.Image
		want, err := Assemble(ctx, AssembleRequest{BaseImage: &plain, Pool: pool, Rendered: rendered(t), Version: "v1"})
		if err != nil {
			t.Fatal(err)
		}
		if b.Digest != want.Digest {
			t.Errorf("pool %s: digest %s on the cached base, %s without", pool, b.Digest, want.Digest)
		}
		raw, _ := b.Image.RawConfigFile()
		parsed, err := v1.ParseConfigFile(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		cf, _ := b.Image.ConfigFile()
		gotJSON, _ := json.Marshal(cf)
		wantJSON, _ := json.Marshal(parsed)
		if !bytes.Equal(gotJSON, wantJSON) || !reflect.DeepEqual(cf, parsed) {
			t.Errorf("pool %s: parsed config\n%s\nwant (its bytes parsed)\n%s", pool, gotJSON, wantJSON)
		}
		digests = append(digests, b.Digest)
	}
	if digests[0] != digests[2] || digests[0] == digests[1] {
		t.Errorf("digests %v: want the same for the same pool, another for another", digests)
	}
	if m, c := counted.manifests.Load(), counted.configs.Load(); m != 1 || c != 1 {
		t.Errorf("base manifest read %d times, config %d times; want once each", m, c)
	}
	// What a caller changes in what it got does not reach the next.
	m, _ := shared.Image.Manifest()
	m.Layers = nil
	cf, _ := shared.Image.ConfigFile()
	cf.Config.Labels["x"] = "y"
	m2, _ := shared.Image.Manifest()
	cf2, _ := shared.Image.ConfigFile()
	if len(m2.Layers) == 0 || cf2.Config.Labels["x"] != "" {
		t.Error("a caller's change to the base's manifest or config reached another caller")
	}
}
