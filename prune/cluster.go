package prune

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// The resources a cluster is read for. An API the cluster does not serve
// (no OpenShift, no bootc-operator) is skipped.
var clusterResources = []struct {
	gvr  schema.GroupVersionResource
	kind string
}{
	{schema.GroupVersionResource{Group: "oslayer.dev", Version: "v1alpha1", Resource: "poolimages"}, "PoolImage"},
	{schema.GroupVersionResource{Group: "machineconfiguration.openshift.io", Version: "v1", Resource: "machineconfigs"}, "MachineConfig"},
	{schema.GroupVersionResource{Group: "machineconfiguration.openshift.io", Version: "v1", Resource: "machineconfigpools"}, "MachineConfigPool"},
	{schema.GroupVersionResource{Version: "v1", Resource: "nodes"}, "Node"},
	{schema.GroupVersionResource{Group: "node.bootc.dev", Version: "v1alpha1", Resource: "bootcnodes"}, "BootcNode"},
	{schema.GroupVersionResource{Group: "node.bootc.dev", Version: "v1alpha1", Resource: "bootcnodepools"}, "BootcNodePool"},
}

var configMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// Cluster reads references from a cluster: every PoolImage (and the
// ConfigMap its spec.publish.configMap names), MachineConfig,
// MachineConfigPool, Node, BootcNode and BootcNodePool. Objects are read
// unstructured by the field names of their APIs.
func Cluster(c dynamic.Interface) Source { return &clusterSource{c: c} }

type clusterSource struct{ c dynamic.Interface }

func (s *clusterSource) Name() string { return "cluster" }

// listPage is the page size of a list.
const listPage = 500

// maxPages bounds the pages of one list.
const maxPages = 10000

func (s *clusterSource) read(ctx context.Context, c *collector) error {
	for _, r := range clusterResources {
		if err := s.list(ctx, r.gvr, r.kind, c); err != nil {
			return err
		}
	}
	return nil
}

// list reads every object of gvr into c, page by page.
func (s *clusterSource) list(ctx context.Context, gvr schema.GroupVersionResource, kind string, c *collector) error {
	opts := metav1.ListOptions{Limit: listPage}
	for page := 0; page < maxPages; page++ {
		l, err := s.c.Resource(gvr).List(ctx, opts)
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("cluster: list %s: %w", gvr.GroupResource(), err)
		}
		for i := range l.Items {
			u := l.Items[i].Object
			u["kind"] = kind
			if err := c.add("cluster", 0, u); err != nil {
				return err
			}
			if kind == "PoolImage" {
				if err := s.published(ctx, u, c); err != nil {
					return err
				}
			}
		}
		if opts.Continue = l.GetContinue(); opts.Continue == "" {
			return nil
		}
	}
	return fmt.Errorf("cluster: list %s: more than %d pages", gvr.GroupResource(), maxPages)
}

// published reads the ConfigMap a PoolImage publishes its image to.
func (s *clusterSource) published(ctx context.Context, pi map[string]any, c *collector) error {
	n, _ := field(pi, "spec", "publish", "configMap").(string)
	ns, _ := field(pi, "metadata", "namespace").(string)
	if n == "" {
		return nil
	}
	cm, err := s.c.Resource(configMaps).Namespace(ns).Get(ctx, n, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cluster: get ConfigMap %s/%s: %w", ns, n, err)
	}
	img, _ := field(cm.Object, "data", "image").(string)
	if img == "" {
		return nil
	}
	cm.Object["kind"] = "ConfigMap"
	return c.add("cluster", 0, cm.Object)
}
