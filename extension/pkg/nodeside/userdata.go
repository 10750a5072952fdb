package nodeside

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/coreos/ignition/v2/config/v3_4"
	"github.com/coreos/ignition/v2/config/v3_4/types"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
)

// IgnitionVersion is the Ignition config spec version of the user data
// (Fedora CoreOS, RHCOS 4.14 and later and the bootc images built from
// them read it).
const IgnitionVersion = "3.4.0"

func userData(p Provision) ([]byte, error) {
	if p.OSC == nil {
		return nil, errors.New("nodeside: no OperatingSystemConfig")
	}
	if p.OSC.Spec.Purpose != extensionsv1alpha1.OperatingSystemConfigPurposeProvision {
		return nil, fmt.Errorf("spec.purpose: %q, user data is made from a %q OperatingSystemConfig", p.OSC.Spec.Purpose, extensionsv1alpha1.OperatingSystemConfigPurposeProvision)
	}
	cfg := types.Config{Ignition: types.Ignition{Version: IgnitionVersion}}
	files, err := ignitionFiles(p.OSC.Spec.Files, p.Secrets)
	if err != nil {
		return nil, err
	}
	units, err := ignitionUnits(p.OSC.Spec.Units, p.OSC.Spec.Files)
	if err != nil {
		return nil, err
	}
	if fb, ok := firstBoot(p.OSC.Spec.Units); ok {
		if err := addUnit(units, fb); err != nil {
			return nil, err
		}
		units = append(units, fb)
	}
	if p.Image != "" {
		pf, pu, err := pivot(p)
		if err != nil {
			return nil, err
		}
		files, err = addFiles(files, pf)
		if err != nil {
			return nil, err
		}
		if err := addUnit(units, pu); err != nil {
			return nil, err
		}
		units = append(units, pu)
	}
	cfg.Storage.Files = files
	cfg.Systemd.Units = units
	out, err := marshal(cfg)
	if err != nil {
		return nil, err
	}
	// Ignition's own validation, as the machine runs it; what it refuses
	// would stop the machine's first boot.
	if _, rpt, err := v3_4.Parse(out); err != nil {
		return nil, fmt.Errorf("nodeside: the user data is not a valid Ignition config: %v: %s", err, rpt.String())
	}
	return out, nil
}

// addFiles appends the extension's own files, refusing an OSC file at the
// same path (Ignition would refuse the config).
func addFiles(files, more []types.File) ([]types.File, error) {
	for _, m := range more {
		for i, f := range files {
			if f.Path == m.Path {
				return nil, fmt.Errorf("spec.files[%d].path: %s is written by the pivot onto the pool image", i, f.Path)
			}
		}
	}
	return append(files, more...), nil
}

// addUnit refuses an OSC unit of the name of the extension's unit u.
func addUnit(units []types.Unit, u types.Unit) error {
	for i, o := range units {
		if o.Name == u.Name {
			return fmt.Errorf("spec.units[%d].name: %s is a unit of the extension", i, u.Name)
		}
	}
	return nil
}

// marshal writes cfg as JSON without HTML escaping, so that a
// transmitUnencoded placeholder stays as machine-controller-manager looks
// for it.
func marshal(cfg types.Config) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(cfg); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
