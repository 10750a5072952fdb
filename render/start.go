package render

import (
	"fmt"
	"path"
	"strings"

	"github.com/oslayer/oslayer/render/tree"
	"github.com/oslayer/oslayer/sources/model"
)

// The target that starts, at boot, the units the configuration's agent
// starts whenever it applies the configuration (model.Unit.StartOnApply)
// but that no enablement link starts. gardener-node-agent restarts every
// unit it does not stop when it applies an OSC, so a unit without an
// [Install] section (gardener-user.service, which creates the SSH user)
// runs on its nodes; in an image nothing would start it. oslayer owns this
// target and enables it statically (a link in /usr, like the /var
// mechanism's prune unit), so it follows the image.
const (
	StartTarget      = "oslayer-start.target"
	StartTargetPath  = "/usr/lib/systemd/system/" + StartTarget
	StartTargetWants = "/usr/lib/systemd/system/multi-user.target.wants/" + StartTarget
)

// startOnBoot writes StartTarget with a Wants= line for every unit that is
// started on apply, enabled, not masked and got no enablement link.
func (p *placer) startOnBoot(units []model.Unit, reports []*UnitReport, bad []bool) {
	var names []string
	for i, u := range units {
		ur := reports[i]
		if ur == nil || bad[i] || u.Mask || !u.StartOnApply || u.Enabled == nil || !*u.Enabled || len(ur.Links) > 0 {
			continue
		}
		if ur.InstallFrom == "missing" {
			continue // the base does not ship it: the node agent's start fails too (warned)
		}
		if strings.Contains(u.Name, "@.") {
			p.warns = append(p.warns, fmt.Sprintf("%s: unit %s is a template without an instance: it cannot be started at boot", u.Origin, u.Name))
			continue
		}
		names = append(names, u.Name)
		ur.StartedBy = StartTarget
		p.warns = append(p.warns, fmt.Sprintf("%s: unit %s has no enablement links, but the node agent starts it whenever it applies the configuration: %s (wanted by multi-user.target) starts it at boot", u.Origin, u.Name, StartTarget))
	}
	if len(names) == 0 {
		return
	}
	var b strings.Builder
	b.WriteString("# Written by oslayer: units the node agent starts whenever it applies the\n")
	b.WriteString("# configuration, but that have no [Install] section (no enablement link\n")
	b.WriteString("# starts them). This target starts them at boot.\n")
	b.WriteString("[Unit]\nDescription=Units the node agent starts when it applies the configuration (oslayer)\n")
	for _, n := range names {
		b.WriteString("Wants=" + n + "\n")
	}
	gen := model.Origin{Document: "oslayer", Field: "units started on apply"}
	p.add(tree.Entry{Path: StartTargetPath, Kind: tree.File, Mode: 0o644, Data: []byte(b.String()), Layer: LayerConfig},
		Baked{Path: StartTargetPath, Source: gen, Generated: true})
	p.add(tree.Entry{Path: StartTargetWants, Kind: tree.Symlink, Mode: 0o777, Target: path.Join("..", StartTarget), Layer: LayerConfig},
		Baked{Path: StartTargetWants, Source: gen, Generated: true})
}
