package main

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/oslayer/oslayer/internal/registry"
)

// registryFlags are mirrors, credentials and transfer settings, for every
// command that reaches a registry.
type registryFlags struct {
	mirrors    []string
	authfile   string
	authSecret string
	jobs       int
	requests   int
	insecure   []string
	timeout    time.Duration
}

// register adds the flags to fs; --jobs and --request-jobs only where
// something is uploaded, so that no command offers a flag that does
// nothing.
func (f *registryFlags) register(fs *pflag.FlagSet) {
	f.registerUploads(fs)
	fs.IntVar(&f.requests, "request-jobs", registry.DefaultRequests, "parallel blob requests per image (mounts, checks, uploads; at least --jobs): across a WAN each costs a round trip")
}

// registerUploads adds the flags of a command that uploads but --request-jobs,
// which oslayer build takes from its settings (pipeline.Flags).
func (f *registryFlags) registerUploads(fs *pflag.FlagSet) {
	f.registerReads(fs)
	fs.IntVar(&f.jobs, "jobs", defaultJobs, "parallel blob uploads per image")
}

// defaultJobs is the number of parallel blob uploads without --jobs.
const defaultJobs = 4

// registerReads adds the flags of commands that only read from registries.
func (f *registryFlags) registerReads(fs *pflag.FlagSet) {
	fs.StringArrayVar(&f.mirrors, "mirror", nil, "rewrite a registry host for pulls: FROM=TO (repeatable)")
	fs.StringVar(&f.authfile, "authfile", "", "registry credentials file (podman auth.json / docker config.json); takes precedence over --auth-secret and the docker config")
	fs.StringVar(&f.authSecret, "auth-secret", "", "Kubernetes Secret manifest of type kubernetes.io/dockerconfigjson with registry credentials")
	fs.DurationVar(&f.timeout, "timeout", registry.DefaultTimeout, "fail a registry request when no byte moves for this long (connecting, sending, answering)")
	fs.StringArrayVar(&f.insecure, "insecure-registry", nil, "reach this registry host[:port] over plain HTTP (repeatable; loopback and private hosts already are)")
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
	if f.jobs == 0 {
		f.jobs = defaultJobs
	}
	if f.jobs < 1 || f.jobs > 64 {
		return nil, fmt.Errorf("--jobs %d: want 1 to 64", f.jobs)
	}
	o.Jobs = f.jobs
	if f.requests < 0 || f.requests > 256 {
		return nil, fmt.Errorf("--request-jobs %d: want 1 to 256", f.requests)
	}
	o.Requests = f.requests
	if f.timeout <= 0 {
		return nil, fmt.Errorf("--timeout %s: want a positive duration, e.g. 30s", f.timeout)
	}
	o.Timeout = f.timeout
	for _, h := range f.insecure {
		hh, err := registry.ParseInsecure(h)
		if err != nil {
			return nil, err
		}
		o.Insecure = append(o.Insecure, hh)
	}
	kc, err := registry.Keychain(f.authfile, f.authSecret)
	if err != nil {
		return nil, err
	}
	o.Keychain = kc
	return o, nil
}
