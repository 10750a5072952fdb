package diff

import (
	"fmt"
	"path/filepath"
	"strings"

	opv1 "github.com/openshift/api/operator/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

func reload(svc string) opv1.NodeDisruptionPolicyStatusAction {
	return opv1.NodeDisruptionPolicyStatusAction{Type: opv1.ReloadStatusAction, Reload: &opv1.ReloadService{ServiceName: opv1.NodeDisruptionPolicyServiceName(svc)}}
}

func restart(svc string) opv1.NodeDisruptionPolicyStatusAction {
	return opv1.NodeDisruptionPolicyStatusAction{Type: opv1.RestartStatusAction, Restart: &opv1.RestartService{ServiceName: opv1.NodeDisruptionPolicyServiceName(svc)}}
}

func only(t opv1.NodeDisruptionPolicyStatusActionType) []opv1.NodeDisruptionPolicyStatusAction {
	return []opv1.NodeDisruptionPolicyStatusAction{{Type: t}}
}

func filePolicy(path string, actions ...opv1.NodeDisruptionPolicyStatusAction) opv1.NodeDisruptionPolicyStatusFile {
	return opv1.NodeDisruptionPolicyStatusFile{Path: path, Actions: actions}
}

// DefaultPolicies are the MCO's default cluster policies
// (openshift/machine-config-operator @ 7ff337a4ffac, pkg/apihelpers/apihelpers.go
// defaultClusterPolicies), in their order.
func DefaultPolicies() opv1.NodeDisruptionPolicyClusterStatus {
	none := opv1.NodeDisruptionPolicyStatusAction{Type: opv1.NoneStatusAction}
	crio := reload("crio.service")
	return opv1.NodeDisruptionPolicyClusterStatus{
		Files: []opv1.NodeDisruptionPolicyStatusFile{
			filePolicy(pathKubeletAuth, none),
			filePolicy(pathGPGNoReboot, crio),
			filePolicy(pathPolicyJSON, crio),
			filePolicy(pathRegistriesConf, opv1.NodeDisruptionPolicyStatusAction{Type: opv1.SpecialStatusAction}),
			filePolicy(pathSigstoreRegistriesD, crio),
			filePolicy(pathCrioPolicies, crio),
			filePolicy(pathNMStateOpenShift, none),
			filePolicy(pathUserCABundle, restart(unitUpdateCATrust), restart("crio.service")),
			filePolicy(pathCredProviders, restart("kubelet.service")),
			filePolicy(pathCrioCredProvider, opv1.NodeDisruptionPolicyStatusAction{Type: opv1.DaemonReloadStatusAction}, restart("kubelet.service")),
			filePolicy(pathIRIRegistryConfig, restart(unitIRIRegistry)),
			filePolicy(pathIRILoadImageScript, restart(unitIRIRegistry)),
			filePolicy(pathIRIRootCA, restart(unitUpdateCATrust)),
		},
		Units: []opv1.NodeDisruptionPolicyStatusUnit{{
			Name:    unitIRIRegistry,
			Actions: []opv1.NodeDisruptionPolicyStatusAction{{Type: opv1.DaemonReloadStatusAction}, restart(unitIRIRegistry)},
		}},
		SSHKey: opv1.NodeDisruptionPolicyStatusSSHKey{Actions: []opv1.NodeDisruptionPolicyStatusAction{none}},
	}
}

// MergePolicies is apihelpers.MergeClusterPolicies: the defaults with a
// cluster's spec.nodeDisruptionPolicy; a user policy for a default path or
// unit replaces it in place, others are appended; a user SSH key policy
// replaces the default.
func MergePolicies(user opv1.NodeDisruptionPolicyConfig) opv1.NodeDisruptionPolicyClusterStatus {
	def := DefaultPolicies()
	merged := opv1.NodeDisruptionPolicyClusterStatus{Files: append([]opv1.NodeDisruptionPolicyStatusFile(nil), def.Files...)}
	for _, uf := range user.Files {
		sf := opv1.NodeDisruptionPolicyStatusFile{Path: uf.Path, Actions: statusActions(uf.Actions)}
		if i := indexFile(def.Files, uf.Path); i >= 0 {
			merged.Files[i] = sf
		} else {
			merged.Files = append(merged.Files, sf)
		}
	}
	merged.Units = append(merged.Units, def.Units...)
	for _, uu := range user.Units {
		su := opv1.NodeDisruptionPolicyStatusUnit{Name: uu.Name, Actions: statusActions(uu.Actions)}
		if i := indexUnit(def.Units, string(uu.Name)); i >= 0 {
			merged.Units[i] = su
		} else {
			merged.Units = append(merged.Units, su)
		}
	}
	merged.SSHKey = def.SSHKey
	if len(user.SSHKey.Actions) > 0 {
		merged.SSHKey = opv1.NodeDisruptionPolicyStatusSSHKey{Actions: statusActions(user.SSHKey.Actions)}
	}
	return merged
}

func indexFile(fs []opv1.NodeDisruptionPolicyStatusFile, path string) int {
	for i, f := range fs {
		if f.Path == path {
			return i
		}
	}
	return -1
}

func indexUnit(us []opv1.NodeDisruptionPolicyStatusUnit, name string) int {
	for i, u := range us {
		if string(u.Name) == name {
			return i
		}
	}
	return -1
}

// statusActions converts spec actions as convertSpecActiontoStatusAction
// does.
func statusActions(in []opv1.NodeDisruptionPolicySpecAction) []opv1.NodeDisruptionPolicyStatusAction {
	out := []opv1.NodeDisruptionPolicyStatusAction{}
	for _, a := range in {
		s := opv1.NodeDisruptionPolicyStatusAction{Type: opv1.NodeDisruptionPolicyStatusActionType(a.Type)}
		if a.Reload != nil {
			s.Reload = &opv1.ReloadService{ServiceName: a.Reload.ServiceName}
		}
		if a.Restart != nil {
			s.Restart = &opv1.RestartService{ServiceName: a.Restart.ServiceName}
		}
		out = append(out, s)
	}
	return out
}

// ParsePolicy reads a MachineConfiguration manifest (operator.openshift.io/v1)
// and returns its spec.nodeDisruptionPolicy merged with the defaults. name
// names the input in errors.
func ParsePolicy(name string, data []byte) (opv1.NodeDisruptionPolicyClusterStatus, error) {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(data, &tm); err != nil {
		return opv1.NodeDisruptionPolicyClusterStatus{}, fmt.Errorf("node disruption policy %s: %w", name, err)
	}
	if tm.Kind != "MachineConfiguration" || !strings.HasPrefix(tm.APIVersion, "operator.openshift.io/") {
		return opv1.NodeDisruptionPolicyClusterStatus{}, fmt.Errorf("node disruption policy %s: kind %q apiVersion %q: want a MachineConfiguration (operator.openshift.io/v1)", name, tm.Kind, tm.APIVersion)
	}
	var mc opv1.MachineConfiguration
	if err := yaml.UnmarshalStrict(data, &mc); err != nil {
		return opv1.NodeDisruptionPolicyClusterStatus{}, fmt.Errorf("node disruption policy %s: %w", name, err)
	}
	for _, f := range mc.Spec.NodeDisruptionPolicy.Files {
		if !filepath.IsAbs(f.Path) {
			return opv1.NodeDisruptionPolicyClusterStatus{}, fmt.Errorf("node disruption policy %s: spec.nodeDisruptionPolicy.files: path %q is not absolute", name, f.Path)
		}
	}
	return MergePolicies(mc.Spec.NodeDisruptionPolicy), nil
}

// ClosestFilePolicy is FindClosestFilePolicyPathMatch
// (pkg/controller/common/helpers.go): the policy whose path is the diff
// path or its longest parent directory.
func ClosestFilePolicy(path string, policies []opv1.NodeDisruptionPolicyStatusFile) (bool, string, []opv1.NodeDisruptionPolicyStatusAction) {
	found, length, match := false, 0, ""
	actions := []opv1.NodeDisruptionPolicyStatusAction{}
	for _, p := range policies {
		if path == p.Path || strings.HasPrefix(filepath.Clean(path), filepath.Clean(p.Path)+"/") {
			if len(p.Path) > length {
				found, length, match, actions = true, len(p.Path), p.Path, p.Actions
			}
		}
	}
	return found, match, actions
}
