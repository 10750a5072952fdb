package controller

import (
	"context"
	"errors"
	"fmt"

	mcfgv1 "github.com/openshift/api/machineconfiguration/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/oslayer/oslayer/api/v1alpha1"
	"github.com/oslayer/oslayer/sources/machineconfig"
)

// The OpenShift source: a MachineConfigPool whose rendered MachineConfig
// (status.configuration.name) is the MCO's own merge of the pool's
// MachineConfigs. The controller builds that one document through the
// MachineConfig path of package layers.
//
// The rendered MachineConfig is read normalized: its metadata is replaced
// by a fixed name (rendered-POOL) and the role label of the pool, and its
// spec.osImageURL is cleared. The base is spec.base, so osImageURL never
// feeds the image; clearing it is what keeps the published osImageURL
// MachineConfig (spec.publish.machineConfig) out of the inputs: the MCO
// renders it into a new rendered MachineConfig (a new name, the same
// content otherwise), which reads as the same input and builds nothing.

// renderedDoc reads the pool's rendered MachineConfig. It returns the
// normalized document and the rendered MachineConfig's real name.
func renderedDoc(ctx context.Context, c client.Reader, pi *v1alpha1.PoolImage) (document, string, error) {
	const field = "spec.source.openshift.machineConfigPool"
	pool := pi.Spec.Source.OpenShift.MachineConfigPool
	mcp, err := getPool(ctx, c, pool, field)
	if err != nil {
		return document{}, "", err
	}
	name := mcp.Status.Configuration.Name
	if name == "" {
		return document{}, "", inputErrorf("%s: MachineConfigPool %s has no rendered MachineConfig yet (status.configuration.name is empty)", field, pool)
	}
	var mc mcfgv1.MachineConfig
	if err := c.Get(ctx, types.NamespacedName{Name: name}, &mc); err != nil {
		return document{}, "", openShiftInput(err, field+" (status.configuration.name)", "MachineConfig", name)
	}
	spec := mc.Spec
	spec.OSImageURL = ""
	b, err := yaml.Marshal(map[string]any{
		"apiVersion": machineconfig.APIVersion, "kind": machineconfig.Kind,
		"metadata": map[string]any{
			"name":   "rendered-" + pool,
			"labels": map[string]string{machineconfig.RoleLabel: poolName(pi)},
		},
		"spec": spec,
	})
	if err != nil {
		return document{}, "", fmt.Errorf("MachineConfig %s: %w", name, err)
	}
	return document{Name: "MachineConfigPool/" + pool + "/rendered-" + pool, Kind: machineconfig.Kind, Content: b}, name, nil
}

func getPool(ctx context.Context, c client.Reader, name, field string) (*mcfgv1.MachineConfigPool, error) {
	var mcp mcfgv1.MachineConfigPool
	if err := c.Get(ctx, types.NamespacedName{Name: name}, &mcp); err != nil {
		return nil, openShiftInput(err, field, "MachineConfigPool", name)
	}
	return &mcp, nil
}

// openShiftInput is notFoundInput for the cluster-scoped OpenShift
// objects; a cluster that serves no machineconfiguration.openshift.io API
// is an input error too (the PoolImage asks for what the cluster lacks).
func openShiftInput(err error, field, kind, name string) error {
	var nm *meta.NoKindMatchError
	if errors.As(err, &nm) || meta.IsNoMatchError(err) {
		return inputErrorf("%s: the cluster serves no %s API (%s)", field, kind, machineconfig.APIVersion)
	}
	if client.IgnoreNotFound(err) == nil {
		return inputErrorf("%s: %s %s not found", field, kind, name)
	}
	return fmt.Errorf("%s: reading %s %s: %w", field, kind, name, err)
}

// machineConfigReader reads MachineConfigs through mc and everything else
// through Reader.
type machineConfigReader struct {
	client.Reader
	mc client.Reader
}

func (r machineConfigReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*mcfgv1.MachineConfig); ok {
		return r.mc.Get(ctx, key, obj, opts...)
	}
	return r.Reader.Get(ctx, key, obj, opts...)
}

// reader is the client the reconciler reads with: MachineConfigs from
// the API server (the cache holds only their metadata), the rest from
// the cache.
func (r *Reconciler) reader() client.Reader {
	if r.APIReader == nil {
		return r.Client
	}
	return machineConfigReader{Reader: r.Client, mc: r.APIReader}
}
