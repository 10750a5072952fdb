package main

import "errors"

// The naming convention (docs/cli.md, "Flag names"): -o/--output is the
// output format, text or json, as in kubectl and cosign; a flag that names
// where something is written says what it is: --output-dir DIR,
// --digest-file F, and the image target --push REF, which takes a registry
// reference or an OCI layout oci:DIR[:TAG] like podman push does.

// outputFlag is the value of -o/--output: text or json, nothing else (a
// destination given with --output is an error, never a directory named
// after it).
type outputFlag struct {
	format string
}

func (o *outputFlag) String() string { return o.format }
func (o *outputFlag) Type() string   { return "text|json" }
func (o *outputFlag) Set(v string) error {
	if v != "text" && v != "json" {
		return errors.New("want text or json (the output format; destinations are --output-dir and --push)")
	}
	o.format = v
	return nil
}
