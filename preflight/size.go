package preflight

import (
	"context"
	"fmt"
)

// sizeCheck: the compressed bytes of the added layers (what every node
// downloads on each update) stay within preflight.maxAddedBytes.
type sizeCheck struct{}

func (sizeCheck) Name() string       { return "size" }
func (sizeCheck) Severity() Severity { return Error }
func (sizeCheck) Needs() Needs       { return 0 }

func (c sizeCheck) Run(_ context.Context, t *Target) ([]Finding, error) {
	if t.FirstAdded < 0 {
		return []Finding{{Severity: Info, Message: "added layers unknown (no base, no ostree.final-diffid): size not checked"}}, nil
	}
	max := t.Options.MaxAddedBytes
	if max <= 0 {
		max = DefaultMaxAddedBytes
	}
	var total int64
	n := 0
	for _, l := range t.Manifest.Layers[t.FirstAdded:] {
		total += l.Size
		n++
	}
	if total > max {
		return []Finding{{Field: "preflight.maxAddedBytes", Message: fmt.Sprintf("the %d added layers are %d bytes compressed, over the budget of %d (preflight.maxAddedBytes): move large content out of the image or raise the budget", n, total, max)}}, nil
	}
	return nil, nil
}
