package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"

	"github.com/oslayer/oslayer/api/v1alpha1"
	"github.com/oslayer/oslayer/controller"
)

func newHistoryCmd(g *globals) *cobra.Command {
	var f kubeFlags
	cmd := &cobra.Command{
		Use:   "history NAMESPACE/NAME",
		Short: "Show a PoolImage's build history, the published image and the command that pins (rolls back to) a good build",
		Long: `history reads a PoolImage from the cluster and lists its build history
(status.builds, newest first: index, result, time, digest, inputs digest,
and which entry is built, published and pinned), the published image and
why (status.published), the last change's predicted action, and the
kubectl command that pins a good build (spec.pin: it is published and newer
builds are held back until spec.pin is removed).

The index of an entry names it to oslayer diff: poolimage:NAMESPACE/NAME@N.`,
		Example: `  oslayer history openshift-oslayer/worker
  oslayer diff poolimage:openshift-oslayer/worker@1 poolimage:openshift-oslayer/worker@0`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 || strings.Count(args[0], "/") != 1 {
				return &exitError{code: 2, err: fmt.Errorf("history: want one NAMESPACE/NAME, got %q", args)}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, name, _ := strings.Cut(args[0], "/")
			c, err := f.client()
			if err != nil {
				return &exitError{code: 2, err: fmt.Errorf("history: %w", err)}
			}
			var pi v1alpha1.PoolImage
			if err := c.Get(cmd.Context(), types.NamespacedName{Namespace: ns, Name: name}, &pi); err != nil {
				return &exitError{code: 2, err: fmt.Errorf("history: PoolImage %s: %w", args[0], err)}
			}
			if g.json() {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(map[string]any{"pin": pi.Spec.Pin, "image": pi.Status.Image, "builds": pi.Status.Builds,
					"published": pi.Status.Published, "change": pi.Status.Change})
			}
			return controller.WriteHistory(cmd.OutOrStdout(), &pi)
		},
	}
	f.register(cmd.Flags(), "the PoolImage is read from")
	return cmd
}
