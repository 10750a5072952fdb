package diff

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"sigs.k8s.io/yaml"

	"github.com/oslayer/oslayer/internal/inputfile"
	"github.com/oslayer/oslayer/sources/machineconfig"
	"github.com/oslayer/oslayer/sources/model"
)

// maxDocs bounds the documents read from one MachineConfig file.
const maxDocs = 10000

// passwdDigest hashes the spec.config.passwd sections of the selected
// MachineConfigs in merge order: the rendered config's passwd (core's SSH
// keys) differs when the digest does. The image does not carry passwd
// (SSH keys are delivered at runtime), so only input sides have it.
func passwdDigest(inputs []model.Input) (string, error) {
	h := sha256.New()
	n := 0
	for _, in := range inputs {
		if in.Kind != machineconfig.Kind {
			continue
		}
		data, err := inputfile.Read(in.Path)
		if err != nil {
			return "", fmt.Errorf("MachineConfig input: %w", err)
		}
		for _, p := range passwdSections(data, in.Name) {
			h.Write(p)
			h.Write([]byte{0})
			n++
		}
	}
	if n == 0 {
		return "", nil
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// mcPasswd is the part of a MachineConfig (or a List of them) passwd
// needs.
type mcPasswd struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Config struct {
			Passwd json.RawMessage `json:"passwd"`
		} `json:"config"`
	} `json:"spec"`
	Items []mcPasswd `json:"items"`
}

// passwdSections returns the passwd sections of the MachineConfigs named
// name in a file of YAML or JSON documents.
func passwdSections(data []byte, name string) [][]byte {
	var out [][]byte
	docs := bytes.Split(data, []byte("\n---"))
	for i, d := range docs {
		if i >= maxDocs {
			break
		}
		var mc mcPasswd
		if yaml.Unmarshal(d, &mc) != nil {
			continue
		}
		for _, m := range append([]mcPasswd{mc}, mc.Items...) {
			if m.Metadata.Name == name && len(m.Spec.Config.Passwd) > 0 && string(m.Spec.Config.Passwd) != "null" {
				out = append(out, m.Spec.Config.Passwd)
			}
		}
	}
	return out
}
