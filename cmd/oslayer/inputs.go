package main

import (
	"github.com/spf13/pflag"

	"github.com/oslayer/oslayer/layers"
	"github.com/oslayer/oslayer/registry"
)

// inputFlags are the render inputs shared by render and build.
type inputFlags struct {
	oscs          []string
	mcs           []string
	pool          string
	secretsDir    string
	bakeSecrets   bool
	allowTopLevel []string
}

func (f *inputFlags) register(fs *pflag.FlagSet) {
	fs.StringArrayVar(&f.oscs, "osc", nil, "Gardener OperatingSystemConfig, node-agent Secret manifest, or bare osc.yaml (repeatable)")
	fs.StringArrayVar(&f.mcs, "machineconfig", nil, "MachineConfig file or directory of them (repeatable)")
	fs.StringVar(&f.pool, "pool", "", "pool name; selects MachineConfigs labelled machineconfiguration.openshift.io/role=NAME")
	fs.StringVar(&f.secretsDir, "secrets", "", "directory of Secret manifests for Gardener secretRef files")
	fs.BoolVar(&f.bakeSecrets, "bake-secrets", false, "bake secretRef content into the image (default: report it as runtime-delivered)")
	fs.StringArrayVar(&f.allowTopLevel, "allow-toplevel", nil, "allow content under this extra top-level directory (survives only on composefs bases; repeatable)")
}

// request builds the layers.Request; reg reaches imageRef images.
func (f *inputFlags) request(reg *registry.Options) layers.Request {
	return layers.Request{
		OSCs:           f.oscs,
		MachineConfigs: f.mcs,
		Pool:           f.pool,
		SecretsDir:     f.secretsDir,
		BakeSecrets:    f.bakeSecrets,
		AllowTopLevel:  f.allowTopLevel,
	}
}
