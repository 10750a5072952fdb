package machineconfig

import (
	"errors"
	"fmt"
	"strings"

	"github.com/coreos/go-semver/semver"
	v23tov30 "github.com/coreos/ign-converter/translate/v23tov30"
	ign2errors "github.com/coreos/ignition/config/shared/errors"
	ign22 "github.com/coreos/ignition/config/v2_2"
	ign2types "github.com/coreos/ignition/config/v2_2/types"
	ign23 "github.com/coreos/ignition/config/v2_3"
	v31translate "github.com/coreos/ignition/v2/config/v3_1/translate"
	v32translate "github.com/coreos/ignition/v2/config/v3_2/translate"
	v33translate "github.com/coreos/ignition/v2/config/v3_3/translate"
	v34translate "github.com/coreos/ignition/v2/config/v3_4/translate"
	v35translate "github.com/coreos/ignition/v2/config/v3_5/translate"
	expTranslate "github.com/coreos/ignition/v2/config/v3_6_experimental/translate"
	igntypes "github.com/coreos/ignition/v2/config/v3_6_experimental/types"
)

// parseSpec2 parses an Ignition spec 2.x config and converts it to spec 3
// the way the MCO does when it renders a pool
// (openshift/machine-config-operator @ 7ff337a4ffac8e7562692181178ede61e4b2eec5,
// pkg/controller/common/helpers.go IgnParseWrapper and ParseAndConvertConfig,
// pkg/controller/common/ignition_converter.go):
//
//   - parse with github.com/coreos/ignition/config/v2_2 (2.0 and 2.1 are
//     translated to 2.2 by that parser; 2.3 and later are an unknown
//     version there, so the MCO refuses them too);
//   - drop duplicate files and units inside the one config, keeping the last
//     entry of a path or unit name; drop-ins of the dropped duplicates are
//     added to the kept unit unless it has a drop-in of that name; every
//     passwd user must be "core" and their SSH keys are concatenated
//     (removeIgnDuplicateFilesUnitsUsers);
//   - convert 2.2 → 2.3 (ignition's v2_3 Translate) → 3.0 with
//     github.com/coreos/ign-converter v23tov30 and the file-system map
//     {"root": "/"}, then up through ignition's own 3.x translations.
//
// The result is translated on to the newest spec this package merges in.
func parseSpec2(raw []byte) (igntypes.Config, []string, error) {
	c, rpt, err := ign22.Parse(raw)
	if err != nil {
		if errors.Is(err, ign2errors.ErrUnknownVersion) {
			return igntypes.Config{}, nil, errors.New("unsupported Ignition version: spec 2.x configs must be 2.0, 2.1 or 2.2 (as the MCO parses them), spec 3.0 to 3.5 is supported")
		}
		var msgs []string
		for _, e := range rpt.Entries {
			e.Highlight = ""
			msgs = append(msgs, strings.ReplaceAll(strings.TrimSpace(e.String()), "\n", ": "))
		}
		if len(msgs) > 0 {
			return igntypes.Config{}, nil, fmt.Errorf("invalid Ignition spec 2 config: %v: %s", err, strings.Join(msgs, "; "))
		}
		return igntypes.Config{}, nil, fmt.Errorf("invalid Ignition spec 2 config: %v", err)
	}
	var warns []string
	for _, e := range rpt.Entries {
		e.Highlight = "" // the whole config on one line
		warns = append(warns, strings.ReplaceAll(strings.TrimSpace(e.String()), "\n", ": "))
	}
	if v, err := semver.NewVersion(c.Ignition.Version); err != nil || !v.Equal(ign2types.MaxVersion) {
		return igntypes.Config{}, nil, fmt.Errorf("Ignition version %q: conversion to spec 3 is only defined from %s", c.Ignition.Version, ign2types.MaxVersion)
	}
	c, err = dedupeSpec2(c)
	if err != nil {
		return igntypes.Config{}, nil, err
	}
	v30, err := v23tov30.Translate(ign23.Translate(c), map[string]string{"root": "/"})
	if err != nil {
		return igntypes.Config{}, nil, fmt.Errorf("converting Ignition spec 2 config to spec 3: %v", err)
	}
	v35 := v35translate.Translate(v34translate.Translate(v33translate.Translate(v32translate.Translate(v31translate.Translate(v30)))))
	return expTranslate.Translate(v35), warns, nil
}

// dedupeSpec2 removes duplicate files, units and users from one spec 2
// config, as the MCO does before converting it (spec 3 refuses duplicates
// inside one config): walking from the last entry, the first entry seen for
// a path or unit name is kept; a dropped unit's drop-ins are appended to the
// kept unit unless it already has a drop-in of that name. Every user must be
// "core"; all their SSH keys go to the last user entry, each key once.
func dedupeSpec2(c ign2types.Config) (ign2types.Config, error) {
	files := c.Storage.Files
	var outFiles []ign2types.File
	seenPath := map[string]bool{}
	for i := len(files) - 1; i >= 0; i-- {
		if seenPath[files[i].Path] {
			continue
		}
		seenPath[files[i].Path] = true
		outFiles = append(outFiles, files[i])
	}

	units := c.Systemd.Units
	var outUnits []ign2types.Unit
	kept := map[string]int{} // unit name -> index in outUnits
	for i := len(units) - 1; i >= 0; i-- {
		u := units[i]
		k, dup := kept[u.Name]
		if !dup {
			kept[u.Name] = len(outUnits)
			outUnits = append(outUnits, u)
			continue
		}
		for _, d := range u.Dropins {
			has := false
			for _, e := range outUnits[k].Dropins {
				if e.Name == d.Name {
					has = true
					break
				}
			}
			if !has {
				outUnits[k].Dropins = append(outUnits[k].Dropins, d)
			}
		}
	}

	if users := c.Passwd.Users; len(users) > 0 {
		for _, u := range users {
			if u.Name != "core" {
				return c, fmt.Errorf("unexpected user with name: %v. Only core user is supported", u.Name)
			}
		}
		last := users[len(users)-1]
		keys := append([]ign2types.SSHAuthorizedKey(nil), last.SSHAuthorizedKeys...)
		for i := len(users) - 2; i >= 0; i-- {
			keys = append(keys, users[i].SSHAuthorizedKeys...)
		}
		seen := map[ign2types.SSHAuthorizedKey]bool{}
		last.SSHAuthorizedKeys = nil
		for _, k := range keys {
			if !seen[k] {
				seen[k] = true
				last.SSHAuthorizedKeys = append(last.SSHAuthorizedKeys, k)
			}
		}
		c.Passwd.Users = []ign2types.PasswdUser{last}
	}
	c.Storage.Files = outFiles
	c.Systemd.Units = outUnits
	return c, nil
}
