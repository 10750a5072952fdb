package controller

import (
	"context"
	"errors"
	"fmt"
	"sort"

	mcfgv1 "github.com/openshift/api/machineconfiguration/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/oslayer/oslayer/api/v1alpha1"
	"github.com/oslayer/oslayer/pipeline"
)

// The OpenShift source: a MachineConfigPool and the MachineConfigs its
// spec.machineConfigSelector selects, read as the MCO's render controller
// reads them (openshift/machine-config-operator @
// 7ff337a4ffac8e7562692181178ede61e4b2eec5,
// pkg/controller/render/render_controller.go syncMachineConfigPool) and
// merged by package machineconfig as the MCO merges them. The controller
// builds from the pool's MachineConfigs, not from its rendered
// MachineConfig (status.configuration.name): the rendered one exists only
// after the MCO's render, and the osImageURL MachineConfig published
// after it would make the MCO render a second time, so the pool would
// roll twice for one change. Read this way, the build starts at the
// user's MachineConfig change, and the osImageURL MachineConfig is
// published while the MCO still waits to render (its renderDelay, 5 s):
// its one render has both. docs/controller.md ("One rollout per change")
// states the window.
//
// What the MCO adds from elsewhere (ControllerConfig's osImageURL and
// extensions image) does not feed the image, and every osImageURL is
// cleared: the base is spec.base. Left out are the MachineConfigs the
// controller published (LabelManagedBy) and rendered MachineConfigs (a
// MachineConfigPool controls them), so the published osImageURL never
// feeds the inputs. The documents are normalized (name, labels, spec;
// the pool: name and selector), so status and metadata churn reads as the
// same input and builds nothing.

// poolDocs reads the pool and its MachineConfigs. from says what they
// were read from, for messages.
func poolDocs(ctx context.Context, c client.Reader, pi *v1alpha1.PoolImage) (docs []document, from string, err error) {
	const field = "spec.source.openshift.machineConfigPool"
	pool := pi.Spec.Source.OpenShift.MachineConfigPool
	mcp, err := getPool(ctx, c, pool, field)
	if err != nil {
		return nil, "", err
	}
	sel, err := metav1.LabelSelectorAsSelector(mcp.Spec.MachineConfigSelector)
	if err != nil {
		return nil, "", inputErrorf("%s: MachineConfigPool %s spec.machineConfigSelector: %v", field, pool, err)
	}
	if mcp.Spec.MachineConfigSelector == nil || sel.Empty() {
		return nil, "", inputErrorf("%s: MachineConfigPool %s spec.machineConfigSelector is empty: the MCO renders nothing for such a pool", field, pool)
	}
	var list mcfgv1.MachineConfigList
	if err := c.List(ctx, &list, client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, "", openShiftInput(err, field, "MachineConfig", sel.String())
	}
	// Named as the build's pool (spec.pool, if set), which picks it.
	pd, err := normalized(pipeline.MachineConfigPoolKind, poolName(pi), nil, map[string]any{"machineConfigSelector": mcp.Spec.MachineConfigSelector})
	if err != nil {
		return nil, "", err
	}
	docs = append(docs, document{Name: pipeline.MachineConfigPoolKind + "/" + pool, Kind: pipeline.MachineConfigPoolKind, Content: pd})
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	for i := range list.Items {
		mc := &list.Items[i]
		if !poolInput(mc) {
			continue
		}
		spec := mc.Spec
		spec.OSImageURL = ""
		b, err := normalized(pipeline.MachineConfigKind, mc.Name, mc.Labels, spec)
		if err != nil {
			return nil, "", err
		}
		docs = append(docs, document{Name: pipeline.MachineConfigKind + "/" + mc.Name, Kind: pipeline.MachineConfigKind, Content: b})
	}
	if len(docs) == 1 {
		return nil, "", inputErrorf("%s: MachineConfigPool %s selects no MachineConfig (spec.machineConfigSelector %q)", field, pool, sel.String())
	}
	return docs, fmt.Sprintf("MachineConfigPool %s, %d MachineConfig(s)", pool, len(docs)-1), nil
}

// poolInput reports whether a selected MachineConfig is an input: not
// one the controller published, not a rendered one.
func poolInput(mc *mcfgv1.MachineConfig) bool {
	if mc.Labels[LabelManagedBy] == ManagedBy {
		return false
	}
	o := metav1.GetControllerOf(mc)
	return o == nil || o.Kind != pipeline.MachineConfigPoolKind
}

// normalized is the document of kind with only name, labels and spec.
func normalized(kind, name string, labels map[string]string, spec any) ([]byte, error) {
	meta := map[string]any{"name": name}
	if len(labels) > 0 {
		meta["labels"] = labels
	}
	b, err := yaml.Marshal(map[string]any{"apiVersion": pipeline.MachineConfigAPIVersion, "kind": kind, "metadata": meta, "spec": spec})
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", kind, name, err)
	}
	return b, nil
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
		return inputErrorf("%s: the cluster serves no %s API (%s)", field, kind, pipeline.MachineConfigAPIVersion)
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

func (r machineConfigReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if _, ok := list.(*mcfgv1.MachineConfigList); ok {
		return r.mc.List(ctx, list, opts...)
	}
	return r.Reader.List(ctx, list, opts...)
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
