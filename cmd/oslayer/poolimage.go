package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/oslayer/oslayer/controller"
)

// kubeFlags name the cluster PoolImages are read from.
type kubeFlags struct {
	kubeconfig, context string
}

func (f *kubeFlags) register(fs *pflag.FlagSet, what string) {
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster "+what+" (default: $KUBECONFIG, else ~/.kube/config)")
	fs.StringVar(&f.context, "context", "", "the kubeconfig context (default: its current one)")
}

// client is a client of the cluster with the controller's scheme.
func (f *kubeFlags) client() (client.Client, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if f.kubeconfig != "" {
		rules.ExplicitPath = f.kubeconfig
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: f.context}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	s, err := controller.Scheme()
	if err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: s})
}

// resolvePoolImageRefs replaces poolimage:NS/NAME@N arguments by the
// images of the PoolImages' histories; others stay.
func (f *kubeFlags) resolvePoolImageRefs(ctx context.Context, args []string) ([]string, error) {
	out := append([]string(nil), args...)
	var c client.Client
	for i, a := range args {
		if !strings.HasPrefix(a, controller.PoolImageRefPrefix) {
			continue
		}
		ref, err := controller.ParsePoolImageRef(a)
		if err != nil {
			return nil, err
		}
		if c == nil {
			if c, err = f.client(); err != nil {
				return nil, err
			}
		}
		if out[i], err = ref.Resolve(ctx, c); err != nil {
			return nil, fmt.Errorf("%s: %w", a, err)
		}
	}
	return out, nil
}
