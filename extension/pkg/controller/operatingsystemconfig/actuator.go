// Package operatingsystemconfig is oslayer's Gardener OS extension: the
// Actuator of Gardener's OperatingSystemConfig extension library (laid out
// as Gardener's OS extensions are, pkg/controller/operatingsystemconfig).
// For purpose
// reconcile it builds, pushes and signs the worker pool's image from the
// OSC's units and files with the shared build specification
// (pipeline.Spec, pipeline.New), records its digest in
// status.providerStatus and the pool-image extension file, and returns
// the extension's units and files and status.inPlaceUpdates.osUpdate
// (package nodeside); for purpose provision it returns the Ignition
// user data that boots a new machine and pivots it onto the pool image.
package operatingsystemconfig

import (
	"context"
	"log/slog"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gardener/gardener/extensions/pkg/controller/operatingsystemconfig"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"

	"github.com/oslayer/oslayer/pipeline"
)

// Options are the extension's own settings, the same for every OSC.
type Options struct {
	// Version is the oslayer version recorded in the images.
	Version string
	// Registry are the registry options every build starts from
	// (mirrors, insecure hosts, timeout); each OSC adds its credentials.
	Registry pipeline.RegistryOptions
	// IndexCacheDir is the base index disk cache ("": none).
	IndexCacheDir string
	// Logger receives the builds' logs (nil: discarded).
	Logger *slog.Logger
	// Default is the extension's default configuration, which the OSCs'
	// providerConfigs refine (nil: none; every OSC needs a complete
	// providerConfig).
	Default *Default
	// Namespace is the extension's own namespace ("": unknown): a
	// providerConfig may not name Secrets in it.
	Namespace string
}

// Actuator builds the pool images of the OSCs of the extension's type.
type Actuator struct {
	client  client.Client
	options Options
	keys    pipeline.Keys
	shared  *pipeline.Shared // sole writer of its targets: one active replica, one reconcile of an OSC at a time, a repository and tag per shoot and pool
}

var _ operatingsystemconfig.Actuator = (*Actuator)(nil)

// New returns the actuator; c reads Secrets, Clusters and OSCs and
// writes the OSCs' status.providerStatus.
func New(c client.Client, o Options) *Actuator {
	return &Actuator{client: c, options: o, shared: &pipeline.Shared{SoleWriter: true}}
}

// Delete has nothing to clean up: the images stay in the registry (other
// shoots' nodes, rollbacks and audits may still refer to them; a
// registry's retention or `oslayer prune` removes them).
func (a *Actuator) Delete(context.Context, logr.Logger, *extensionsv1alpha1.OperatingSystemConfig) error {
	return nil
}

// ForceDelete is Delete.
func (a *Actuator) ForceDelete(ctx context.Context, log logr.Logger, osc *extensionsv1alpha1.OperatingSystemConfig) error {
	return a.Delete(ctx, log, osc)
}

// Migrate keeps nothing in status.state: everything the extension needs
// (the pool image) is in the registry and status.providerStatus, which
// Gardener migrates with the OSC.
func (a *Actuator) Migrate(context.Context, logr.Logger, *extensionsv1alpha1.OperatingSystemConfig) error {
	return nil
}

// Restore reconciles: a build of unchanged inputs gives the same image
// (builds are reproducible) and pushes only what the registry lacks.
func (a *Actuator) Restore(ctx context.Context, log logr.Logger, osc *extensionsv1alpha1.OperatingSystemConfig) ([]byte, []extensionsv1alpha1.Unit, []extensionsv1alpha1.File, *extensionsv1alpha1.InPlaceUpdatesStatus, error) {
	return a.Reconcile(ctx, log, osc)
}

// Reconcile serves the OSC's purpose.
func (a *Actuator) Reconcile(ctx context.Context, log logr.Logger, osc *extensionsv1alpha1.OperatingSystemConfig) ([]byte, []extensionsv1alpha1.Unit, []extensionsv1alpha1.File, *extensionsv1alpha1.InPlaceUpdatesStatus, error) {
	switch osc.Spec.Purpose {
	case extensionsv1alpha1.OperatingSystemConfigPurposeProvision:
		ud, err := a.provision(ctx, log, osc)
		return ud, nil, nil, nil, err
	case extensionsv1alpha1.OperatingSystemConfigPurposeReconcile:
		units, files, ipu, err := a.reconcile(ctx, log, osc)
		return nil, units, files, ipu, err
	}
	return nil, nil, nil, nil, invalidf("spec.purpose", "%q: want provision or reconcile", osc.Spec.Purpose)
}
