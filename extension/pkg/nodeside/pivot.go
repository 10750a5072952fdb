package nodeside

import (
	"encoding/json"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/coreos/ignition/v2/config/v3_4/types"
)

// The pivot of a new machine onto the pool image.
const (
	// PivotUnit is the oneshot unit that switches a new machine to the
	// pool image before it joins.
	PivotUnit = "oslayer-pivot.service"
	// PivotStamp exists once the machine runs the pool image it was
	// provisioned for; the pivot unit does not run again after that (an
	// in-place update may since have moved the node on).
	PivotStamp = "/var/lib/oslayer/pivoted"
	// PolicyPath, RegistriesDFile: where the pivot's signature policy
	// lands.
	PolicyPath      = "/etc/containers/policy.json"
	RegistriesDFile = "/etc/containers/registries.d/oslayer.yaml"
)

// pivotBefore are the units that must not start before the machine runs
// the pool image: gardener-node-init installs and starts the node agent,
// which starts the kubelet.
var pivotBefore = []string{"gardener-node-init.service", nodeAgentUnit, "kubelet.service"}

// pivot returns the files and unit that switch a new machine to p.Image:
// the update command, the pool-image record, the signature policy and
// the oneshot pivot unit.
func pivot(p Provision) ([]types.File, types.Unit, error) {
	if err := checkDigestRef("image", p.Image); err != nil {
		return nil, types.Unit{}, err
	}
	files := []types.File{
		plainFile(UpdateCommand, updateCommandMode, updateScript),
		plainFile(PoolImageFile, poolImageMode, p.Image+"\n"),
	}
	pol, err := policyFiles(p)
	if err != nil {
		return nil, types.Unit{}, err
	}
	files = append(files, pol...)
	return files, types.Unit{Name: PivotUnit, Enabled: new(true), Contents: new(pivotUnit(p.Image))}, nil
}

// pivotUnit is the pivot unit's content. The update command switches and
// reboots; after the reboot it finds the image booted and exits 0, and
// the stamp is written. It retries network problems itself, so that the
// units after it wait (a oneshot unit has no start timeout); invalid
// arguments and a system failure fail the unit, and the machine joins on
// its base image (the staging unit stages the pool image for its next
// boot).
func pivotUnit(image string) string {
	return `[Unit]
Description=Switch to the pool image before the node joins
Wants=network-online.target
After=network-online.target
Before=` + strings.Join(pivotBefore, " ") + `
ConditionPathExists=!` + PivotStamp + `

[Service]
Type=oneshot
RemainAfterExit=yes
TimeoutStartSec=infinity
ExecStart=` + UpdateCommand + ` --retry ` + image + `
ExecStartPost=/bin/sh -c 'mkdir -p ` + path.Dir(PivotStamp) + ` && touch ` + PivotStamp + `'

[Install]
WantedBy=multi-user.target
`
}

// policyFiles are policy.json, the registries.d file and the public key
// at each keyPath policy.json names. Without a policy none is written
// (the base's own policy applies).
func policyFiles(p Provision) ([]types.File, error) {
	if len(p.Policy) == 0 {
		if len(p.SigstoreConfig) != 0 || len(p.PublicKey) != 0 {
			return nil, fmt.Errorf("policy: a sigstore configuration or public key without a policy")
		}
		return nil, nil
	}
	keys, err := keyPaths(p.Policy)
	if err != nil {
		return nil, err
	}
	if len(keys) > 0 && len(p.PublicKey) == 0 {
		return nil, fmt.Errorf("policy: names the key %s, but no public key was given", keys[0])
	}
	files := []types.File{plainFile(PolicyPath, 0o644, string(p.Policy))}
	if len(p.SigstoreConfig) != 0 {
		files = append(files, plainFile(RegistriesDFile, 0o644, string(p.SigstoreConfig)))
	}
	for _, k := range keys {
		files = append(files, plainFile(k, 0o644, string(p.PublicKey)))
	}
	return files, nil
}

// keyPaths are the distinct keyPath values of a containers policy.json's
// requirements, sorted.
func keyPaths(policy []byte) ([]string, error) {
	var pol struct {
		Default    []map[string]any                       `json:"default"`
		Transports map[string]map[string][]map[string]any `json:"transports"`
	}
	if err := json.Unmarshal(policy, &pol); err != nil {
		return nil, fmt.Errorf("policy: not a containers policy.json: %v", err)
	}
	set := map[string]bool{}
	add := func(reqs []map[string]any) error {
		for _, r := range reqs {
			if k, ok := r["keyPath"].(string); ok {
				if !path.IsAbs(k) || path.Clean(k) != k {
					return fmt.Errorf("policy: keyPath %q is not a clean absolute path", k)
				}
				set[k] = true
			}
		}
		return nil
	}
	if err := add(pol.Default); err != nil {
		return nil, err
	}
	for _, scopes := range pol.Transports {
		for _, reqs := range scopes {
			if err := add(reqs); err != nil {
				return nil, err
			}
		}
	}
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out, nil
}

// plainFile is an Ignition file of content, replacing what is there.
func plainFile(p string, mode int, content string) types.File {
	f := types.File{Node: types.Node{Path: p, Overwrite: new(true)}}
	f.Mode = new(mode)
	f.Contents = contents([]byte(content), false)
	return f
}
