package nodeside

import (
	"fmt"
	"strings"

	"github.com/coreos/ignition/v2/config/v3_4/types"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
)

// nodeAgentUnit is gardener-node-agent's unit: the agent always enables it.
const nodeAgentUnit = "gardener-node-agent.service"

// ignitionUnits translates the provision OSC's units: content and
// drop-ins as Gardener's extension library writes them
// (UnitsToDiskScript), enabled unless enable is false, as
// gardener-node-agent enables them (enablement). Ignition enables a unit
// through a preset, so an enabled unit starts on every boot, the first
// one included; a unit without an [Install] section is started once by
// the first-boot unit (firstBoot). filePaths must name files of the OSC.
func ignitionUnits(units []extensionsv1alpha1.Unit, files []extensionsv1alpha1.File) ([]types.Unit, error) {
	paths := map[string]bool{}
	for _, f := range files {
		paths[f.Path] = true
	}
	var out []types.Unit
	seen := map[string]int{}
	for i, u := range units {
		field := fmt.Sprintf("spec.units[%d]", i)
		if j, ok := seen[u.Name]; ok {
			return nil, fmt.Errorf("%s.name: %s is also spec.units[%d]", field, u.Name, j)
		}
		seen[u.Name] = i
		if !validUnitName(u.Name) {
			return nil, fmt.Errorf("%s.name: %q is not a systemd unit name (NAME.service, .timer, ...)", field, u.Name)
		}
		if u.Command != nil {
			switch *u.Command {
			case extensionsv1alpha1.CommandStart, extensionsv1alpha1.CommandRestart, extensionsv1alpha1.CommandStop:
			default:
				return nil, fmt.Errorf("%s.command: %q (want start, restart or stop)", field, *u.Command)
			}
		}
		for j, fp := range u.FilePaths {
			if !paths[fp] {
				return nil, fmt.Errorf("%s.filePaths[%d]: %s is not a file of spec.files", field, j, fp)
			}
		}
		tu := types.Unit{Name: u.Name, Contents: u.Content, Enabled: enablement(u)}
		for j, d := range u.DropIns {
			if !validDropInName(d.Name) {
				return nil, fmt.Errorf("%s.dropIns[%d].name: %q is not a drop-in name (NAME.conf)", field, j, d.Name)
			}
			tu.Dropins = append(tu.Dropins, types.Dropin{Name: d.Name, Contents: new(d.Content)})
		}
		out = append(out, tu)
	}
	return out, nil
}

// unitTypes are the suffixes of systemd unit names.
var unitTypes = []string{".service", ".socket", ".device", ".mount", ".automount", ".swap", ".target", ".path", ".timer", ".slice", ".scope"}

func validUnitName(n string) bool {
	if strings.ContainsAny(n, "/\x00") {
		return false
	}
	for _, t := range unitTypes {
		if len(n) > len(t) && strings.HasSuffix(n, t) {
			return true
		}
	}
	return false
}

func validDropInName(n string) bool {
	return len(n) > len(".conf") && strings.HasSuffix(n, ".conf") && !strings.ContainsAny(n, "/\x00")
}

// enablement is the unit's Ignition enabled: true unless enable is false
// (gardener-node-agent always enables its own unit), nil for a unit whose
// content has no [Install] section (enabling it does nothing; Ignition
// warns).
func enablement(u extensionsv1alpha1.Unit) *bool {
	if u.Content != nil && !hasInstall(*u.Content) {
		return nil
	}
	return new(u.Enable == nil || *u.Enable || u.Name == nodeAgentUnit)
}

// startsOnce: a unit gardener-node-agent starts (enable not false, command
// not stop) that enabling does not start at boot (its content has no
// [Install] section).
func startsOnce(u extensionsv1alpha1.Unit) bool {
	if u.Content == nil || hasInstall(*u.Content) {
		return false
	}
	stop := u.Command != nil && *u.Command == extensionsv1alpha1.CommandStop
	return (u.Enable == nil || *u.Enable) && !stop
}

// hasInstall: the unit file has an [Install] section with an option.
func hasInstall(content string) bool {
	in := false
	for _, l := range strings.Split(content, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case l == "" || strings.HasPrefix(l, "#") || strings.HasPrefix(l, ";"):
		case strings.HasPrefix(l, "["):
			in = l == "[Install]"
		case in:
			return true
		}
	}
	return false
}
