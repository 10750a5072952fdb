package diff

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/render"
)

// openLayer opens the uncompressed tar of the side's layer of a role.
type openLayer func(role string) (io.ReadCloser, error)

// errNoFile is ReadFile's error for a path the side did not place.
var errNoFile = errors.New("not placed by oslayer")

// ReadFile returns the content of a node path the side placed, read from
// its own (small) layer: never a base layer.
func (s *Side) ReadFile(path string) ([]byte, error) {
	if s.open == nil {
		return nil, fmt.Errorf("%s: no layers to read %s from", s.Given, path)
	}
	for _, it := range s.Items {
		if it.Path != path || it.Type != "file" {
			continue
		}
		rc, err := s.open(it.Layer)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", s.Given, path, err)
		}
		defer rc.Close()
		stored := it.StoredAt
		if stored == "" {
			stored = it.Path
		}
		data, err := findInTar(rc, strings.TrimPrefix(stored, "/"))
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", s.Given, path, err)
		}
		return data, nil
	}
	return nil, fmt.Errorf("%s: %s: %w", s.Given, path, errNoFile)
}

// imageLayers opens an image's oslayer layer by role.
func imageOpener(img v1.Image, layers []Layer) openLayer {
	return func(role string) (io.ReadCloser, error) {
		for _, l := range layers {
			if l.Role != role {
				continue
			}
			h, err := v1.NewHash(l.Digest)
			if err != nil {
				return nil, err
			}
			layer, err := img.LayerByDigest(h)
			if err != nil {
				return nil, err
			}
			return registry.ReadLayer(layer, maxLayer)
		}
		return nil, fmt.Errorf("no %s layer", role)
	}
}

// renderedOpener opens a rendered layer by role.
func renderedOpener(layers []render.Layer) openLayer {
	return func(role string) (io.ReadCloser, error) {
		for _, l := range layers {
			if l.Name == role {
				return gzip.NewReader(bytes.NewReader(l.Gzip))
			}
		}
		return nil, fmt.Errorf("no %s layer", role)
	}
}
