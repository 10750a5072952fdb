package pipeline

import (
	"fmt"
	"reflect"
	"slices"
	"sort"

	"github.com/oslayer/oslayer/pipeline/settings"
)

// The front-ends that map onto a Spec, as Absent names them.
const (
	FrontCLI       = "oslayer build"
	FrontFleet     = "fleet plan"
	FrontPoolImage = "PoolImage"
	FrontExtension = "Gardener extension"
)

// Absent lists, per front-end, the fields of Spec (as Fields names them)
// it deliberately does not reach, with the reason. Every other field is
// reachable from every front-end (the parity test in cmd/oslayer).
var Absent = map[string]map[string]string{
	FrontCLI: {},
	FrontFleet: {
		"Packages.Containerfile":     noFleetPackages,
		"Packages.ContainerfileName": noFleetPackages,
		"Packages.ContextDir":        noFleetPackages,
		"Packages.BuildArgs":         noFleetPackages,
		"Packages.Secrets":           noFleetPackages,
		"Packages.Repos":             noFleetPackages,
	},
	FrontPoolImage: {
		"Inputs.Epoch":             "a cluster has no SOURCE_DATE_EPOCH: the controller stamps the zero time, the same for every build",
		"Inputs.ImageRefs.Budget":  noControllerImageRefs,
		"Inputs.ImageRefs.Timeout": noControllerImageRefs,
		"Packages.ContextDir":      "spec.packages.containerfile is one ConfigMap key: it has no build context",
		"Signing.Password":         "the key Secret carries its password (cosign.password)",
		"Signing.Identity":         "a PoolImage's target is a registry repository: the signature names it",
	},
	FrontExtension: {
		"Inputs.MachineConfigs":      noExtensionMachineConfigs,
		"Inputs.MachineConfigPools":  noExtensionMachineConfigs,
		"Inputs.Epoch":               "a seed has no SOURCE_DATE_EPOCH: the extension stamps the zero time, the same for every build",
		"Inputs.ImageRefs.Budget":    noExtensionImageRefs,
		"Inputs.ImageRefs.Timeout":   noExtensionImageRefs,
		"Packages.Containerfile":     noExtensionPackages,
		"Packages.ContainerfileName": noExtensionPackages,
		"Packages.ContextDir":        noExtensionPackages,
		"Packages.BuildArgs":         noExtensionPackages,
		"Packages.Secrets":           noExtensionPackages,
		"Packages.Repos":             noExtensionPackages,
		"Signing.Password":           "the key Secret (signing.keySecretRef) carries its password (cosign.password)",
		"Signing.Identity":           "the extension's target is a registry repository: the signature names it",
	},
}

const (
	noFleetPackages           = "a fleet builds many pools in one process and runs no package stage (buildah); such a pool builds with oslayer build or a PoolImage with builder Job"
	noControllerImageRefs     = "the controller has no imageRef reader: an imageRef file is refused in the cluster"
	noExtensionMachineConfigs = "the extension builds the Gardener OperatingSystemConfig it reconciles: there are no MachineConfigs"
	noExtensionImageRefs      = "the extension has no imageRef reader: an OSC's imageRef file is refused"
	noExtensionPackages       = "the extension runs in the seed's extension process and runs no package stage (buildah); an OSC has no package inputs"
)

// Fields lists the fields of Spec a front-end can set, as paths
// ("Preflight.MaxLayers"): the leaves under Spec's structs (and pointers
// to them) of this package.
func Fields() []string {
	var out []string
	walkType(reflect.TypeOf(Spec{}), "", func(path string) { out = append(out, path) })
	return out
}

// ParityErrors lists the problems of a front-end's mappings: a field
// Unreached(none, full...) lists that Absent does not list for front
// with a reason, and a field Absent lists that is reached.
func ParityErrors(front string, none Spec, full ...Spec) []string {
	var out []string
	unreached := Unreached(none, full...)
	for _, f := range unreached {
		if Absent[front][f] == "" {
			out = append(out, fmt.Sprintf("%s does not reach Spec.%s: map it, or list it in pipeline.Absent with the reason", front, f))
		}
	}
	for f := range Absent[front] {
		if !slices.Contains(unreached, f) {
			out = append(out, fmt.Sprintf("pipeline.Absent says %s does not reach Spec.%s, but it does", front, f))
		}
	}
	sort.Strings(out)
	return out
}

// Unreached lists the fields (Fields) whose value in every full equals
// the one in none: each full is a front-end's mapping of an input setting
// everything it can (several when options exclude each other, such as an
// OCI layout's signing identity and a registry's referrers), none its
// mapping of a minimal input (with other values for what is required). A
// function field is reached when a full's is set.
func Unreached(none Spec, full ...Spec) []string {
	var out []string
	for _, path := range Fields() {
		b := fieldAt(reflect.ValueOf(none), path)
		hit := false
		for _, f := range full {
			hit = hit || reached(fieldAt(reflect.ValueOf(f), path), b)
		}
		if !hit {
			out = append(out, path)
		}
	}
	sort.Strings(out)
	return out
}

func reached(full, none reflect.Value) bool {
	if !full.IsValid() {
		return false
	}
	if full.Kind() == reflect.Func {
		return !full.IsNil()
	}
	if !none.IsValid() {
		return !full.IsZero()
	}
	return !reflect.DeepEqual(full.Interface(), none.Interface())
}

// ownStruct is a struct type of this package (walked into).
func ownStruct(t reflect.Type) (reflect.Type, bool) {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t, t.Kind() == reflect.Struct && t.PkgPath() == reflect.TypeOf(Spec{}).PkgPath()
}

func walkType(t reflect.Type, prefix string, leaf func(string)) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		path := prefix + f.Name
		if st, ok := ownStruct(f.Type); ok {
			walkType(st, path+".", leaf)
			continue
		}
		leaf(path)
	}
}

// fieldAt is the value at path under v (invalid when a pointer on the
// way is nil).
func fieldAt(v reflect.Value, path string) reflect.Value {
	for _, name := range splitPath(path) {
		if v.Kind() == reflect.Pointer {
			if v.IsNil() {
				return reflect.Value{}
			}
			v = v.Elem()
		}
		v = v.FieldByName(name)
	}
	return v
}

func splitPath(p string) []string {
	var out []string
	start := 0
	for i := 0; i < len(p); i++ {
		if p[i] == '.' {
			out = append(out, p[start:i])
			start = i + 1
		}
	}
	return append(out, p[start:])
}

// FullSettings are build settings with every field set to a value other
// than its default, for the parity tests of the front-ends that embed
// settings.Settings.
func FullSettings() settings.Settings {
	return settings.Settings{
		BaseIndex: "off", BakeSecrets: settings.Bool(true), Strict: settings.Bool(true), AllowTopLevel: []string{"data"}, RequestJobs: 8,
		Preflight: &settings.Preflight{Skip: []string{"layers"}, ExpectVersion: "42", FatalWarnings: settings.Bool(true),
			DenyUsrOverride: settings.Bool(true), MaxAddedBytes: "1GiB", RequireBase: "quay.io/fedora/fedora-coreos:stable",
			WarnLayers: 50, MaxLayers: 60, AllowSecrets: []string{"/etc/x"}},
	}
}
