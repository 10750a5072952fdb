package pipeline

import (
	"strconv"
	"strings"

	"github.com/oslayer/oslayer/assemble"
	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/pipeline/settings"
	"github.com/oslayer/oslayer/preflight"
)

// Groups of Flags: the commands that take them register a group.
const (
	FlagsInputs    = "inputs"    // render and build
	FlagsIndex     = "index"     // render, diff and build
	FlagsPreflight = "preflight" // preflight and build
	FlagsPush      = "push"      // build
)

// Flag is one command-line flag of a field of settings.Settings.
type Flag struct {
	// Name is the flag's name (--Name); Field the field's JSON path
	// (preflight.maxLayers), as errors name it.
	Name, Field string
	// Group says which commands take it.
	Group string
	// Help is the flag's usage; Default its default as --help shows it
	// ("" for none), set on the field before the command line is read.
	Help, Default string
	// Repeatable says a list flag is given once per element.
	Repeatable bool
	// Value is the field in s, allocating its parent: a *string,
	// **bool, *[]string or *int32.
	Value func(s *settings.Settings) any
}

// Flags are the flags of the build settings: oslayer build, render,
// diff and preflight register theirs from this table, so a setting's
// flag name, field, help and default are declared once.
var Flags = []Flag{
	{Name: "bake-secrets", Field: "bakeSecrets", Group: FlagsInputs,
		Help:  "bake secretRef content and the credentials a MachineConfig holds (the pull secret) into the image (default: report them as runtime-delivered; --allow-secret PATH bakes one MachineConfig credential)",
		Value: func(s *settings.Settings) any { return &s.BakeSecrets }},
	{Name: "strict", Field: "strict", Group: FlagsInputs,
		Help:  "refuse OperatingSystemConfig fields the OSC API does not have (default: ignore them with a warning, as gardener-node-agent does)",
		Value: func(s *settings.Settings) any { return &s.Strict }},
	{Name: "allow-toplevel", Field: "allowTopLevel", Group: FlagsInputs, Repeatable: true,
		Help:  "allow content under this extra top-level directory (survives only on composefs bases; repeatable)",
		Value: func(s *settings.Settings) any { return &s.AllowTopLevel }},
	{Name: "request-jobs", Field: "requestJobs", Group: FlagsPush, Default: strconv.Itoa(registry.DefaultRequests),
		Help:  "parallel blob requests per image (mounts, checks, uploads, reads of the base for its index; at least --jobs): across a WAN each costs a round trip",
		Value: func(s *settings.Settings) any { return &s.RequestJobs }},
	{Name: "base-index", Field: "baseIndex", Group: FlagsIndex, Default: assemble.BaseIndexAuto,
		Help:  "auto: read the base once per digest (cached on disk and next to the image) so units the OS ships are enabled as their [Install] says; off: never read the base and assume what the report says",
		Value: func(s *settings.Settings) any { return &s.BaseIndex }},
	{Name: "require-base", Field: "preflight.requireBase", Group: FlagsPreflight,
		Help:  "official base image whose layers (digest and diff_id) must be an ordered prefix of the image",
		Value: func(s *settings.Settings) any { return &pf(s).RequireBase }},
	{Name: "expect-version", Field: "preflight.expectVersion", Group: FlagsPreflight,
		Help:  "OS version the image must have (org.opencontainers.image.version or version label; \"9.6\" matches \"9.6.2025...\")",
		Value: func(s *settings.Settings) any { return &pf(s).ExpectVersion }},
	{Name: "skip", Field: "preflight.skip", Group: FlagsPreflight, Repeatable: true,
		Help:  "skip a preflight check by name (repeatable): " + strings.Join(checkNames(), ", "),
		Value: func(s *settings.Settings) any { return &pf(s).Skip }},
	{Name: "fatal-warnings", Field: "preflight.fatalWarnings", Group: FlagsPreflight,
		Help:  "treat preflight warnings as errors",
		Value: func(s *settings.Settings) any { return &pf(s).FatalWarnings }},
	{Name: "deny-usr-override", Field: "preflight.denyUsrOverride", Group: FlagsPreflight,
		Help:  "an added file that replaces a file of the base under /usr is an error (check usr-override; it reads the base index)",
		Value: func(s *settings.Settings) any { return &pf(s).DenyUsrOverride }},
	{Name: "allow-secret", Field: "preflight.allowSecrets", Group: FlagsPreflight, Repeatable: true,
		Help:  "path (or glob) allowed to hold a secret, as on the node or in the image, e.g. /etc/pki/tls/private/*.key, /var/lib/kubelet/config.json (repeatable)",
		Value: func(s *settings.Settings) any { return &pf(s).AllowSecrets }},
	{Name: "warn-layers", Field: "preflight.warnLayers", Group: FlagsPreflight, Default: strconv.Itoa(preflight.DefaultWarnLayers),
		Help:  "warn when the image has more layers than this (docker pull fails at 128)",
		Value: func(s *settings.Settings) any { return &pf(s).WarnLayers }},
	{Name: "max-layers", Field: "preflight.maxLayers", Group: FlagsPreflight, Default: strconv.Itoa(preflight.DefaultMaxLayers),
		Help:  "fail when the image has this many layers or more (containers-storage cannot store about 500)",
		Value: func(s *settings.Settings) any { return &pf(s).MaxLayers }},
	{Name: "max-added-bytes", Field: "preflight.maxAddedBytes", Group: FlagsPreflight, Default: "2GiB",
		Help:  "budget for the compressed size of the added layers (bytes, or with KB/MB/GB/KiB/MiB/GiB)",
		Value: func(s *settings.Settings) any { return &pf(s).MaxAddedBytes }},
}

// FlagOf is the flag of a field (JSON path; "preflight.skip[2]" is
// preflight.skip's), nil when none.
func FlagOf(field string) *Flag {
	field, _, _ = strings.Cut(field, "[")
	for i := range Flags {
		if Flags[i].Field == field {
			return &Flags[i]
		}
	}
	return nil
}

// pf is s's preflight options, allocated when unset.
func pf(s *settings.Settings) *settings.Preflight {
	if s.Preflight == nil {
		s.Preflight = &settings.Preflight{}
	}
	return s.Preflight
}

func checkNames() []string {
	var out []string
	for _, c := range preflight.Default() {
		out = append(out, c.Name())
	}
	return out
}
