package assemble

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// baseImage is a resolved base's image whose manifest, config and layers
// are read and parsed once: every build on a shared Base (a fleet run, a
// controller) uses them instead of parsing them again for each pool.
// Callers get copies (Manifest, ConfigFile, Layers), so none of them can
// change what the others see.
type baseImage struct {
	v1.Image
	once  sync.Once
	parts *baseParts
	err   error
}

// cacheBase wraps img so that its manifest, config and layers are parsed
// once (an image wrapped already is returned as it is).
func cacheBase(img v1.Image) v1.Image {
	if _, ok := img.(*baseImage); ok {
		return img
	}
	return &baseImage{Image: img}
}

func (b *baseImage) read() (*baseParts, error) {
	b.once.Do(func() { b.parts, b.err = readBase(b.Image) })
	return b.parts, b.err
}

func (b *baseImage) Manifest() (*v1.Manifest, error) {
	p, err := b.read()
	if err != nil {
		return b.Image.Manifest()
	}
	return p.manifest.DeepCopy(), nil
}

func (b *baseImage) RawConfigFile() ([]byte, error) {
	p, err := b.read()
	if err != nil {
		return b.Image.RawConfigFile()
	}
	return p.rawConfig, nil
}

func (b *baseImage) ConfigFile() (*v1.ConfigFile, error) {
	p, err := b.read()
	if err != nil {
		return b.Image.ConfigFile()
	}
	return p.config.DeepCopy(), nil
}

func (b *baseImage) Layers() ([]v1.Layer, error) {
	p, err := b.read()
	if err != nil {
		return b.Image.Layers()
	}
	return append([]v1.Layer(nil), p.layers...), nil
}

// baseParts are what assembling reads of a base, parsed. Nothing in them
// is changed after readBase.
type baseParts struct {
	manifest  *v1.Manifest
	rawConfig []byte
	config    *v1.ConfigFile
	layers    []v1.Layer
	// edit is the raw config taken apart for editConfig (nil with
	// editErr when the config is not an object editConfig can edit).
	edit    *configParts
	editErr error
}

// partsOf returns img's parts: parsed once for a base ResolveBase
// returned, parsed now for any other image.
func partsOf(img v1.Image) (*baseParts, error) {
	if b, ok := img.(*baseImage); ok {
		return b.read()
	}
	return readBase(img)
}

// readBase reads and parses img's manifest, config and layers (the
// layers stay lazy: no blob is read).
func readBase(img v1.Image) (*baseParts, error) {
	m, err := img.Manifest()
	if err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	raw, err := img.RawConfigFile()
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	cf, err := v1.ParseConfigFile(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	ls, err := img.Layers()
	if err != nil {
		return nil, fmt.Errorf("layers: %w", err)
	}
	p := &baseParts{manifest: m, rawConfig: raw, config: cf, layers: ls}
	p.edit, p.editErr = splitConfig(raw)
	return p, nil
}

// configParts is a config's JSON taken apart: every member compacted
// (with HTML characters escaped, as encoding/json writes them), the
// members of "config" likewise, its labels, and its history entries.
type configParts struct {
	top     map[string][]byte
	cfg     map[string][]byte
	labels  map[string]string
	history [][]byte
}

// splitConfig takes the raw config apart for edit.
func splitConfig(raw []byte) (*configParts, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return nil, err
	}
	p := &configParts{top: map[string][]byte{}, cfg: map[string][]byte{}, labels: map[string]string{}}
	var cfg map[string]json.RawMessage
	if c, ok := top["config"]; ok && string(c) != "null" {
		if err := json.Unmarshal(c, &cfg); err != nil {
			return nil, fmt.Errorf("field config: %w", err)
		}
	}
	if l, ok := cfg["Labels"]; ok && string(l) != "null" {
		if err := json.Unmarshal(l, &p.labels); err != nil {
			return nil, fmt.Errorf("field config.Labels: %w", err)
		}
	}
	var hist []json.RawMessage
	if h, ok := top["history"]; ok && string(h) != "null" {
		if err := json.Unmarshal(h, &hist); err != nil {
			return nil, fmt.Errorf("field history: %w", err)
		}
	}
	compact := func(dst map[string][]byte, src map[string]json.RawMessage) error {
		for k, v := range src {
			c, err := json.Marshal(v)
			if err != nil {
				return err
			}
			dst[k] = c
		}
		return nil
	}
	if err := compact(p.top, top); err != nil {
		return nil, err
	}
	if err := compact(p.cfg, cfg); err != nil {
		return nil, err
	}
	for _, h := range hist {
		c, err := json.Marshal(h)
		if err != nil {
			return nil, err
		}
		p.history = append(p.history, c)
	}
	return p, nil
}

