// Package charts embeds the OS extension's Helm chart (the one a
// ControllerDeployment names), so that tests render it with Gardener's
// chart renderer as gardenlet does.
package charts

import "embed"

// Chart holds the chart directory ChartPath.
//
//go:embed all:oslayer-os-extension
var Chart embed.FS

// ChartPath is the chart's directory in Chart.
const ChartPath = "oslayer-os-extension"
