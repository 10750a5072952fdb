package app

import (
	"context"
	"errors"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// informersSynced is the readiness check: the manager's caches answer.
func informersSynced(ctx context.Context, mgr manager.Manager) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		return errors.New("informers not synced")
	}
	return nil
}
