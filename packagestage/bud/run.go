//go:build containers_image_openpgp && exclude_graphdriver_btrfs && exclude_graphdriver_devicemapper

package bud

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"

	"go.podman.io/buildah"
	"go.podman.io/buildah/define"
	"go.podman.io/buildah/imagebuildah"
	"go.podman.io/image/v5/transports/alltransports"
	"go.podman.io/image/v5/types"
	"go.podman.io/storage"

	"github.com/oslayer/oslayer/assemble"
	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/packagestage"
)

// buildRun is the state of one run of buildah: the files written into
// the scratch directory, the storage, the system context and the build
// options, filled step by step by runBuild.
type buildRun struct {
	ctx     context.Context
	o       Options
	reg     *registry.Options
	scratch string
	log     io.Writer
	res     *Result

	policyPath string
	cfPath     string
	contextDir string
	extra      map[string]*define.AdditionalBuildContext
	store      storage.Store
	sys        *types.SystemContext
	// tail keeps the output of the steps, for the error of a failing
	// one; outw writes it without buildah's noise.
	tail *tailBuffer
	outw *noiseFilter
	opts define.BuildOptions
	id   string
}

// runBuild runs buildah and pushes the result by digest and under the
// key's tag.
func runBuild(ctx context.Context, o Options, reg *registry.Options, scratch string, log io.Writer, res *Result) error {
	r := &buildRun{ctx: ctx, o: o, reg: reg, scratch: scratch, log: log, res: res}
	if err := r.writeFiles(); err != nil {
		return err
	}
	if err := assemble.TimePhase(&res.Phases, "storage", func() (err error) {
		r.store, res.StorageDriver, err = openStore(scratch, o.StorageDriver)
		return err
	}); err != nil {
		return err
	}
	defer r.store.Shutdown(true)
	authPath, err := r.systemContext()
	if err != nil {
		return err
	}
	// The credentials leave with the steps and the push, not with the
	// scratch directory (which may be removed in the background).
	defer os.Remove(authPath)
	r.tail = &tailBuffer{max: 64 << 10}
	r.outw = &noiseFilter{w: io.MultiWriter(log, r.tail)}
	defer r.outw.Flush()
	if err := r.options(); err != nil {
		return err
	}
	quietBuildah()
	for _, step := range []func() error{r.pull, r.build, r.push} {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

// writeFiles writes the signature policy, the Containerfile, an empty
// context when the plan has none and the repository files into the
// scratch directory.
func (r *buildRun) writeFiles() error {
	plan := r.o.Plan
	r.policyPath = filepath.Join(r.scratch, "policy.json")
	r.cfPath = filepath.Join(r.scratch, "Containerfile")
	if err := os.WriteFile(r.policyPath, []byte(policy), 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(r.cfPath, plan.Containerfile.Bytes(), 0o600); err != nil {
		return err
	}
	r.contextDir = plan.ContextDir
	if r.contextDir == "" {
		r.contextDir = filepath.Join(r.scratch, "context")
		if err := os.Mkdir(r.contextDir, 0o700); err != nil {
			return err
		}
	}
	return r.writeRepos()
}

// writeRepos writes the plan's repository files into a directory of the
// scratch directory, the additional build context the install steps
// mount.
func (r *buildRun) writeRepos() error {
	if len(r.o.Plan.Repos) == 0 {
		return nil
	}
	dir := filepath.Join(r.scratch, "repos")
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	for n, data := range r.o.Plan.Repos {
		if err := os.WriteFile(filepath.Join(dir, n), data, 0o644); err != nil {
			return err
		}
	}
	r.extra = map[string]*define.AdditionalBuildContext{packagestage.ReposContext: {Value: dir}}
	return nil
}

// systemContext is the policy, the blob info cache (which layer has
// which compressed digest where, in the scratch directory too) and the
// credentials oslayer has for the base's and the target's registries, as
// an auth file in the scratch directory whose path it returns.
func (r *buildRun) systemContext() (string, error) {
	r.sys = &types.SystemContext{SignaturePolicyPath: r.policyPath, BlobInfoCacheDir: r.scratch}
	authPath, err := writeAuthFile(r.scratch, r.reg, r.o.Base, r.o.Repository)
	if err != nil {
		return "", err
	}
	r.sys.AuthFilePath = authPath
	host := strings.SplitN(r.o.Repository, "/", 2)[0]
	if r.reg.IsInsecure(host) || strings.HasPrefix(host, "127.0.0.1") || strings.HasPrefix(host, "localhost") || strings.HasPrefix(host, "[::1]") {
		r.sys.DockerInsecureSkipTLSVerify = types.OptionalBoolTrue
	}
	return authPath, nil
}

// options are buildah's build options: the base as a build argument
// with the plan's, the secrets, the current limits, the output named by
// the key and labelled with it.
func (r *buildRun) options() error {
	plan := r.o.Plan
	args := map[string]string{packagestage.BaseArg: r.o.Base}
	for k, v := range plan.BuildArgs {
		args[k] = v
	}
	var secrets []string
	for id, src := range r.o.Secrets {
		secrets = append(secrets, "id="+id+",src="+src)
	}
	ulimits, err := currentLimits()
	if err != nil {
		return err
	}
	r.opts = define.BuildOptions{
		ContextDirectory:        r.contextDir,
		PullPolicy:              define.PullIfMissing,
		Isolation:               define.IsolationChroot,
		Args:                    args,
		AdditionalBuildContexts: r.extra,
		Output:                  "localhost/oslayer-packages:" + plan.Key.Tag(),
		OutputFormat:            define.OCIv1ImageManifest,
		Labels:                  []string{packagestage.LabelKey + "=" + plan.Key.String()},
		CommonBuildOpts: &define.CommonBuildOptions{
			Ulimit:  ulimits,
			Secrets: secrets,
		},
		SystemContext:       r.sys,
		SignaturePolicyPath: r.policyPath,
		Out:                 r.outw,
		Err:                 r.outw,
		ReportWriter:        r.outw,
		NoCache:             true,
	}
	return nil
}

// currentLimits are the process's nofile and nproc limits as buildah's
// ulimit options: buildah raises them for RUN steps unless told, and a
// pod or container may not raise them, so the steps keep the current
// limits.
func currentLimits() ([]string, error) {
	var ulimits []string
	for _, l := range []struct {
		name string
		res  int
	}{{"nofile", unix.RLIMIT_NOFILE}, {"nproc", unix.RLIMIT_NPROC}} {
		var lim unix.Rlimit
		if err := unix.Getrlimit(l.res, &lim); err != nil {
			return nil, fmt.Errorf("%s limit: %w", l.name, err)
		}
		ulimits = append(ulimits, l.name+"="+strconv.FormatUint(lim.Cur, 10)+":"+strconv.FormatUint(lim.Max, 10))
	}
	return ulimits, nil
}

// quietBuildah keeps only warnings and errors of buildah's log, unless a
// level was chosen: it logs "network namespace isolation not supported
// with chroot isolation, forcing host network" at info level for every
// RUN.
func quietBuildah() {
	quietLogrus.Do(func() {
		if logrus.GetLevel() == logrus.InfoLevel {
			logrus.SetLevel(logrus.WarnLevel)
		}
	})
}

// pull pulls the base on its own first (the build finds it in the
// storage), so that the pull and the steps are timed apart.
func (r *buildRun) pull() error {
	if err := assemble.TimePhase(&r.res.Phases, "pull", func() error {
		_, err := buildah.Pull(r.ctx, "docker://"+r.o.Base, buildah.PullOptions{
			Store:               r.store,
			SystemContext:       r.sys,
			SignaturePolicyPath: r.policyPath,
			ReportWriter:        r.log,
			MaxRetries:          3,
			PullPolicy:          define.PullIfMissing,
		})
		return err
	}); err != nil {
		return fmt.Errorf("pulling the base %s: %w", r.o.Base, refused(err, r.o.Base))
	}
	return nil
}

// build runs the Containerfile's steps; a failing step's error carries
// the tail of their output.
func (r *buildRun) build() error {
	err := assemble.TimePhase(&r.res.Phases, "build", func() error {
		return retryReexec(r.log, r.tail, func() (err error) {
			r.id, _, err = imagebuildah.BuildDockerfiles(r.ctx, r.store, r.opts, r.cfPath)
			r.outw.Flush()
			return err
		})
	})
	if err != nil {
		r.outw.Flush()
		return stepError(r.o.Plan.Containerfile, err, r.tail.String())
	}
	return nil
}

// push pushes the built image to the repository under the key's tag,
// after the base layers were copied there.
func (r *buildRun) push() error {
	o := r.o
	dest, err := alltransports.ParseImageName("docker://" + o.Repository + ":" + o.Plan.Key.Tag())
	if err != nil {
		return fmt.Errorf("repository %s: %w", o.Repository, err)
	}
	if err := assemble.TimePhase(&r.res.Phases, "push", func() error {
		if err := copyBaseLayers(r.ctx, r.reg, o.Base, o.Repository); err != nil {
			return err
		}
		_, _, err := buildah.Push(r.ctx, r.id, dest, buildah.PushOptions{
			Store:               r.store,
			SystemContext:       r.sys,
			SignaturePolicyPath: r.policyPath,
			ManifestType:        v1MediaTypeOCIManifest,
			ReportWriter:        r.log,
			MaxRetries:          3,
		})
		return err
	}); err != nil {
		return fmt.Errorf("pushing to %s: %w", o.Repository, refused(err, o.Repository))
	}
	return nil
}
