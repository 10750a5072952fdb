package controller

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The controller's metrics, served on the manager's metrics endpoint next
// to controller-runtime's own (workqueue_depth{name="poolimage"} is the
// queue depth, controller_runtime_reconcile_total the reconciles).
var (
	buildDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "oslayer_build_duration_seconds",
		Help:    "Wall time of PoolImage builds (read inputs to tag moved), by result.",
		Buckets: []float64{0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120},
	}, []string{"result"})
	buildsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "oslayer_builds_total",
		Help: "PoolImage builds, by result (succeeded, failed).",
	}, []string{"result"})
	lastSuccess = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "oslayer_last_success_timestamp_seconds",
		Help: "Unix time of each PoolImage's last successful build (removed with the PoolImage).",
	}, []string{"namespace", "name"})
)

func init() {
	ctrlmetrics.Registry.MustRegister(buildDuration, buildsTotal, lastSuccess)
	// Every result's series exists from the start, at zero: an alert on
	// increase(oslayer_builds_total{result="failed"}[1h]) > 0 then sees
	// the first failure (a series born at 1 has no increase to show).
	for _, r := range []string{"succeeded", "failed"} {
		buildsTotal.WithLabelValues(r)
		buildDuration.WithLabelValues(r)
	}
}
