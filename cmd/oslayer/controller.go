package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/oslayer/oslayer/assemble/baseindex"
	"github.com/oslayer/oslayer/controller"
)

func newControllerCmd(g *globals) *cobra.Command {
	var (
		reg        registryFlags
		o          controller.ManagerOptions
		indexCache string
		pause      bool
	)
	cmd := &cobra.Command{
		Use:   "controller",
		Short: "Run the in-cluster build service (reconciles PoolImages)",
		Long: `controller runs the build service: it watches PoolImages (oslayer.dev/v1alpha1)
and the Secrets and ConfigMaps they read, builds each pool's image in this
process when its inputs change, runs preflight, pushes and signs it, and
records the digest in the PoolImage's status. A PoolImage with
spec.builder: Job is built in a Kubernetes Job instead (the build pod runs
--build-image with oslayer build --from-poolimage; package stages need it).
The cluster comes from the
in-cluster service account or $KUBECONFIG. With --leader-elect the lease is
in --leader-election-namespace; without it, in the pod's namespace, or,
outside a cluster, in the namespace of the kubeconfig's current context
("default" when the context names none), as kubectl picks it. SIGTERM or
SIGINT stop it gracefully: running reconciles get up to 30 s, the lease is
released (another replica takes over at once), and it exits 0. Manifests to
deploy it are in config/ (kubectl apply -k config).`,
		Example: `  oslayer controller --leader-elect --log-level info --log-format json
  KUBECONFIG=~/.kube/config oslayer controller --namespace pools --metrics-bind-address 127.0.0.1:8080`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ro, err := reg.options()
			if err != nil {
				return err
			}
			ro.UserAgent = "oslayer/" + version
			o.Registry = *ro
			o.Version = version
			o.NoPoolPause = !pause
			o.Logger = g.log
			if indexCache == "" {
				if indexCache, err = baseindex.DefaultCacheDir(); err != nil {
					return err
				}
			}
			o.IndexCacheDir = indexCache
			o.JobArgs = reg.args()
			cfg, err := ctrl.GetConfig()
			if err != nil {
				return err
			}
			if o.LeaderElection && o.LeaderElectionNamespace == "" {
				if o.LeaderElectionNamespace, err = leaderElectionNamespace(); err != nil {
					return err
				}
				if o.LeaderElectionNamespace != "" {
					g.log.Info("leader election lease in the kubeconfig context's namespace (--leader-election-namespace sets another)",
						"namespace", o.LeaderElectionNamespace, "lease", controller.LeaderElectionID)
				}
			}
			// A signal is the controller's normal end: it winds down
			// (running reconciles, the lease) and exits 0.
			stopGracefully(cmd.Context(), controller.ShutdownTimeout+5*time.Second)
			return controller.Run(cmd.Context(), cfg, o)
		},
	}
	fs := cmd.Flags()
	reg.register(fs)
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", ":8080", `address of the Prometheus /metrics endpoint ("0" disables it)`)
	fs.StringVar(&o.ProbeAddr, "health-probe-bind-address", ":8081", `address of /healthz and /readyz ("0" disables them)`)
	fs.StringVar(&o.PprofAddr, "pprof-bind-address", "0", `address of net/http/pprof ("0" disables it)`)
	fs.IntVar(&o.MaxConcurrentBuilds, "max-concurrent-builds", 4, "PoolImages built at once")
	fs.BoolVar(&o.LeaderElection, "leader-elect", false, "elect a leader among replicas; only the leader builds")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader election lease (default: the pod's; outside a cluster the kubeconfig context's)")
	fs.DurationVar(&o.LeaseDuration, "leader-elect-lease-duration", 15*time.Second, "how long a leader's lease lasts: a replica takes over at most this long after the leader died")
	fs.DurationVar(&o.RenewDeadline, "leader-elect-renew-deadline", 10*time.Second, "how long the leader tries to renew its lease before it gives up leading (less than the lease duration)")
	fs.DurationVar(&o.RetryPeriod, "leader-elect-retry-period", 2*time.Second, "how often replicas try to acquire or renew the lease")
	fs.StringSliceVar(&o.Namespaces, "namespace", nil, "watch only these namespaces (default: all)")
	jobFlags(fs, &o.Options, &pause)
	fs.StringVar(&indexCache, "base-index-cache", "", "directory of cached base indexes (default $"+baseindex.CacheEnv+", else $XDG_CACHE_HOME/oslayer/baseindex)")
	return cmd
}

// jobFlags registers the flags of build Jobs (spec.builder Job): the
// build pod's image and the pause of an OpenShift pool around a Job.
func jobFlags(fs *pflag.FlagSet, o *controller.Options, pause *bool) {
	fs.StringVar(&o.BuildImage, "build-image", "", "image of the build pods of PoolImages with spec.builder Job: this project's image, pinned by digest (without it such PoolImages are Degraded)")
	fs.BoolVar(pause, "pause-pools", true, "pause an OpenShift pool (spec.paused) while a build Job builds its new inputs, so that it rolls once for the change and its image")
	fs.DurationVar(&o.MaxPoolPause, "max-pool-pause", controller.DefaultMaxPoolPause, "unpause a pool paused for a build Job after this long at most")
}

// inClusterNamespace is the file controller-runtime reads the pod's
// namespace from, the leader election lease's default namespace.
const inClusterNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// leaderElectionNamespace is the lease's namespace when
// --leader-election-namespace is not given: "" in a pod (controller-runtime
// then takes the pod's namespace); elsewhere the namespace of the current
// context of the kubeconfig ($KUBECONFIG, else ~/.kube/config) as kubectl
// picks it, "default" when the context names none.
func leaderElectionNamespace() (string, error) {
	if _, err := os.Stat(inClusterNamespace); err == nil {
		return "", nil
	}
	ns, _, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		clientcmd.NewDefaultClientConfigLoadingRules(), &clientcmd.ConfigOverrides{}).Namespace()
	if err == nil && ns == "" {
		err = errors.New("the kubeconfig names none")
	}
	if err != nil {
		return "", fmt.Errorf("--leader-elect outside a cluster needs a namespace for the lease: set --leader-election-namespace (no namespace from the kubeconfig's context: %w)", err)
	}
	return ns, nil
}
