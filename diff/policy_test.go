package diff

import (
	"strings"
	"testing"

	opv1 "github.com/openshift/api/operator/v1"
)

// A cluster policy for a default path replaces it where it stands, others
// are appended, an SSH key policy replaces the default
// (apihelpers.MergeClusterPolicies).
func TestParsePolicyMerges(t *testing.T) {
	p, err := ParsePolicy("cluster.yaml", []byte(`apiVersion: operator.openshift.io/v1
kind: MachineConfiguration
metadata:
  name: cluster
spec:
  nodeDisruptionPolicy:
    files:
    - path: /etc/containers/policy.json
      actions: [{type: Restart, restart: {serviceName: crio.service}}]
    - path: /etc/chrony.conf
      actions: [{type: Restart, restart: {serviceName: chronyd.service}}]
    units:
    - name: chronyd.service
      actions: [{type: None}]
    sshkey:
      actions: [{type: Drain}]
`))
	if err != nil {
		t.Fatal(err)
	}
	def := DefaultPolicies()
	i := indexFile(def.Files, pathPolicyJSON)
	if got := actionNames(p.Files[i].Actions); len(got) != 1 || got[0] != "Restart crio.service" {
		t.Errorf("policy.json at %d: %v", i, got)
	}
	if len(p.Files) != len(def.Files)+1 || p.Files[len(p.Files)-1].Path != "/etc/chrony.conf" {
		t.Errorf("files %v", p.Files)
	}
	if len(p.Units) != 2 || p.SSHKey.Actions[0].Type != opv1.DrainStatusAction {
		t.Errorf("units %v, ssh %v", p.Units, p.SSHKey)
	}
}

// Anything but a MachineConfiguration is refused, naming the file.
func TestParsePolicyRefuses(t *testing.T) {
	for _, c := range []struct{ doc, want string }{
		{"apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\n", `kind "MachineConfig"`},
		{"apiVersion: operator.openshift.io/v1\nkind: MachineConfiguration\nspec:\n  nodeDisruptionPolicy:\n    file: []\n", `unknown field "file"`},
		{"apiVersion: operator.openshift.io/v1\nkind: MachineConfiguration\nspec:\n  nodeDisruptionPolicy:\n    files: [{path: etc/x, actions: [{type: None}]}]\n", "not absolute"},
		{"[", "cluster.yaml"},
	} {
		_, err := ParsePolicy("cluster.yaml", []byte(c.doc))
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "cluster.yaml") {
			t.Errorf("%q: %v, want an error naming cluster.yaml with %q", c.doc, err, c.want)
		}
	}
}
