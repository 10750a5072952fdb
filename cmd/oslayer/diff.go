package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/oslayer/oslayer/diff"
	"github.com/oslayer/oslayer/internal/inputfile"
	"github.com/oslayer/oslayer/internal/registry"
)

// diffFlags are the flags of oslayer diff.
type diffFlags struct {
	in             inputFlags
	reg            registryFlags
	index          baseIndexFlags
	oldMCs, newMCs []string
	oldOSC, newOSC []string
	base, arch     string
	policy         string
	failOn         string
	platforms      []string
	kube           kubeFlags
}

func newDiffCmd(g *globals) *cobra.Command {
	var f diffFlags
	cmd := &cobra.Command{
		Use:   "diff [OLD [NEW]] [--old-machineconfig|--old-osc FILE]... [--new-machineconfig|--new-osc FILE]...",
		Short: "Show what changes between two pool images and what the change does to the nodes (exit 0 ok, 1 --fail-on reached, 2 bad input)",
		Long: `diff compares two pool images, or two input sets rendered on the same base,
and shows every node path added, changed or removed (content, mode, owner,
link target, unit enablement and masks) with the document and field that put
it there on each side, the kernel arguments, the base and its OS version, the
package stage, the bytes a node on OLD downloads to get NEW, and the action
each platform takes:

  openshift        the machine-config daemon applying the same rendered-config
                   change in place, under the default NodeDisruptionPolicy or
                   the cluster's (--node-disruption-policy)
  openshift-image  the change delivered as a new osImageURL (always a reboot)
  bootc            soft-reboot when kernel, initramfs, kernel arguments and
                   SELinux policy are unchanged, else reboot
  gardener         gardener-node-agent: files rewritten, units restarted; a
                   base change needs an OS update

Actions, least disruptive first: none, reload, restart, drain, soft-reboot,
reboot.

OLD and NEW are image references oslayer prints (a registry reference or
oci:DIR[:TAG], by tag or digest), or entries of a PoolImage's build history
read from the cluster (--kubeconfig): poolimage:NAMESPACE/NAME@N is
status.builds[N] (0 the newest; oslayer history lists them),
poolimage:NAMESPACE/NAME@published the image spec.publish hands on.
Without NEW, the new side is the input set of --new-machineconfig/--new-osc;
without OLD either, the old side is --old-machineconfig/--old-osc. --machineconfig and --osc add inputs to both
input sets. No base layer is read: an image's manifest, labels and metadata
layer (the ownership manifest) are enough.

When NEW is a multi-platform index and no --arch is given, every
architecture of NEW that OLD has (OLD an index, or one image of that
architecture) is compared; the result shown, and gated by --fail-on, is
that of the architecture with the most disruptive action (the first of
the index on a tie), and a warning lists each architecture's action and
those NEW alone has. --arch compares that one architecture.

SSH keys and FIPS are not in an image (they are delivered at runtime): only
input sets show their changes.

Exit codes: 0 done (the action is below --fail-on), 1 the predicted action
is at least --fail-on, 2 bad input (a reference that does not resolve, a
history index the PoolImage does not have, OLD and NEW of different pools
or architectures, a policy file that is not a MachineConfiguration);
nothing is written.`,
		Example: `  # Two builds of a pool
  oslayer diff registry.example.com/os/worker@sha256:1111... registry.example.com/os/worker:latest

  # A MachineConfig change, before it is merged, gated in CI
  oslayer diff --machineconfig mcs/ --pool worker \
      --old-machineconfig old/99-worker-ssh.yaml --new-machineconfig new/99-worker-ssh.yaml \
      --node-disruption-policy machineconfiguration-cluster.yaml --platform openshift --fail-on drain

  # The last change of a PoolImage, read from the cluster
  oslayer diff poolimage:openshift-oslayer/worker@1 poolimage:openshift-oslayer/worker@0

  # What the running image becomes with new inputs
  oslayer diff oci:out/worker:latest --new-osc osc-worker.yaml -o json`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 2 {
				return &exitError{code: 2, err: fmt.Errorf("diff: want at most OLD and NEW, got %d arguments", len(args))}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			res, err := f.run(cmd, g, args)
			if err != nil {
				return &exitError{code: 2, err: fmt.Errorf("diff: %w", err)}
			}
			return f.report(cmd, g, res)
		},
	}
	f.register(cmd.Flags())
	return cmd
}

