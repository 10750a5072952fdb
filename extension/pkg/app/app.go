// Package app is the OS extension's process: its options (flags), the
// controller-runtime manager (leader election, health and readiness
// probes, metrics) and Gardener's OperatingSystemConfig controller with
// oslayer's actuator, registered for one OS type.
package app

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	heartbeatcmd "github.com/gardener/gardener/extensions/pkg/controller/heartbeat/cmd"
	"github.com/gardener/gardener/extensions/pkg/controller/operatingsystemconfig"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"

	"github.com/oslayer/oslayer/pipeline"

	configv1alpha1 "github.com/oslayer/oslayer/extension/pkg/apis/config/v1alpha1"
	oscactuator "github.com/oslayer/oslayer/extension/pkg/controller/operatingsystemconfig"
)

// DefaultType is the OS type served by default.
const DefaultType = "fedora-coreos-bootc"

// Options are the extension's flags.
type Options struct {
	// Type is the OSC spec.type served.
	Type string
	// Workers is how many OSCs are reconciled at once.
	Workers int
	// IgnoreOperationAnnotation reconciles on every generation change
	// instead of on gardenlet's gardener.cloud/operation annotation.
	IgnoreOperationAnnotation bool
	// LeaderElection, LeaderElectionID and LeaderElectionNamespace
	// make one replica of several active.
	LeaderElection          bool
	LeaderElectionID        string
	LeaderElectionNamespace string
	// MetricsAddr and HealthAddr are the listen addresses ("0": off).
	MetricsAddr, HealthAddr string
	// IndexCacheDir is the base index disk cache.
	IndexCacheDir string
	// Insecure are registry hosts reached over plain HTTP.
	Insecure []string
	// RegistryTimeout bounds each registry request (0: the default).
	RegistryTimeout time.Duration
	// QPS and Burst bound the API requests (each OSC's reconcile writes
	// about seven times: finalizer, status, Secret, annotation).
	QPS   float32
	Burst int
	// Version is the oslayer version recorded in the images.
	Version string
	// Logger receives the builds' logs.
	Logger *slog.Logger
	// SkipNameValidation allows several managers in one process (tests).
	SkipNameValidation bool
	// DefaultConfig is the file of the extension's default
	// OperatingSystemConfiguration, which the OSCs' providerConfigs
	// refine ("": none).
	DefaultConfig string
	// Namespace is the extension's own namespace: the default
	// configuration's Secrets are there, a providerConfig may not name it.
	Namespace string
	// WebhookPort serves the Shoot admission webhook over TLS (0: off),
	// with the certificate in WebhookCertDir.
	WebhookPort    int
	WebhookCertDir string
	// WebhookHost is the address the webhook listens on ("": all).
	WebhookHost string
	// AdmissionOnly serves the webhook alone (RunAdmission), as the
	// admission chart runs it.
	AdmissionOnly bool
	// Heartbeat are Gardener's heartbeat options (--heartbeat-namespace,
	// default Namespace; --heartbeat-renew-interval-seconds).
	Heartbeat heartbeatcmd.Options
}

