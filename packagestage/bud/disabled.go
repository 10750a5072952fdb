//go:build !(containers_image_openpgp && exclude_graphdriver_btrfs && exclude_graphdriver_devicemapper)

package bud

import (
	"context"
	"errors"

	"github.com/oslayer/oslayer/assemble"
	"github.com/oslayer/oslayer/packagestage"
)

// enabled is false: this binary was built without Tags, so buildah is not
// linked in and a pool that needs the package stage is refused.
const enabled = false

// InitReexec does nothing without the buildah executor.
func InitReexec() bool { return false }

// execute is never called without the executor (Stage.Run refuses first).
func execute(context.Context, Config, assemble.PackageRequest, *packagestage.Plan, func(string)) (*assemble.PackageResult, error) {
	return nil, errors.New("not built in")
}
