package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/oslayer/oslayer/internal/inputfile"
	"github.com/oslayer/oslayer/sign"
)

func newTrustCmd(g *globals) *cobra.Command {
	var key, repo, out, basePolicy string
	var o sign.TrustOptions
	cmd := &cobra.Command{
		Use: "trust --key cosign.pub --repo REG/REPO --output-dir DIR",
		Example: `  # Node trust files for a repository, plus ready oslayer inputs
  oslayer trust --key keys/cosign.pub --repo registry.example.com/os/worker --output-dir trust/

  # Keep an existing policy (e.g. RHCOS's GPG entries) and add the repository to it
  oslayer trust --key keys/cosign.pub --repo registry.example.com/os/worker \
      --base-policy /etc/containers/policy.json --output-dir trust/`,
		Short: "Write the node trust policy that enforces the image signature (policy.json, registries.d, key, as OSC and MachineConfig too)",
		Long: `trust writes what a node needs to accept only images of REG/REPO signed by
the key, for "rpm-ostree rebase ostree-image-signed:docker://REG/REPO@sha256:...":

  policy.json                  full /etc/containers/policy.json: sigstoreSigned
                               (keyPath, matchRepository) for REG/REPO,
                               everything else as in --base-policy (default:
                               insecureAcceptAnything, as on Fedora CoreOS)
  policy-fragment.json         only the REG/REPO entry, to merge into an
                               existing policy
  registries.d/oslayer-*.yaml  use-sigstore-attachments: true for REG/REPO
  oslayer-HASH.pub             the public key (/etc/pki/containers/...)
  trust-osc.yaml               the three node files as an OperatingSystemConfig
  99-oslayer-trust.yaml        the three node files as a MachineConfig
                               (Ignition 3.4)

Feed trust-osc.yaml (--osc) or 99-oslayer-trust.yaml (--machineconfig) to
"oslayer build" so the first image already carries the key and policy.

With --cluster-image-policy it also writes clusterimagepolicy.yaml, an
OpenShift ClusterImagePolicy (config.openshift.io/v1) for REG/REPO and the
key. On OpenShift the Machine Config Operator owns policy.json and
generates it from these objects: apply that (oc apply -f) instead of baking
policy.json into the pool image.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if key == "" || repo == "" || out == "" {
				return errors.New("trust: --key, --repo and --output-dir are required")
			}
			pub, err := inputfile.Read(key)
			if err != nil {
				return fmt.Errorf("trust: --key: %w", err)
			}
			if basePolicy != "" {
				if o.BasePolicy, err = inputfile.Read(basePolicy); err != nil {
					return fmt.Errorf("trust: --base-policy: %w", err)
				}
			}
			b, err := sign.Trust(repo, pub, o)
			if err != nil {
				return fmt.Errorf("trust: %w", err)
			}
			for _, f := range b.Files {
				p := filepath.Join(out, filepath.FromSlash(f.Path))
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					return fmt.Errorf("trust: --output-dir %s: %w", out, err)
				}
				if err := writeKeyFile(p, f.Content, os.FileMode(f.Mode)); err != nil {
					return fmt.Errorf("trust: %w", err)
				}
			}
			if g.json() {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(b)
			}
			for _, f := range b.Files {
				if f.NodePath != "" {
					fmt.Fprintf(cmd.OutOrStdout(), "%s\t(node: %s)\n", filepath.Join(out, f.Path), f.NodePath)
				} else {
					fmt.Fprintf(cmd.OutOrStdout(), "%s\n", filepath.Join(out, f.Path))
				}
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&key, "key", "", "cosign public key (cosign.pub)")
	fs.StringVar(&repo, "repo", "", "repository the pool images are pushed to: REG/REPO")
	fs.StringVar(&out, "output-dir", "", "directory to write the files to")
	fs.StringVar(&o.NodeKeyPath, "node-key-path", "", "where the public key lives on the node (default /etc/pki/containers/oslayer-HASH.pub)")
	fs.StringVar(&o.Pool, "pool", "worker", "MachineConfig role label (machineconfiguration.openshift.io/role)")
	fs.StringVar(&basePolicy, "base-policy", "", "the nodes' current policy.json to add REG/REPO to (default: the stock Fedora CoreOS policy, accept anything else)")
	fs.BoolVar(&o.ClusterImagePolicy, "cluster-image-policy", false, "also write clusterimagepolicy.yaml, an OpenShift ClusterImagePolicy (config.openshift.io/v1) for REG/REPO and the key")
	fs.StringVar(&o.OSCType, "osc-type", "coreos", "OperatingSystemConfig spec.type")
	return cmd
}
