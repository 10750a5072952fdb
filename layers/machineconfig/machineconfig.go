// Package machineconfig decodes OpenShift MachineConfigs into a model.Config.
package machineconfig

import (
	"context"
	"errors"

	"github.com/oslayer/oslayer/layers/model"
)

// Load reads MachineConfig files and directories at paths, selects those for
// pool (all when pool is empty) and merges them as the MCO renders a pool.
func Load(ctx context.Context, paths []string, pool string) (*model.Config, error) {
	return nil, errors.New("machineconfig: not implemented yet")
}
