package main

import (
	"github.com/spf13/pflag"

	"github.com/oslayer/oslayer/registry"
)

// registryFlags are mirrors and credentials, for every command that reaches a registry.
type registryFlags struct {
	mirrors    []string
	authfile   string
	authSecret string
}

func (f *registryFlags) register(fs *pflag.FlagSet) {
	fs.StringArrayVar(&f.mirrors, "mirror", nil, "rewrite a registry host for pulls: FROM=TO (repeatable)")
	fs.StringVar(&f.authfile, "authfile", "", "registry credentials file (podman auth.json / docker config.json)")
	fs.StringVar(&f.authSecret, "auth-secret", "", "Kubernetes Secret manifest of type kubernetes.io/dockerconfigjson with registry credentials")
}

func (f *registryFlags) options() (*registry.Options, error) {
	o := &registry.Options{}
	for _, m := range f.mirrors {
		mm, err := registry.ParseMirror(m)
		if err != nil {
			return nil, err
		}
		o.Mirrors = append(o.Mirrors, mm)
	}
	return o, nil
}
