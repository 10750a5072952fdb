package main

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/oslayer/oslayer/pipeline"
	"github.com/oslayer/oslayer/preflight"
)

// preflightFlags are the preflight options shared by preflight and build.
// (--base and --arch belong to each command: build has its own base.)
type preflightFlags struct {
	requireBase   string
	expectVersion string
	skip          []string
	fatalWarnings bool
	denyUsr       bool
	allowSecrets  []string
	maxAdded      string
	warnLayers    int
	maxLayers     int
}

func (f *preflightFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.requireBase, "require-base", "", "official base image whose layers (digest and diff_id) must be an ordered prefix of the image")
	fs.StringVar(&f.expectVersion, "expect-version", "", "OS version the image must have (org.opencontainers.image.version or version label; \"9.6\" matches \"9.6.2025...\")")
	fs.StringArrayVar(&f.skip, "skip", nil, "skip a preflight check by name (repeatable): "+strings.Join(checkNames(), ", "))
	fs.BoolVar(&f.fatalWarnings, "fatal-warnings", false, "treat preflight warnings as errors")
	fs.BoolVar(&f.denyUsr, "deny-usr-override", false, "an added file that replaces a file of the base under /usr is an error (check usr-override; it reads the base index)")
	fs.StringArrayVar(&f.allowSecrets, "allow-secret", nil, "path (or glob) allowed to hold a secret, as on the node or in the image, e.g. /etc/pki/tls/private/*.key, /var/lib/kubelet/config.json (repeatable)")
	fs.IntVar(&f.warnLayers, "warn-layers", preflight.DefaultWarnLayers, "warn when the image has more layers than this (docker pull fails at 128)")
	fs.IntVar(&f.maxLayers, "max-layers", preflight.DefaultMaxLayers, "fail when the image has this many layers or more (containers-storage cannot store about 500)")
	fs.StringVar(&f.maxAdded, "max-added-bytes", "2GiB", "budget for the compressed size of the added layers (bytes, or with KB/MB/GB/KiB/MiB/GiB)")
}

func checkNames() []string {
	var out []string
	for _, c := range preflight.Default() {
		out = append(out, c.Name())
	}
	return out
}

// options validates the flags into preflight options.
func (f *preflightFlags) options(g *globals) (preflight.Options, error) {
	n, err := preflight.ParseBytes(f.maxAdded)
	if err != nil {
		return preflight.Options{}, fmt.Errorf("--max-added-bytes %q: %v", f.maxAdded, err)
	}
	if f.warnLayers <= 0 || f.maxLayers <= 0 {
		return preflight.Options{}, fmt.Errorf("--warn-layers %d, --max-layers %d: want positive layer counts", f.warnLayers, f.maxLayers)
	}
	if f.warnLayers >= f.maxLayers {
		return preflight.Options{}, fmt.Errorf("--warn-layers %d must be below --max-layers %d", f.warnLayers, f.maxLayers)
	}
	for _, s := range f.skip {
		if err := preflight.CheckKnown(s, nil); err != nil {
			return preflight.Options{}, fmt.Errorf("--skip %w", err)
		}
	}
	return preflight.Options{
		Skip:            f.skip,
		ExpectVersion:   f.expectVersion,
		FatalWarnings:   f.fatalWarnings,
		DenyUsrOverride: f.denyUsr,
		AllowSecrets:    f.allowSecrets,
		MaxAddedBytes:   n,
		WarnLayers:      f.warnLayers,
		MaxLayers:       f.maxLayers,
		Log:             g.log,
	}, nil
}

// spec maps the flags onto the build specification's preflight
// options.
func (f *preflightFlags) spec(g *globals) (pipeline.Preflight, error) {
	o, err := f.options(g)
	if err != nil {
		return pipeline.Preflight{}, err
	}
	return pipeline.Preflight{
		Skip: o.Skip, ExpectVersion: o.ExpectVersion, FatalWarnings: o.FatalWarnings, DenyUsrOverride: o.DenyUsrOverride,
		RequireBase: f.requireBase, AllowSecrets: o.AllowSecrets, MaxAddedBytes: o.MaxAddedBytes,
		WarnLayers: o.WarnLayers, MaxLayers: o.MaxLayers,
	}, nil
}
