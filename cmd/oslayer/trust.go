package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/oslayer/oslayer/internal/inputfile"
	"github.com/oslayer/oslayer/sign"
)

// trustCmd is `oslayer trust`: its flags, and the files it writes.
type trustCmd struct {
	g                          *globals
	key, repo, out, basePolicy string
	o                          sign.TrustOptions
}

func newTrustCmd(g *globals) *cobra.Command {
	c := &trustCmd{g: g}
	cmd := &cobra.Command{
		Use: "trust --key cosign.pub --repo REG/REPO --output-dir DIR",
		Example: `  # Node trust files for a repository, plus ready oslayer inputs
  oslayer trust --key keys/cosign.pub --repo registry.example.com/os/worker --output-dir trust/ \
      --accept-image registry.k8s.io/pause:3.10

  # Keep an existing policy (e.g. RHCOS's GPG entries) and add the repository to it
  oslayer trust --key keys/cosign.pub --repo registry.example.com/os/worker \
      --base-policy /etc/containers/policy.json --output-dir trust/`,
		Short: "Write the node trust policy that enforces the image signature (policy.json, registries.d, key, as OSC and MachineConfig too)",
		Long: `trust writes what a node needs to accept only images of REG/REPO signed by
the key, for "rpm-ostree rebase ostree-image-signed:docker://REG/REPO@sha256:...":

  policy.json                  full /etc/containers/policy.json: sigstoreSigned
                               (keyPath, matchRepository) for REG/REPO,
                               insecureAcceptAnything for the repository of
                               each --accept-image, default reject, the rest
                               as in --base-policy (default: Fedora CoreOS's)
  policy-fragment.json         only the REG/REPO entry, to merge into an
                               existing policy
  registries.d/oslayer-*.yaml  use-sigstore-attachments: true for REG/REPO
  oslayer-HASH.pub             the public key (/etc/pki/containers/...)
  trust-osc.yaml               the three node files as an OperatingSystemConfig
  99-oslayer-trust.yaml        the three node files as a MachineConfig
                               (Ignition 3.4)

The default rejects: rpm-ostree and bootc (ostree-rs-ext) refuse
ostree-image-signed under a default of insecureAcceptAnything, whatever
REG/REPO's entry says; a --base-policy default that accepts anything
becomes reject. Name every image the node still pulls through
containers/image (skopeo, podman, CRI-O) with --accept-image: kubelet's
pause image, the node agent's, the images the node configuration names.

Feed trust-osc.yaml (--osc) or 99-oslayer-trust.yaml (--machineconfig) to
"oslayer build" so the first image already carries the key and policy.

With --cluster-image-policy it also writes clusterimagepolicy.yaml, an
OpenShift ClusterImagePolicy (config.openshift.io/v1) for REG/REPO and the
key. On OpenShift the Machine Config Operator owns policy.json and
generates it from these objects: apply that (oc apply -f) instead of baking
policy.json into the pool image.`,
		Args: cobra.NoArgs,
		RunE: c.run,
	}
	fs := cmd.Flags()
	fs.StringVar(&c.key, "key", "", "cosign public key (cosign.pub)")
	fs.StringVar(&c.repo, "repo", "", "repository the pool images are pushed to: REG/REPO")
	fs.StringVar(&c.out, "output-dir", "", "directory to write the files to")
	fs.StringVar(&c.o.NodeKeyPath, "node-key-path", "", "where the public key lives on the node (default /etc/pki/containers/oslayer-HASH.pub)")
	fs.StringVar(&c.o.Pool, "pool", "worker", "MachineConfig role label (machineconfiguration.openshift.io/role)")
	fs.StringVar(&c.basePolicy, "base-policy", "", "the nodes' current policy.json to add REG/REPO to (default: the stock Fedora CoreOS policy); a default that accepts anything becomes reject")
	fs.StringArrayVar(&c.o.AcceptImages, "accept-image", nil, "an image the node pulls unsigned (pause image, node agent, ...): its repository is accepted without a signature (repeatable; everything else not REG/REPO is rejected)")
	fs.BoolVar(&c.o.ClusterImagePolicy, "cluster-image-policy", false, "also write clusterimagepolicy.yaml, an OpenShift ClusterImagePolicy (config.openshift.io/v1) for REG/REPO and the key")
	fs.StringVar(&c.o.OSCType, "osc-type", "coreos", "OperatingSystemConfig spec.type")
	return cmd
}

// run writes the trust files for the key and repository into the output
// directory and lists them. Bad input exits 2 and writes nothing.
func (c *trustCmd) run(cmd *cobra.Command, _ []string) error {
	if c.key == "" || c.repo == "" || c.out == "" {
		return &exitError{code: 2, err: errors.New("trust: --key, --repo and --output-dir are required")}
	}
	pub, err := inputfile.Read(c.key)
	if err != nil {
		return &exitError{code: 2, err: fmt.Errorf("trust: --key: %w", err)}
	}
	if c.basePolicy != "" {
		if c.o.BasePolicy, err = inputfile.Read(c.basePolicy); err != nil {
			return &exitError{code: 2, err: fmt.Errorf("trust: --base-policy: %w", err)}
		}
	}
	b, err := sign.Trust(c.repo, pub, c.o)
	if err != nil { // every error of Trust is one of its inputs
		return &exitError{code: 2, err: fmt.Errorf("trust: %w", err)}
	}
	for _, f := range b.Files {
		p := filepath.Join(c.out, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("trust: --output-dir %s: %w", c.out, err)
		}
		if err := writeKeyFile(p, f.Content, os.FileMode(f.Mode)); err != nil {
			return fmt.Errorf("trust: %w", err)
		}
	}
	return c.print(cmd.OutOrStdout(), b)
}

// print writes the bundle as JSON (-o json) or lists its files, with
// where each goes on the node.
func (c *trustCmd) print(w io.Writer, b *sign.TrustBundle) error {
	if c.g.json() {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(b)
	}
	for _, f := range b.Files {
		if f.NodePath != "" {
			fmt.Fprintf(w, "%s\t(node: %s)\n", filepath.Join(c.out, f.Path), f.NodePath)
		} else {
			fmt.Fprintf(w, "%s\n", filepath.Join(c.out, f.Path))
		}
	}
	return nil
}
