// Package charts embeds the OS extension's Helm charts: the extension's
// (the one a ControllerDeployment names) and the two of its Shoot
// admission webhook (the ones an Extension's spec.deployment.admission
// names), so that tests render them with Gardener's chart renderer as
// gardenlet and gardener-operator do.
package charts

import "embed"

// Chart holds the chart directory ChartPath.
//
//go:embed all:oslayer-os-extension
var Chart embed.FS

// ChartPath is the chart's directory in Chart.
const ChartPath = "oslayer-os-extension"

// Admission holds the admission webhook's charts AdmissionRuntimePath
// (the webhook server, in the garden's runtime cluster) and
// AdmissionApplicationPath (its registration, in the virtual garden).
//
//go:embed all:oslayer-os-extension-admission
var Admission embed.FS

// The admission charts' directories in Admission.
const (
	AdmissionRuntimePath     = "oslayer-os-extension-admission/runtime"
	AdmissionApplicationPath = "oslayer-os-extension-admission/application"
)
