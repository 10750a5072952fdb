package app

import (
	"github.com/spf13/pflag"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	controllercmd "github.com/gardener/gardener/extensions/pkg/controller/cmd"
	"github.com/gardener/gardener/extensions/pkg/controller/heartbeat"
	heartbeatcmd "github.com/gardener/gardener/extensions/pkg/controller/heartbeat/cmd"
)

// ExtensionName is the extension's name, the heartbeat Lease's holder.
const ExtensionName = "oslayer-os-extension"

// addHeartbeatFlags registers Gardener's heartbeat flags as its OS
// extensions name them: --heartbeat-namespace and
// --heartbeat-renew-interval-seconds (default 30).
func addHeartbeatFlags(fs *pflag.FlagSet, o *heartbeatcmd.Options) {
	controllercmd.PrefixFlagger("heartbeat-", o).AddFlags(fs)
}

// heartbeatNamespace is where the heartbeat Lease is renewed: the
// --heartbeat-namespace, else the extension's own namespace ("": no
// heartbeat).
func (o *Options) heartbeatNamespace() string {
	if o.Heartbeat.Namespace != "" {
		return o.Heartbeat.Namespace
	}
	return o.Namespace
}

// leaseCache restricts the manager's Lease cache to the heartbeat's
// namespace, so that the chart's Role in that namespace suffices (no
// list or watch of the seed's Leases).
func leaseCache(ns string) map[client.Object]cache.ByObject {
	if ns == "" {
		return nil
	}
	return map[client.Object]cache.ByObject{&coordinationv1.Lease{}: {Namespaces: map[string]cache.Config{ns: {}}}}
}

// addHeartbeat adds Gardener's heartbeat controller, which renews the
// Lease gardener-extension-heartbeat that gardenlet checks in the shoots'
// health (a stale or missing one marks the extension's health checks
// outdated).
func addHeartbeat(mgr manager.Manager, o Options) error {
	ns := o.heartbeatNamespace()
	if ns == "" {
		return nil
	}
	interval := o.Heartbeat.RenewIntervalSeconds
	if interval <= 0 {
		interval = heartbeat.DefaultAddOptions.RenewIntervalSeconds
	}
	return heartbeat.Add(mgr, heartbeat.AddArgs{ExtensionName: ExtensionName, Namespace: ns, RenewIntervalSeconds: interval,
		Clock: clock.RealClock{}, ControllerOptions: controller.Options{SkipNameValidation: &o.SkipNameValidation}})
}