// AddFlags registers the options' flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Type, "extension-type", DefaultType, "the OperatingSystemConfig spec.type this extension serves")
	fs.IntVar(&o.Workers, "max-concurrent-reconciles", 10, "how many OperatingSystemConfigs are reconciled at once")
	fs.BoolVar(&o.IgnoreOperationAnnotation, "ignore-operation-annotation", false, "reconcile on every spec change, not only on gardenlet's operation annotation")
	fs.BoolVar(&o.LeaderElection, "leader-election", true, "elect a leader among the replicas")
	fs.StringVar(&o.LeaderElectionID, "leader-election-id", "oslayer-os-extension-leader-election", "the leader election Lease's name")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", "", "the leader election Lease's namespace (default: the pod's)")
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", ":8080", "where the metrics are served (0: off)")
	fs.StringVar(&o.HealthAddr, "health-bind-address", ":8081", "where /healthz and /readyz are served (0: off)")
	fs.StringVar(&o.IndexCacheDir, "index-cache-dir", "", "base index disk cache directory (empty: none)")
	fs.StringSliceVar(&o.Insecure, "insecure-registry", nil, "registry hosts reached over plain HTTP")
	fs.DurationVar(&o.RegistryTimeout, "registry-timeout", 0, "deadline of every registry request (0: the default)")
	fs.Float32Var(&o.QPS, "kube-api-qps", 100, "API requests per second")
	fs.IntVar(&o.Burst, "kube-api-burst", 150, "API requests in a burst")
	fs.StringVar(&o.DefaultConfig, "default-config", "", "file of the default OperatingSystemConfiguration that the OSCs' providerConfigs refine (empty: none)")
	fs.StringVar(&o.Namespace, "namespace", "", "the extension's own namespace (where the default configuration's Secrets are)")
	addHeartbeatFlags(fs, &o.Heartbeat)
	addWebhookFlags(fs, o)
}

// Scheme is the manager's scheme: the Kubernetes types, Gardener's
// extension types and the providerConfig.
func Scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, extensionsv1alpha1.AddToScheme, configv1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// NewManager makes the manager and adds the controller to it.
func NewManager(ctx context.Context, cfg *rest.Config, o Options) (manager.Manager, error) {
	scheme, err := Scheme()
	if err != nil {
		return nil, err
	}
	cfg = rest.CopyConfig(cfg)
	if o.QPS > 0 {
		cfg.QPS, cfg.Burst = o.QPS, o.Burst
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme, LeaderElection: o.LeaderElection, LeaderElectionID: o.LeaderElectionID,
		LeaderElectionNamespace: o.LeaderElectionNamespace, LeaderElectionReleaseOnCancel: true,
		Metrics: metricsserver.Options{BindAddress: o.MetricsAddr}, HealthProbeBindAddress: o.HealthAddr,
		// Secrets are read one at a time (the providerConfig's, the
		// secretRef files'), never cached: a seed holds many, and the
		// extension needs neither list nor watch on them.
		Client:        client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
		Cache:         cache.Options{ByObject: leaseCache(o.heartbeatNamespace())},
		WebhookServer: webhookServer(o),
	})
	if err != nil {
		return nil, err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("informers", func(*http.Request) error { return informersSynced(ctx, mgr) }); err != nil {
		return nil, err
	}
	if err := addHeartbeat(mgr, o); err != nil {
		return nil, err
	}
	addWebhook(mgr, o)
	return mgr, Add(ctx, mgr, o)
}

// Add adds Gardener's OperatingSystemConfig controller with oslayer's
// actuator for o.Type (addController: with the watch that refreshes the
// provision OSCs' user data when their pool's image is built); it reads
// the default configuration (an invalid one is an error naming the file
// and the field).
func Add(ctx context.Context, mgr manager.Manager, o Options) error {
	var def *oscactuator.Default
	if o.DefaultConfig != "" {
		var err error
		if def, err = oscactuator.LoadDefault(o.DefaultConfig, o.Namespace); err != nil {
			return err
		}
	}
	reg := pipeline.RegistryOptions{Insecure: o.Insecure, Timeout: o.RegistryTimeout, UserAgent: "oslayer-os-extension/" + o.Version}
	act := oscactuator.New(mgr.GetClient(), oscactuator.Options{Version: o.Version, Registry: reg, IndexCacheDir: o.IndexCacheDir, Logger: o.Logger,
		Default: def, Namespace: o.Namespace})
	workers := o.Workers
	if workers < 1 {
		workers = 1
	}
	return addController(mgr, operatingsystemconfig.AddArgs{
		Actuator: act,
		ControllerOptions: controller.Options{MaxConcurrentReconciles: workers, SkipNameValidation: &o.SkipNameValidation,
			RateLimiter: failureBackoff()},
		Predicates: operatingsystemconfig.DefaultPredicates(ctx, mgr, o.IgnoreOperationAnnotation),
		Types:      []string{o.Type},
	})
}
