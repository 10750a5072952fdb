package controller

import (
	"context"
	"os"

	"github.com/oslayer/oslayer/api/v1alpha1"
	"github.com/oslayer/oslayer/internal/registry"
)

// readRegistry is the registry options of the PoolImage's reads outside a
// build (is the image still there, what changed, which platforms an index
// lists): its credentials, over the connections its builds share. done
// removes the credentials written for the keychain; call it when the
// reads are over.
func (r *Reconciler) readRegistry(ctx context.Context, pi *v1alpha1.PoolImage) (reg *registry.Options, done func(), err error) {
	dir, err := os.MkdirTemp("", "oslayer-controller-")
	if err != nil {
		return nil, nil, err
	}
	done = func() { os.RemoveAll(dir) }
	opts := r.Options.Registry
	kc, cred, err := r.keychain(ctx, pi, dir)
	if err != nil {
		done()
		return nil, nil, err
	}
	opts.Keychain = kc
	_, _, opts.Shared = r.pushed.Options(cred)
	return &opts, done, nil
}
