// Package gardener decodes Gardener OperatingSystemConfigs into a model.Config.
package gardener

import (
	"context"
	"errors"

	"github.com/oslayer/oslayer/layers/model"
)

// Options tune how OSC files are resolved.
type Options struct {
	// SecretsDir holds Secret manifests for secretRef files.
	SecretsDir string
	// BakeSecrets bakes secretRef content instead of reporting it as
	// runtime-delivered.
	BakeSecrets bool
	// Images reads imageRef files; nil makes an imageRef an error.
	Images model.ImageFiles
}

// Load decodes and merges the OSC inputs at paths.
func Load(ctx context.Context, paths []string, opts Options) (*model.Config, error) {
	return nil, errors.New("gardener: not implemented yet")
}
