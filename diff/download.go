package diff

// Download is what a node on OLD fetches to get NEW: the layers of NEW it
// does not have.
type Download struct {
	// Bytes is the compressed size of the missing layers.
	Bytes int64 `json:"bytes"`
	// Layers counts them; OldLayers and NewLayers count each side's.
	Layers    int     `json:"layers"`
	OldLayers int     `json:"oldLayers"`
	NewLayers int     `json:"newLayers"`
	Missing   []Layer `json:"missing,omitempty"`
	// BaseKnown is false for an input side: its base layers are not
	// counted.
	BaseKnown bool `json:"baseKnown"`
}

// download lists NEW's layers that OLD lacks (by digest).
func download(old, new *Side) Download {
	have := map[string]bool{}
	for _, l := range old.Layers {
		have[l.Digest] = true
	}
	d := Download{OldLayers: len(old.Layers), NewLayers: len(new.Layers), BaseKnown: old.image() && new.image()}
	for _, l := range new.Layers {
		if !have[l.Digest] {
			have[l.Digest] = true
			d.Missing = append(d.Missing, l)
			d.Bytes += l.Size
			d.Layers++
		}
	}
	return d
}
