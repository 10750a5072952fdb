package diff

import (
	"bytes"
	"encoding/base64"

	"sigs.k8s.io/yaml"

	"github.com/oslayer/oslayer/internal/inputfile"
	"github.com/oslayer/oslayer/sources/gardener"
	"github.com/oslayer/oslayer/sources/model"
)

// oscDoc is the part of an OperatingSystemConfig (or of the node agent's
// Secret holding one under data.osc.yaml) the unit restarts need.
type oscDoc struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Data map[string]string `json:"data"`
	Spec struct {
		Units []struct {
			Name      string   `json:"name"`
			FilePaths []string `json:"filePaths"`
		} `json:"units"`
	} `json:"spec"`
}

// oscFilePaths maps each unit of the OperatingSystemConfig inputs to the
// files its filePaths name: gardener-node-agent restarts a unit when one
// of them changes. The image does not record filePaths, so only input
// sides have them.
func oscFilePaths(inputs []model.Input) (map[string][]string, error) {
	out := map[string][]string{}
	for _, in := range inputs {
		if in.Kind != gardener.Kind || in.Path == "" || in.Path == "-" {
			continue
		}
		data, err := inputfile.Read(in.Path)
		if err != nil {
			return nil, err
		}
		for i, d := range bytes.Split(data, []byte("\n---")) {
			if i >= maxDocs {
				break
			}
			addFilePaths(out, d, 0)
		}
	}
	return out, nil
}

// addFilePaths adds the filePaths of one document; a Secret's osc.yaml is
// read once (depth 1).
func addFilePaths(out map[string][]string, d []byte, depth int) {
	var doc oscDoc
	if yaml.Unmarshal(d, &doc) != nil {
		return
	}
	if doc.Kind == "Secret" && depth == 0 {
		if b, err := base64.StdEncoding.DecodeString(doc.Data["osc.yaml"]); err == nil {
			addFilePaths(out, b, 1)
		}
		return
	}
	for _, u := range doc.Spec.Units {
		out[u.Name] = append(out[u.Name], u.FilePaths...)
	}
}
