package preflight

import (
	"context"
	"fmt"

	"github.com/google/go-containerregistry/pkg/v1/types"
)

// formatCheck: manifest and layer media types nodes can pull (the layer
// count and history are checked by layersCheck).
type formatCheck struct{}

func (formatCheck) Name() string       { return "format" }
func (formatCheck) Severity() Severity { return Error }
func (formatCheck) Needs() Needs       { return 0 }

func (c formatCheck) Run(_ context.Context, t *Target) ([]Finding, error) {
	var out []Finding
	switch t.MediaType {
	case types.OCIManifestSchema1, types.DockerManifestSchema2:
	case types.DockerManifestSchema1, types.DockerManifestSchema1Signed:
		out = append(out, Finding{Message: fmt.Sprintf("manifest is Docker schema1 (%s): nodes cannot pull it; push it again as OCI (skopeo copy --format oci)", t.MediaType)})
	default:
		out = append(out, Finding{Message: fmt.Sprintf("manifest media type %q is not an OCI or Docker v2 schema 2 image manifest", t.MediaType)})
	}
	for i, l := range t.Manifest.Layers {
		switch l.MediaType {
		case types.OCILayer, types.DockerLayer:
		case types.OCILayerZStd:
			out = append(out, Finding{Severity: Warning, Layer: l.Digest.String(), Message: fmt.Sprintf("layer %d is zstd-compressed (%s): older nodes cannot pull it; use gzip", i, l.MediaType)})
		case types.OCIUncompressedLayer, types.DockerUncompressedLayer:
			out = append(out, Finding{Severity: Warning, Layer: l.Digest.String(), Message: fmt.Sprintf("layer %d is not compressed (%s): nodes download it uncompressed; use gzip", i, l.MediaType)})
		default:
			out = append(out, Finding{Layer: l.Digest.String(), Message: fmt.Sprintf("layer %d has media type %q: not a gzip tar layer nodes can import", i, l.MediaType)})
		}
	}
	return out, nil
}
