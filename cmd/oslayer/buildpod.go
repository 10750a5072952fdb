package main

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/oslayer/oslayer/assemble/baseindex"
	"github.com/oslayer/oslayer/controller"
)

// podFlags are the flags of oslayer build in the build pod of a PoolImage
// with spec.builder Job.
type podFlags struct {
	poolImage     string
	job           string
	sourcesDigest string
	secretsDir    string
}

func (f *podFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.poolImage, "from-poolimage", "", "build the PoolImage NAMESPACE/NAME from its inputs in the cluster ($KUBECONFIG or the in-cluster service account), as the controller's build Job does; replaces the input, base and target flags")
	fs.StringVar(&f.job, "job", "", "with --from-poolimage: the build Job; the result is written into its ConfigMap of the same name")
	fs.StringVar(&f.sourcesDigest, "sources-digest", "", "with --from-poolimage: build only if the inputs still have this digest (the Job's)")
	fs.StringVar(&f.secretsDir, "secrets-dir", "", "with --from-poolimage: read the pull, push, signing and build Secrets from DIR/NAME/KEY (mounted volumes) instead of the API")
}

// runBuildPod is oslayer build --from-poolimage: the controller package
// does the work (controller.BuildPod); the last line on stdout is the
// digested reference, or the JobResult with -o json.
func runBuildPod(cmd *cobra.Command, g *globals, f *buildFlags) error {
	if f.givesInputs() {
		return errors.New("--from-poolimage takes the pool, documents, base, target and package inputs from the PoolImage: give none of --pool, --osc, --machineconfig, --base, --push, --containerfile, --context, --build-arg, --build-secret, --repo-file")
	}
	ns, name, err := controller.ParseObjectKey(f.pod.poolImage)
	if err != nil {
		return fmt.Errorf("--from-poolimage: %w", err)
	}
	opts, err := f.podOptions(g)
	if err != nil {
		return err
	}
	c, err := clusterClient()
	if err != nil {
		return err
	}
	res, err := controller.BuildPod(cmd.Context(), c, controller.PodOptions{
		Options:   opts,
		Namespace: ns, Name: name, Job: f.pod.job, SourcesDigest: f.pod.sourcesDigest,
		BuildLog: cmd.ErrOrStderr(),
	})
	out := cmd.OutOrStdout()
	if g.json() && res != nil {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if jerr := enc.Encode(res); jerr != nil {
			return errors.Join(err, jerr)
		}
		return err
	}
	if err != nil {
		return err
	}
	if f.digestFile != "" {
		if err := writeAtomic(f.digestFile, []byte(res.Image+"\n")); err != nil {
			return fmt.Errorf("--digest-file %s: %w", f.digestFile, err)
		}
	}
	_, err = fmt.Fprintln(out, res.Image)
	return err
}

// givesInputs reports whether a flag gives what --from-poolimage takes
// from the PoolImage (pool, documents, base, target, package inputs).
func (f *buildFlags) givesInputs() bool {
	p := f.pkg
	return f.in.pool != "" || len(f.in.oscs) > 0 || len(f.in.mcs) > 0 || f.base != "" || f.push != "" ||
		p.containerfile != "" || p.contextDir != "" || len(p.buildArgs) > 0 || len(p.secrets) > 0 || len(p.repoFiles) > 0
}

// podOptions are the controller's options for the build: the registry
// flags, the version, the base index cache, the mounted Secrets.
func (f *buildFlags) podOptions(g *globals) (controller.Options, error) {
	reg, err := f.reg.options()
	if err != nil {
		return controller.Options{}, err
	}
	reg.UserAgent = "oslayer/" + version
	cache, err := baseindex.DefaultCacheDir()
	if err != nil {
		return controller.Options{}, err
	}
	return controller.Options{Registry: *reg, Version: version, IndexCacheDir: cache, Logger: g.log,
		SecretsDir: f.pod.secretsDir}, nil
}

// clusterClient is a client of the cluster ($KUBECONFIG or the in-cluster
// service account) with the controller's scheme.
func clusterClient() (client.Client, error) {
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return nil, err
	}
	s, err := controller.Scheme()
	if err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: s})
}

// args are the registry flags as given, for the build pod's command line
// (credentials excepted: the pod mounts the PoolImage's Secrets).
func (f *registryFlags) args() []string {
	var out []string
	for _, m := range f.mirrors {
		out = append(out, "--mirror", m)
	}
	for _, h := range f.insecure {
		out = append(out, "--insecure-registry", h)
	}
	out = append(out, "--timeout", f.timeout.String())
	if f.jobs != 0 {
		out = append(out, "--jobs", fmt.Sprint(f.jobs))
	}
	return out
}
