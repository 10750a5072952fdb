package controller

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/go-logr/logr"
	mcfgv1 "github.com/openshift/api/machineconfiguration/v1"
	opv1 "github.com/openshift/api/operator/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/oslayer/oslayer/api/v1alpha1"
)

// ManagerOptions configure the controller process.
type ManagerOptions struct {
	Options
	// MetricsAddr serves /metrics ("0" disables it).
	MetricsAddr string
	// ProbeAddr serves /healthz and /readyz ("0" disables it).
	ProbeAddr string
	// PprofAddr serves net/http/pprof ("" or "0" disables it).
	PprofAddr string
	// LeaderElection makes only one of several replicas build.
	LeaderElection bool
	// LeaderElectionNamespace holds the lease ("" means the in-cluster
	// namespace).
	LeaderElectionNamespace string
	// LeaseDuration, RenewDeadline and RetryPeriod tune the election (0:
	// controller-runtime's 15 s, 10 s and 2 s). A killed leader is
	// replaced after at most LeaseDuration.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Namespaces limits the watched namespaces (none: all).
	Namespaces []string
	// SkipNameValidation lets several managers run in one process (tests:
	// one per namespace, two replicas); controller-runtime otherwise
	// refuses a second controller named "poolimage".
	SkipNameValidation bool
}

// LeaderElectionID names the lease of the controller's leader election.
const LeaderElectionID = "oslayer-controller.oslayer.dev"

// ShutdownTimeout is how long running reconciles get to end once the
// controller is asked to stop; the lease is released after them.
const ShutdownTimeout = 30 * time.Second

// Scheme is the scheme of the controller's client: the core types,
// oslayer.dev/v1alpha1 and OpenShift's machineconfiguration.openshift.io/v1.
func Scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := mcfgv1.Install(s); err != nil {
		return nil, err
	}
	// The MachineConfiguration "cluster" (its node disruption policy).
	if err := opv1.Install(s); err != nil {
		return nil, err
	}
	return s, nil
}

// NewManager returns a manager running the PoolImage reconciler, with
// health probes, metrics and (optionally) leader election.
func NewManager(cfg *rest.Config, o ManagerOptions) (ctrl.Manager, error) {
	s, err := Scheme()
	if err != nil {
		return nil, err
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	lg := logr.FromSlogHandler(log.Handler())
	// client-go's reflectors log through controller-runtime's global
	// logger, which otherwise complains it was never set; client-go's
	// event broadcaster and leader election log through klog (an Event the
	// API server rejects): both go to the same structured log.
	ctrl.SetLogger(lg)
	klog.SetLogger(lg)
	shutdown := ShutdownTimeout
	mo := ctrl.Options{
		Scheme:                  s,
		Logger:                  withoutStopNoise(lg),
		Metrics:                 metricsserver.Options{BindAddress: o.MetricsAddr},
		HealthProbeBindAddress:  o.ProbeAddr,
		PprofBindAddress:        o.PprofAddr,
		LeaderElection:          o.LeaderElection,
		LeaderElectionID:        LeaderElectionID,
		LeaderElectionNamespace: o.LeaderElectionNamespace,
		// A new leader takes over at once when the old one stops cleanly.
		LeaderElectionReleaseOnCancel: true,
		GracefulShutdownTimeout:       &shutdown,
	}
	if o.SkipNameValidation {
		mo.Controller.SkipNameValidation = &o.SkipNameValidation
	}
	for _, d := range []struct {
		v   time.Duration
		dst **time.Duration
	}{{o.LeaseDuration, &mo.LeaseDuration}, {o.RenewDeadline, &mo.RenewDeadline}, {o.RetryPeriod, &mo.RetryPeriod}} {
		if d.v > 0 {
			*d.dst = &d.v
		}
	}
	if len(o.Namespaces) > 0 {
		mo.Cache.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range o.Namespaces {
			mo.Cache.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	mgr, err := ctrl.NewManager(cfg, mo)
	if err != nil {
		return nil, fmt.Errorf("controller manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return nil, err
	}
	r := &Reconciler{Options: o.Options, namespaces: o.Namespaces}
	if err := r.SetupWithManager(mgr); err != nil {
		return nil, err
	}
	return mgr, nil
}

// Run runs the controller until ctx ends.
func Run(ctx context.Context, cfg *rest.Config, o ManagerOptions) error {
	mgr, err := NewManager(cfg, o)
	if err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// stopNoise is what controller-runtime (v0.25) logs as an error on every
// clean stop of a leader: the stop cancels the election, whose
// OnStoppedLeading reports "leader election lost" while the manager is
// already stopping. A lease lost while running is not concerned: Start
// returns that error and the command fails.
const stopNoise = "error received after stop sequence was engaged"

// withoutStopNoise is lg with stopNoise about the lease turned into an
// info record (the manager stopped leading as asked).
func withoutStopNoise(lg logr.Logger) logr.Logger {
	return logr.New(stopNoiseSink{lg.GetSink()})
}

type stopNoiseSink struct{ logr.LogSink }

func (s stopNoiseSink) Error(err error, msg string, kv ...any) {
	if msg == stopNoise && err != nil && err.Error() == "leader election lost" {
		s.LogSink.Info(0, "stopped leading: the manager is stopping", kv...)
		return
	}
	s.LogSink.Error(err, msg, kv...)
}

func (s stopNoiseSink) WithValues(kv ...any) logr.LogSink {
	return stopNoiseSink{s.LogSink.WithValues(kv...)}
}

func (s stopNoiseSink) WithName(name string) logr.LogSink {
	return stopNoiseSink{s.LogSink.WithName(name)}
}
