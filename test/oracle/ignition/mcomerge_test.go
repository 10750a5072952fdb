package ignition

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	v23tov30 "github.com/coreos/ign-converter/translate/v23tov30"
	ign22 "github.com/coreos/ignition/config/v2_2"
	ign22types "github.com/coreos/ignition/config/v2_2/types"
	ign23 "github.com/coreos/ignition/config/v2_3"
	ign3errors "github.com/coreos/ignition/v2/config/shared/errors"
	tr31 "github.com/coreos/ignition/v2/config/v3_1/translate"
	tr32 "github.com/coreos/ignition/v2/config/v3_2/translate"
	tr33 "github.com/coreos/ignition/v2/config/v3_3/translate"
	tr34 "github.com/coreos/ignition/v2/config/v3_4/translate"
	ign35 "github.com/coreos/ignition/v2/config/v3_5"
	tr35 "github.com/coreos/ignition/v2/config/v3_5/translate"
	ign35types "github.com/coreos/ignition/v2/config/v3_5/types"
	mcfgv1 "github.com/openshift/api/machineconfiguration/v1"
)

// This file is the oracle's side of a pool render: the MachineConfig
// operator's MergeMachineConfigs (pkg/controller/common/helpers.go), rebuilt
// from its description so that the oracle does not use oslayer's own code:
//
//   - worker-role configs first, then the others (custom pools override
//     worker configs), each group in lexical order of the name;
//   - every config parsed as Ignition 3.x up to the MCO's spec (3.5), or as
//     2.2 and converted with coreos/ign-converter after dropping duplicate
//     files and units (the later one wins, drop-ins of duplicates are kept);
//   - Ignition's own Merge, with files that set no compression given an
//     explicit empty one first, so a later plain file replaces an earlier
//     gzip one (the MCO's "compression fix");
//   - overwrite defaults to true for every file.

// workerRole is the label value of the worker pool's configs.
const workerRole = "worker"

// roleLabel is the MachineConfig label that names the pool.
const roleLabel = "machineconfiguration.openshift.io/role"

// mergeMachineConfigs returns the merged Ignition config of mcs.
func mergeMachineConfigs(mcs []*mcfgv1.MachineConfig) (ign35types.Config, error) {
	var workers, others []*mcfgv1.MachineConfig
	for _, mc := range mcs {
		if mc.Labels[roleLabel] == workerRole {
			workers = append(workers, mc)
		} else {
			others = append(others, mc)
		}
	}
	byName := func(s []*mcfgv1.MachineConfig) {
		sort.SliceStable(s, func(i, j int) bool { return s[i].Name < s[j].Name })
	}
	byName(workers)
	byName(others)
	ordered := append(workers, others...)

	out := ign35types.Config{Ignition: ign35types.Ignition{Version: ign35types.MaxVersion.String()}}
	for i, mc := range ordered {
		if mc.Spec.Config.Raw == nil {
			continue
		}
		cfg, err := parseAndConvert(mc.Spec.Config.Raw)
		if err != nil {
			return out, fmt.Errorf("MachineConfig %s: %w", mc.Name, err)
		}
		if i == 0 {
			out = cfg
			continue
		}
		for j := range cfg.Storage.Files {
			if c := &cfg.Storage.Files[j].Contents; c.Compression == nil {
				c.Compression = new(string)
			}
		}
		out = ign35.Merge(out, cfg)
		for j := range out.Storage.Files {
			if c := &out.Storage.Files[j].Contents; c.Compression != nil && *c.Compression == "" {
				c.Compression = nil
			}
		}
	}
	for j := range out.Storage.Files {
		if out.Storage.Files[j].Overwrite == nil {
			yes := true
			out.Storage.Files[j].Overwrite = &yes
		}
	}
	return out, nil
}

// parseAndConvert parses a spec 3.x config up to 3.5, or a spec 2.2 config
// converted to 3.5.
func parseAndConvert(raw []byte) (ign35types.Config, error) {
	cfg, rpt, err := ign35.ParseCompatibleVersion(raw)
	if err == nil && !rpt.IsFatal() {
		return cfg, nil
	}
	if err == nil || !errors.Is(err, ign3errors.ErrUnknownVersion) {
		return cfg, fmt.Errorf("parsing Ignition config: %v %s", err, rpt)
	}
	c2, rpt2, err2 := ign22.Parse(raw)
	if err2 != nil || rpt2.IsFatal() {
		return cfg, fmt.Errorf("parsing Ignition spec 2 config: %v %s", err2, rpt2)
	}
	c2 = dedupe2(c2)
	v30, err := v23tov30.Translate(ign23.Translate(c2), map[string]string{"root": "/"})
	if err != nil {
		return cfg, fmt.Errorf("converting Ignition spec 2 config: %w", err)
	}
	out := tr35.Translate(tr34.Translate(tr33.Translate(tr32.Translate(tr31.Translate(v30)))))
	// Round-trip through JSON: the translated struct is what the MCO
	// stores in the rendered config.
	b, err := json.Marshal(out)
	if err != nil {
		return cfg, err
	}
	cfg, rpt, err = ign35.Parse(b)
	if err != nil || rpt.IsFatal() {
		return cfg, fmt.Errorf("converted config: %v %s", err, rpt)
	}
	return cfg, nil
}

// dedupe2 keeps the last file per path and the last unit per name (adding
// the drop-ins of earlier duplicates it lacks), as the MCO does before
// converting a spec 2 config. Users are left out: ignition-apply does not
// create them.
func dedupe2(c ign22types.Config) ign22types.Config {
	seen := map[string]bool{}
	var files []ign22types.File
	for i := len(c.Storage.Files) - 1; i >= 0; i-- {
		f := c.Storage.Files[i]
		if !seen[f.Path] {
			seen[f.Path] = true
			files = append(files, f)
		}
	}
	var units []ign22types.Unit
	idx := map[string]int{}
	for i := len(c.Systemd.Units) - 1; i >= 0; i-- {
		u := c.Systemd.Units[i]
		j, dup := idx[u.Name]
		if !dup {
			idx[u.Name] = len(units)
			units = append(units, u)
			continue
		}
		for _, d := range u.Dropins {
			has := false
			for _, e := range units[j].Dropins {
				has = has || e.Name == d.Name
			}
			if !has {
				units[j].Dropins = append(units[j].Dropins, d)
			}
		}
	}
	c.Storage.Files, c.Systemd.Units, c.Passwd.Users = files, units, nil
	return c
}
