package preflight

import (
	"context"
	"fmt"

	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Layer count limits: keep the total small (nodes pull and import every layer).
const (
	WarnLayers = 100
	MaxLayers  = 127
)

// formatCheck: manifest and layer media types nodes can pull, a history
// entry per layer (bootc fails "Truncated history"), and a bounded layer count.
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
	nl := len(t.Manifest.Layers)
	if nd := len(t.Config.RootFS.DiffIDs); nd != nl {
		out = append(out, Finding{Message: fmt.Sprintf("manifest has %d layers but config rootfs.diff_ids has %d", nl, nd)})
	}
	nh := 0
	for _, h := range t.Config.History {
		if !h.EmptyLayer {
			nh++
		}
	}
	if nh < nl {
		out = append(out, Finding{Message: fmt.Sprintf("config history has %d non-empty entries for %d layers: bootc refuses it (\"Truncated history\"); add a history entry for every layer", nh, nl)})
	}
	switch {
	case nl > MaxLayers:
		out = append(out, Finding{Message: fmt.Sprintf("image has %d layers, more than %d: overlay and nodes cannot handle it; merge the added layers", nl, MaxLayers)})
	case nl > WarnLayers:
		out = append(out, Finding{Severity: Warning, Message: fmt.Sprintf("image has %d layers, more than %d: keep the total small and add few layers", nl, WarnLayers)})
	}
	return out, nil
}