// edit returns the config with labels added, history entries appended,
// rootfs.diff_ids replaced and created set, byte for byte what
// encoding/json writes for the edited members (keys sorted): a pure
// function of the inputs.
func (p *configParts) edit(labels map[string]string, history []json.RawMessage, diffIDs []v1.Hash, created time.Time) ([]byte, error) {
	lb := make(map[string]string, len(p.labels)+len(labels))
	for k, v := range p.labels {
		lb[k] = v
	}
	for k, v := range labels {
		lb[k] = v
	}
	lbRaw, err := json.Marshal(lb)
	if err != nil {
		return nil, err
	}
	cfg := make(map[string][]byte, len(p.cfg)+1)
	for k, v := range p.cfg {
		cfg[k] = v
	}
	cfg["Labels"] = lbRaw
	var hist bytes.Buffer
	hist.WriteByte('[')
	for i, h := range p.history {
		if i > 0 {
			hist.WriteByte(',')
		}
		hist.Write(h)
	}
	for i, h := range history {
		c, err := json.Marshal(h)
		if err != nil {
			return nil, err
		}
		if i > 0 || len(p.history) > 0 {
			hist.WriteByte(',')
		}
		hist.Write(c)
	}
	hist.WriteByte(']')
	top := make(map[string][]byte, len(p.top)+4)
	for k, v := range p.top {
		top[k] = v
	}
	if top["config"], err = writeObject(cfg); err != nil {
		return nil, err
	}
	top["history"] = hist.Bytes()
	if top["rootfs"], err = json.Marshal(v1.RootFS{Type: "layers", DiffIDs: diffIDs}); err != nil {
		return nil, err
	}
	if top["created"], err = json.Marshal(created.Format(time.RFC3339)); err != nil {
		return nil, err
	}
	return writeObject(top)
}

// writeObject writes members (each compact JSON) as one object with its
// keys sorted, as encoding/json writes a map.
func writeObject(members map[string][]byte) ([]byte, error) {
	keys := make([]string, 0, len(members))
	n := 2
	for k, v := range members {
		keys = append(keys, k)
		n += len(k) + len(v) + 4
	}
	sort.Strings(keys)
	out := make([]byte, 0, n)
	out = append(out, '{')
	for i, k := range keys {
		if i > 0 {
			out = append(out, ',')
		}
		kj, err := json.Marshal(k)
		if err != nil {
			return nil, err
		}
		out = append(out, kj...)
		out = append(out, ':')
		out = append(out, members[k]...)
	}
	return append(out, '}'), nil
}

// editedConfig is the parsed form of what edit wrote: the base's parsed
// config with the same edits, without parsing the whole config again.
func editedConfig(base *v1.ConfigFile, labels map[string]string, history []json.RawMessage, diffIDs []v1.Hash, created time.Time) (*v1.ConfigFile, error) {
	cf := base.DeepCopy()
	lb := make(map[string]string, len(cf.Config.Labels)+len(labels))
	for k, v := range cf.Config.Labels {
		lb[k] = v
	}
	for k, v := range labels {
		lb[k] = v
	}
	cf.Config.Labels = lb
	for _, h := range history {
		var e v1.History
		if err := json.Unmarshal(h, &e); err != nil {
			return nil, err
		}
		cf.History = append(cf.History, e)
	}
	cf.RootFS = v1.RootFS{Type: "layers", DiffIDs: append([]v1.Hash(nil), diffIDs...)}
	t, err := time.Parse(time.RFC3339, created.Format(time.RFC3339))
	if err != nil {
		return nil, err
	}
	cf.Created = v1.Time{Time: t}
	return cf, nil
}
