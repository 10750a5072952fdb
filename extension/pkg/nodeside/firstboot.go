package nodeside

import (
	"path"
	"strings"

	"github.com/coreos/ignition/v2/config/v3_4/types"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
)

// The first-boot start of units enabling does not start.
const (
	// FirstBootUnit starts, once, the OSC's units that have no [Install]
	// section, as Gardener's extension library's provision script does
	// (systemctl enable and restart --no-block of every unit).
	FirstBootUnit = "oslayer-first-boot.service"
	// FirstBootStamp exists once FirstBootUnit ran.
	FirstBootStamp = "/var/lib/oslayer/first-boot-started"
)

// firstBoot is the first-boot unit for units, false when none of them
// needs it. It runs after the pivot (on the pool image when there is
// one).
func firstBoot(units []extensionsv1alpha1.Unit) (types.Unit, bool) {
	var names []string
	for _, u := range units {
		if startsOnce(u) {
			names = append(names, u.Name)
		}
	}
	if len(names) == 0 {
		return types.Unit{}, false
	}
	content := `[Unit]
Description=Start the provision units that are not enabled at boot, once
After=` + PivotUnit + `
ConditionPathExists=!` + FirstBootStamp + `

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/bin/systemctl restart --no-block ` + strings.Join(names, " ") + `
ExecStartPost=/bin/sh -c 'mkdir -p ` + path.Dir(FirstBootStamp) + ` && touch ` + FirstBootStamp + `'

[Install]
WantedBy=multi-user.target
`
	return types.Unit{Name: FirstBootUnit, Enabled: new(true), Contents: &content}, true
}