// register adds diff's flags: the render inputs and registry and base
// index flags of render, and its own.
func (f *diffFlags) register(fs *pflag.FlagSet) {
	f.in.register(fs)
	f.reg.registerReads(fs)
	f.index.register(fs)
	fs.StringArrayVar(&f.oldMCs, "old-machineconfig", nil, "MachineConfig file or directory of the old input set (repeatable)")
	fs.StringArrayVar(&f.newMCs, "new-machineconfig", nil, "MachineConfig file or directory of the new input set (repeatable)")
	fs.StringArrayVar(&f.oldOSC, "old-osc", nil, "OperatingSystemConfig of the old input set (repeatable)")
	fs.StringArrayVar(&f.newOSC, "new-osc", nil, "OperatingSystemConfig of the new input set (repeatable)")
	fs.StringVar(&f.base, "base", "", "base both input sets are rendered on (registry reference or oci:DIR[:TAG], read through the base index)")
	fs.StringVar(&f.arch, "arch", "", "architecture of the images and --base (default amd64; without it, two images of which NEW is a multi-platform index are compared for each architecture)")
	fs.StringVar(&f.policy, "node-disruption-policy", "", "MachineConfiguration manifest (operator.openshift.io/v1) whose spec.nodeDisruptionPolicy the cluster uses (default: the MCO's defaults)")
	fs.StringVar(&f.failOn, "fail-on", "", "exit 1 when the predicted action is at least this: none, reload, restart, drain, soft-reboot, reboot")
	f.kube.register(fs, "poolimage: arguments are read from")
	fs.StringArrayVar(&f.platforms, "platform", nil, "platform whose action --fail-on and the overall action consider: openshift, openshift-image, bootc, gardener (repeatable; default: every platform the inputs are for)")
}

// run loads both sides and compares them.
func (f *diffFlags) run(cmd *cobra.Command, g *globals, args []string) (*diff.Result, error) {
	ctx := cmd.Context()
	if f.failOn != "" {
		if _, err := diff.ParseAction(f.failOn); err != nil {
			return nil, fmt.Errorf("--fail-on: %w", err)
		}
	}
	opts, err := f.policyOptions()
	if err != nil {
		return nil, err
	}
	ro, err := f.reg.options()
	if err != nil {
		return nil, err
	}
	if args, err = f.kube.resolvePoolImageRefs(ctx, args); err != nil {
		return nil, err
	}
	if res, ok, err := f.compareArches(ctx, g, ro, args, opts); ok {
		return res, err
	}
	old, new, err := f.sides(ctx, cmd, g, ro, args)
	if err != nil {
		return nil, err
	}
	res, err := diff.Compare(old, new, opts)
	if err != nil {
		return nil, err
	}
	return res, f.selectPlatforms(res)
}

// policyOptions reads --node-disruption-policy.
func (f *diffFlags) policyOptions() (diff.Options, error) {
	if f.policy == "" {
		return diff.Options{}, nil
	}
	data, err := inputfile.Read(f.policy)
	if err != nil {
		return diff.Options{}, fmt.Errorf("--node-disruption-policy: %w", err)
	}
	p, err := diff.ParsePolicy(f.policy, data)
	if err != nil {
		return diff.Options{}, err
	}
	return diff.Options{Policies: &p, PolicyName: f.policy + " (merged with the defaults)"}, nil
}

