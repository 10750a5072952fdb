package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/oslayer/oslayer/prune"
)

// pruneFlags are the flags of oslayer prune.
type pruneFlags struct {
	keep          int
	grace         time.Duration
	yes           bool
	references    []string
	kubeconfig    string
	kubeContext   string
	noReferences  bool
	deleteUndated bool
	jobs          int
	reg           registryFlags
}

func newPruneCmd(g *globals) *cobra.Command {
	var f pruneFlags
	cmd := &cobra.Command{
		Use:   "prune REPO... [--keep N] [--kubeconfig FILE] [--references FILE]... [--yes]",
		Short: "Delete the pool images no one uses any more, with their signature, attestation and SBOM tags (a dry run without --yes)",
		Long: `prune keeps the last N good images of every pool (--keep) and every image
still in use, and deletes the rest of each repository (REG/REPO) or OCI
layout (oci:DIR) with its signature (.sig), attestation and SBOM (.att,
.sbom) and referrer tags; an index goes with its platform images.

In use: named by a PoolImage (status.image, status.builds, its published
ConfigMap), by the osImageURL of a MachineConfig a MachineConfigPool or a
Node still names (every MachineConfig of a --references file counts), by a
Node's layered-image annotations (machineconfiguration.openshift.io/
currentImage, desiredImage), by a BootcNode (desired, booted, staged,
rollback) or BootcNodePool, by a tag, by a kept index, or as an image's
base; images without the io.oslayer.pool label (bases, other images) are
never deleted; neither is an image younger than --grace.

References come from the cluster of --kubeconfig and from --references
files (YAML or JSON, multi-document, Lists), each a regular file of at
most 256 MiB. Ages come from the build records (the sha256-HEX.rec
artifact every build writes next to its image before anything names it,
and PoolImage status), never from the image config (reproducible images
have a fixed one); an image nothing dates is kept (nothing says it is
older than a dated one) unless --delete-undated.

Without --yes nothing is deleted: a table says what would be kept and
deleted and why. With --yes the registry is probed first (a registry that
refuses DELETE is an error before anything is deleted) and the references
and the image's build record are read again right before each image is
deleted: an image a build published again since the listing is kept.
Exit code 0: done; 1: a registry or cluster failed; 2: bad arguments or
references (nothing deleted).`,
		Example: `  # What would go (dry run), with the references of the cluster
  oslayer prune registry.example.com/os/pools --kubeconfig ~/.kube/config

  # Delete, keeping the last 3 good images of each pool
  oslayer prune registry.example.com/os/pools --kubeconfig ~/.kube/config --keep 3 --yes

  # References from files (kubectl get poolimages,nodes -A -o yaml > refs.yaml)
  oslayer prune registry.example.com/os/pools --references refs.yaml -o json`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runPrune(cmd, g, &f, args)
		},
	}
	fs := cmd.Flags()
	fs.IntVar(&f.keep, "keep", 5, "good images kept per pool (the newest), besides those in use")
	fs.DurationVar(&f.grace, "grace", time.Hour, "keep every image younger than this")
	fs.BoolVar(&f.yes, "yes", false, "delete (without it: a dry run)")
	fs.StringArrayVar(&f.references, "references", nil, "file of objects that reference images: PoolImages, MachineConfigs, MachineConfigPools, Nodes, BootcNodes (repeatable)")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "read references from this cluster")
	fs.StringVar(&f.kubeContext, "context", "", "the kubeconfig context (default: its current one)")
	fs.BoolVar(&f.noReferences, "no-references", false, "prune without any reference source (every image not tagged counts as unused)")
	fs.BoolVar(&f.deleteUndated, "delete-undated", false, "delete an image no build record dates when nothing uses it")
	fs.IntVar(&f.jobs, "jobs", 8, "parallel registry reads")
	f.reg.registerReads(fs)
	return cmd
}

// runPrune runs prune and prints the result.
func runPrune(cmd *cobra.Command, g *globals, f *pruneFlags, args []string) error {
	bad := func(err error) error { return &exitError{code: 2, err: fmt.Errorf("prune: %w", err)} }
	o, err := f.options(args)
	if err != nil {
		return bad(err)
	}
	o.Log = g.log
	res, err := prune.Run(cmd.Context(), *o)
	var ie *prune.InputError
	if errors.As(err, &ie) {
		return bad(err)
	}
	if res != nil {
		if perr := printPrune(cmd, g, res, o.Policy.Now); perr != nil {
			return perr
		}
	}
	if err != nil {
		return fmt.Errorf("prune: %w", err)
	}
	return nil
}

// options checks the flags and builds prune's options.
func (f *pruneFlags) options(args []string) (*prune.Options, error) {
	if f.keep < 0 {
		return nil, fmt.Errorf("--keep %d: want 0 or more", f.keep)
	}
	if f.grace < 0 {
		return nil, fmt.Errorf("--grace %s: want 0 or more", f.grace)
	}
	if f.jobs < 1 || f.jobs > 64 {
		return nil, fmt.Errorf("--jobs %d: want 1 to 64", f.jobs)
	}
	if f.kubeconfig == "" && len(f.references) == 0 && !f.noReferences {
		return nil, errors.New("give --kubeconfig and/or --references: without references prune cannot see which images are in use (--no-references prunes without)")
	}
	reg, err := f.reg.options()
	if err != nil {
		return nil, err
	}
	o := &prune.Options{Targets: args, Delete: f.yes, Registry: reg, Jobs: f.jobs,
		Policy: prune.Policy{Keep: f.keep, Grace: f.grace, DeleteUndated: f.deleteUndated, Now: time.Now()}}
	if f.kubeconfig != "" {
		dc, err := dynamicClient(f.kubeconfig, f.kubeContext)
		if err != nil {
			return nil, err
		}
		o.Sources = append(o.Sources, prune.Cluster(dc))
	}
	for _, p := range f.references {
		o.Sources = append(o.Sources, prune.File(p))
	}
	return o, nil
}

// dynamicClient is a client of the kubeconfig's cluster.
func dynamicClient(path, context string) (dynamic.Interface, error) {
	rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: path}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig %s: %w", path, err)
	}
	return dynamic.NewForConfig(cfg)
}

// printPrune writes the table or the JSON result.
func printPrune(cmd *cobra.Command, g *globals, res *prune.Result, now time.Time) error {
	if g.json() {
		enc := json.NewEncoder(cmd.OutOrStdout())
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	return prune.WriteTable(cmd.OutOrStdout(), res, now, "--yes deletes them")
}
