package render

import (
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	"github.com/oslayer/oslayer/render/systemd"
	"github.com/oslayer/oslayer/render/tree"
	"github.com/oslayer/oslayer/sources/model"
)

// PresetPath is the preset file that keeps the configuration's enablement
// when systemd applies presets: on a first boot (machine-id not yet
// initialised) PID 1 runs `systemctl preset-all`, which would otherwise
// re-enable a unit the configuration disabled but the vendor presets
// enable (sshd.service on FCOS). It sorts before the vendor files in
// /usr/lib/systemd/system-preset, so its rules win. Ignition writes the
// same lines into 20-ignition.preset for a MachineConfig's units.
const PresetPath = "/etc/systemd/system-preset/20-oslayer.preset"

// placePresets writes PresetPath with a rule for every unit the
// configuration enables or disables, the way Ignition writes its preset
// file: "enable NAME", and "disable NAME" only for a unit that
// `systemctl is-enabled` calls enabled (or static, indirect, alias) in
// before, the image's units before enabling and disabling (Ignition asks
// is-enabled before it disables; without a base tree every disabled unit
// gets its rule). Enabled instances of one template share one line
// "enable TEMPLATE INSTANCE..." (systemd matches instances only in that
// form). Lines are sorted, so the file is deterministic. Masked units get
// none: a mask needs no preset.
func (p *placer) placePresets(units []model.Unit, reports []*UnitReport, bad []bool, before fs.FS) {
	instances := map[string][]string{} // template -> enabled instances
	var lines []string
	for i, u := range units {
		if reports[i] == nil || bad[i] || u.Mask || u.Enabled == nil {
			continue
		}
		if !*u.Enabled {
			if p.req.Base != nil {
				if st, err := systemd.IsEnabled(before, u.Name); err != nil || !st.Succeeds() {
					continue
				}
			}
			lines = append(lines, "disable "+u.Name)
			continue
		}
		if t, ok := systemd.TemplateOf(u.Name); ok {
			at, dot := strings.IndexByte(u.Name, '@'), strings.LastIndexByte(u.Name, '.')
			instances[t] = append(instances[t], u.Name[at+1:dot])
			continue
		}
		lines = append(lines, "enable "+u.Name)
	}
	for t, in := range instances {
		sort.Strings(in)
		lines = append(lines, "enable "+t+" "+strings.Join(in, " "))
	}
	if len(lines) == 0 {
		return
	}
	sort.Strings(lines)
	data := "# Written by oslayer: the enablement the configuration asks for, kept when\n" +
		"# systemd applies presets (on a first boot).\n" + strings.Join(lines, "\n") + "\n"
	p.add(tree.Entry{Path: PresetPath, Kind: tree.File, Mode: 0o644, Data: []byte(data), Layer: LayerConfig},
		Baked{Path: PresetPath, Source: model.Origin{Document: "oslayer", Field: "unit presets"}, Generated: true})
}

// firstBootPresets computes, when the base tree is known, the links that
// the presets of a first boot add to the image: systemd's PID 1 runs
// `systemctl preset-all` in enable-only mode when /etc/machine-id is not
// initialised (systemd.PresetAll over the base with this layer, its
// whiteouts applied). Report.FirstBoot lists them; a link the
// configuration's disable removed, or of a unit it disables, is a warning:
// presets name units, so the vendor presets enable it again (an Also= unit,
// the unit behind an alias, an instance), as they do after Ignition's
// preset file.
func (p *placer) firstBootPresets(units []model.Unit, reports []*UnitReport) {
	if p.req.Base == nil {
		return
	}
	var gone systemd.Removal
	for _, e := range p.tree.Entries() {
		if e.Kind == tree.Whiteout {
			gone.Links = append(gone.Links, e.Path)
		}
	}
	removedBy := map[string]model.Origin{}
	for i, ur := range reports {
		if ur == nil {
			continue
		}
		for _, r := range ur.Removed {
			removedBy[r] = units[i].Origin
		}
		if u := units[i]; u.Enabled != nil && !*u.Enabled && !u.Mask {
			removedBy["name:"+u.Name] = u.Origin
		}
	}
	view := systemd.Without(systemd.Overlay(p.unitFS(), p.req.Base), gone)
	ch, _ := systemd.PresetAll(view, systemd.PresetEnableOnly)
	for _, l := range ch.Links {
		p.firstBoot = append(p.firstBoot, l.Path+" -> "+l.Target)
		o, ok := removedBy[l.Path]
		if !ok {
			o, ok = removedBy["name:"+path.Base(l.Path)]
		}
		if ok {
			p.warns = append(p.warns, fmt.Sprintf("%s: a first boot's presets (systemctl preset-all, enable-only) create %s -> %s again, which this disable removes: presets name units (an enabled unit pulls in its Also= units), so they cannot keep it disabled", o, l.Path, l.Target))
		}
	}
}