// sides loads OLD and NEW: image arguments first, then the input sets.
func (f *diffFlags) sides(ctx context.Context, cmd *cobra.Command, g *globals, ro *registry.Options, args []string) (*diff.Side, *diff.Side, error) {
	haveOld := len(f.oldMCs)+len(f.oldOSC) > 0
	haveNew := len(f.newMCs)+len(f.newOSC) > 0
	switch {
	case len(args) == 2 && (haveOld || haveNew):
		return nil, nil, fmt.Errorf("OLD and NEW are images: --old-* and --new-* inputs do not apply")
	case len(args) == 1 && (haveOld || !haveNew):
		return nil, nil, fmt.Errorf("one image (OLD): give the new side as --new-machineconfig or --new-osc (and no --old-*)")
	case len(args) == 0 && (!haveOld || !haveNew):
		return nil, nil, fmt.Errorf("give OLD and NEW images, or both input sets (--old-machineconfig/--old-osc and --new-machineconfig/--new-osc)")
	}
	var platform *v1.Platform
	if f.arch != "" {
		platform = &v1.Platform{OS: "linux", Architecture: registry.NormalizeArch(f.arch)}
	}
	var sides [2]*diff.Side
	for i, a := range args {
		s, err := diff.LoadImage(ctx, ro, a, platform)
		if err != nil {
			return nil, nil, fmt.Errorf("%s %w", []string{"OLD", "NEW"}[i], err)
		}
		sides[i] = s
	}
	if len(args) == 2 {
		return sides[0], sides[1], nil
	}
	if len(args) == 1 && f.base == "" {
		g.warn(fmt.Sprintf("the new inputs are rendered without a base: give --base (the base of %s, %s) so that what rendering takes from the base (enablement, presets, owners) compares exactly", args[0], sides[0].BaseDigest))
	}
	return f.inputSides(ctx, cmd, g, ro, sides)
}

// inputSides renders the input sets missing from sides on the same base.
func (f *diffFlags) inputSides(ctx context.Context, cmd *cobra.Command, g *globals, ro *registry.Options, sides [2]*diff.Side) (*diff.Side, *diff.Side, error) {
	info, b, err := f.index.renderBase(ctx, f.base, f.arch, ro, g.log)
	if err != nil {
		return nil, nil, err
	}
	sets := [2]struct {
		mcs, oscs []string
	}{{f.oldMCs, f.oldOSC}, {f.newMCs, f.newOSC}}
	for i := range sides {
		if sides[i] != nil {
			continue
		}
		in := f.in
		in.stdin = cmd.InOrStdin()
		in.mcs = append(append([]string(nil), f.in.mcs...), sets[i].mcs...)
		in.oscs = append(append([]string(nil), f.in.oscs...), sets[i].oscs...)
		req, err := in.request(ro)
		if err != nil {
			return nil, nil, err
		}
		digest := ""
		if b != nil {
			req.Base, req.BaseName, digest = b.Index.FS(), fmt.Sprintf("base %s (%s)", b.Ref, b.Digest), b.Digest.String()
		}
		name := []string{"OLD", "NEW"}[i]
		given := "inputs " + strings.Join(append(append([]string(nil), in.mcs...), in.oscs...), " ")
		if sides[i], err = diff.LoadInputs(ctx, given, req, digest); err != nil {
			return nil, nil, fmt.Errorf("%s inputs: %w", name, err)
		}
	}
	if info != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "base %s @ %s: index %s from %s\n", b.Ref, b.Digest, info.Digest, info.Source)
	}
	return sides[0], sides[1], nil
}

// selectPlatforms applies --platform to the overall action.
func (f *diffFlags) selectPlatforms(res *diff.Result) error {
	if len(f.platforms) == 0 {
		return nil
	}
	res.Action = diff.None
	for _, name := range f.platforms {
		p := res.Platform(name)
		if p == nil {
			return fmt.Errorf("--platform %q: want openshift, openshift-image, bootc or gardener", name)
		}
		res.Action = diff.Max(res.Action, p.Action)
	}
	return nil
}

// report prints the result and applies --fail-on.
func (f *diffFlags) report(cmd *cobra.Command, g *globals, res *diff.Result) error {
	out := cmd.OutOrStdout()
	if g.json() {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			return err
		}
	} else {
		res.WriteText(out)
	}
	if f.failOn == "" {
		return nil
	}
	limit, _ := diff.ParseAction(f.failOn)
	if res.Action.AtLeast(limit) {
		return &exitError{code: 1, err: fmt.Errorf("diff: predicted action %s is at least --fail-on %s", res.Action, limit)}
	}
	return nil
}
