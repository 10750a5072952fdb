package diff

// MCOChange is a rendered-config change in the terms the machine-config
// daemon decides on (openshift/machine-config-operator @ 7ff337a4ffac,
// pkg/daemon/update.go machineConfigDiff, and the file and unit sets of
// pkg/controller/common/helpers.go CalculateConfigFileDiffs and
// GetChangedConfigUnitsByType).
type MCOChange struct {
	// Files are the node paths of Ignition storage.files added, changed or
	// removed.
	Files []string `json:"files,omitempty"`
	// Units are the names of systemd units added, changed (contents,
	// drop-ins, enablement, mask) or removed.
	Units []string `json:"units,omitempty"`
	// Passwd is set when passwd (in practice core's SSH keys) changed.
	Passwd bool `json:"passwd,omitempty"`
	// OSImageURL, KernelArgs, KernelType and Extensions are the changes
	// the daemon always reboots for.
	OSImageURL bool `json:"osImageURL,omitempty"`
	KernelArgs bool `json:"kernelArgs,omitempty"`
	KernelType bool `json:"kernelType,omitempty"`
	Extensions bool `json:"extensions,omitempty"`
	// FIPS is a spec.fips change, which the MCO refuses (it is in Refused
	// too).
	FIPS bool `json:"fips,omitempty"`
	// Refused lists changes the MCO refuses outright (reconcilable:
	// directories, links, disks, filesystems, raid, passwd other than SSH
	// keys, FIPS).
	Refused []string `json:"refused,omitempty"`
}

// rebootFields names the always-reboot changes that are set.
func (c MCOChange) rebootFields() []string {
	var out []string
	for _, f := range []struct {
		set  bool
		name string
	}{
		{c.OSImageURL, "osImageURL"}, {c.KernelArgs, "kernelArguments"},
		{c.KernelType, "kernelType"}, {c.Extensions, "extensions"},
	} {
		if f.set {
			out = append(out, f.name)
		}
	}
	return out
}

// Empty reports whether nothing the daemon looks at changed.
func (c MCOChange) Empty() bool {
	return len(c.Files) == 0 && len(c.Units) == 0 && !c.Passwd && len(c.rebootFields()) == 0 && len(c.Refused) == 0
}
