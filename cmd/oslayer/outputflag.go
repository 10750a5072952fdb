package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/oslayer/oslayer/internal/registry"
)

// The naming convention (README, "Flag names"): -o/--output is the output
// format, text or json, as in kubectl and cosign; a flag that names where
// something is written says what it is: --output-dir DIR, --digest-file F,
// and the image target --push REF, which takes a registry reference or an
// OCI layout oci:DIR[:TAG] like podman push does.

// outputFlag is the value of -o/--output. Until the next release a value
// that is not a format is the destination older versions took with
// --output (render's and trust's directory, build's oci:DIR target): it is
// kept in legacy and moved to the command's destination flag, with a
// deprecation warning.
type outputFlag struct {
	format string
	legacy []string
}

func (o *outputFlag) String() string { return o.format }
func (o *outputFlag) Type() string   { return "text|json" }
func (o *outputFlag) Set(v string) error {
	if v == "text" || v == "json" {
		o.format = v
		return nil
	}
	o.legacy = append(o.legacy, v)
	return nil
}

// legacyOutput is the command annotation naming the flag a destination
// given with --output moves to.
const legacyOutput = "oslayer/legacy-output"

// withLegacyOutput marks cmd as one whose destination older versions took
// with --output; the value now goes to the flag named dest.
func withLegacyOutput(cmd *cobra.Command, dest string) *cobra.Command {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[legacyOutput] = dest
	return cmd
}

// applyLegacyOutput moves a destination given with --output to the flag
// the command now names it with, and warns on w; it fails when the value
// is no format and the command has no such destination.
func applyLegacyOutput(cmd *cobra.Command, o *outputFlag, w io.Writer) error {
	if len(o.legacy) == 0 {
		return nil
	}
	v := o.legacy[0]
	dest := cmd.Annotations[legacyOutput]
	// build wrote only OCI layouts with --output; a registry was --push.
	// With the destination flag given too, the value can only be a format.
	if dest == "" || len(o.legacy) > 1 || cmd.Flags().Changed(dest) || (dest == "push" && !registry.IsLayout(v)) {
		return fmt.Errorf("-o/--output %q: want text or json (the output format)", v)
	}
	if err := cmd.Flags().Set(dest, v); err != nil {
		return err
	}
	warn(w, "--output %s is deprecated for a destination and will be removed in the next release: use --%s %s (-o/--output is the output format: text or json)", v, dest, v)
	return nil
}

// warn prints one warning in the human format: "warning: ...".
func warn(w io.Writer, format string, args ...any) {
	fmt.Fprintf(w, "warning: "+format+"\n", args...)
}
