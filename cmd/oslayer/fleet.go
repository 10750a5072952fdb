package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/oslayer/oslayer/assemble/baseindex"
	"github.com/oslayer/oslayer/fleet"
	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/publish"
)

// fleetFlags are the options of oslayer fleet build.
type fleetFlags struct {
	reg          registryFlags
	jobs         int
	uploadJobs   int
	summary      string
	indexCache   string
	imageBudget  string
	imageTimeout time.Duration
	shard        string
	shards       int
	results      string
}

func newFleetCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "fleet",
		Short:   "Build many pools' images (clusters × pools) in one process",
		Example: `  oslayer fleet build fleet.yaml --jobs 8 --summary summary.json`,
	}
	cmd.AddCommand(newFleetBuildCmd(g))
	return cmd
}

func newFleetBuildCmd(g *globals) *cobra.Command {
	f := &fleetFlags{}
	cmd := &cobra.Command{
		Use:   "build PLAN",
		Short: "Build, check, push and sign every pool of a fleet plan",
		Long: `fleet build builds every pool a plan lists (YAML: defaults, clusters, pools;
see docs/fleet.md) in one process, --jobs pools at a time. Each pool is what
oslayer build with the same options builds (same image digest); the pools
share the resolved base and its index, registry credentials and
connections, the imageRef files read for rendering and the signing key.

The whole plan is validated first: every error is reported with its place
in the plan (clusters[3].pools[1].base) and nothing is built. Pools are
independent: one failing never stops another.

Progress goes to stderr (a line per pool; a status line on a terminal). The
summary table goes to stdout (-o json: the full summary), and --summary FILE
writes the full summary as JSON (per pool: image digest, inputs digest,
uploaded bytes, phases, error with its step).

Exit codes: 0 every pool built; 2 bad input, retrying won't help: a flag
or the plan is invalid, or every pool that failed was refused for its input
or a preflight check (kind input); 1 some pool could not run (kind run:
registry, credentials; retrying may help) or the run itself failed.`,
		Example: `  oslayer fleet build fleet.yaml --jobs 8 --summary summary.json`,
		Args:    cobra.ExactArgs(1),
		RunE:    func(cmd *cobra.Command, args []string) error { return runFleetBuild(cmd, g, f, args[0]) },
	}
	fs := cmd.Flags()
	f.reg.registerReads(fs)
	fs.IntVar(&f.jobs, "jobs", 8, "pools built at once")
	fs.IntVar(&f.uploadJobs, "upload-jobs", defaultJobs, "parallel blob uploads per image")
	fs.IntVar(&f.reg.requests, "request-jobs", registry.DefaultRequests, "parallel blob requests per image (mounts, checks, uploads; at least --upload-jobs): across a WAN each costs a round trip")
	fs.StringVar(&f.summary, "summary", "", "write the full result as JSON to this file")
	fs.StringVar(&f.indexCache, "base-index-cache", "", "directory of cached base indexes (default $"+baseindex.CacheEnv+", else $XDG_CACHE_HOME/oslayer/baseindex)")
	fs.StringVar(&f.imageBudget, "imageref-budget", "1GiB", "total size of all Gardener imageRef files read by the run (a file many pools name counts once)")
	fs.DurationVar(&f.imageTimeout, "imageref-timeout", 0, "time bound for reading all imageRef files of the run (default 10m)")
	fs.StringVar(&f.shard, "shard", "", "build only shard I of N (I/N, 0 <= I < N): a deterministic, balanced slice of the plan; N runs build every pool once")
	fs.IntVar(&f.shards, "shards", 0, "build the shard $JOB_COMPLETION_INDEX of this many (a Kubernetes Indexed Job's completions)")
	fs.StringVar(&f.results, "tekton-results", "", "write Tekton results IMAGES, IMAGE_URL and IMAGE_DIGEST into this directory (e.g. /tekton/results)")
	return cmd
}

// shard returns the shard the flags (or $JOB_COMPLETION_INDEX) select:
// "" when none.
func (f *fleetFlags) shardSpec() (string, error) {
	switch {
	case f.shard != "" && f.shards != 0:
		return "", errors.New("give --shard I/N or --shards N, not both")
	case f.shard != "":
		return f.shard, nil
	case f.shards != 0:
		idx, ok := os.LookupEnv("JOB_COMPLETION_INDEX")
		if !ok {
			return "", errors.New("--shards N reads the shard index from $JOB_COMPLETION_INDEX, which is not set (give --shard I/N)")
		}
		return idx + "/" + strconv.Itoa(f.shards), nil
	}
	return "", nil
}

// runFleetBuild builds the plan's pools (this shard's) and writes the
// summary, the Tekton results and the table or JSON.
func runFleetBuild(cmd *cobra.Command, g *globals, f *fleetFlags, planPath string) error {
	stderr := cmd.ErrOrStderr()
	opts, err := f.options(g, stderr)
	if err != nil {
		return &exitError{code: 2, err: err} // the flags are bad input
	}
	spec, pools, err := f.shardPools(planPath)
	if err != nil {
		return err
	}
	if opts.IndexCacheDir == "" {
		if opts.IndexCacheDir, err = baseindex.DefaultCacheDir(); err != nil {
			return err
		}
	}
	sum, err := fleet.Run(cmd.Context(), pools, opts)
	if err != nil {
		return err // a failure to run: exit 1
	}
	sum.Shard = spec
	if err := f.writeSummary(sum); err != nil {
		return err
	}
	if g.json() {
		err = sum.WriteJSON(cmd.OutOrStdout())
	} else {
		err = sum.WriteTable(cmd.OutOrStdout())
	}
	if err != nil {
		return err
	}
	if code := sum.ExitCode(); code != 0 {
		return &exitError{code: code, err: fmt.Errorf("fleet: %d of %d pools failed", sum.Failed, sum.Total)}
	}
	return nil
}

// options are the run's flags as fleet options (the index cache
// directory as given: "" for the default).
func (f *fleetFlags) options(g *globals, stderr io.Writer) (fleet.Options, error) {
	if f.jobs < 1 || f.jobs > 256 {
		return fleet.Options{}, fmt.Errorf("--jobs %d: want 1 to 256", f.jobs)
	}
	f.reg.jobs = f.uploadJobs
	reg, err := f.reg.options()
	if err != nil {
		return fleet.Options{}, err
	}
	reg.UserAgent = "oslayer/" + version
	budget, err := parseSize(f.imageBudget)
	if err != nil {
		return fleet.Options{}, fmt.Errorf("--imageref-budget: %w", err)
	}
	if f.imageTimeout < 0 {
		return fleet.Options{}, fmt.Errorf("--imageref-timeout %s: want a positive duration", f.imageTimeout)
	}
	epoch, err := sourceDateEpoch()
	if err != nil {
		return fleet.Options{}, err
	}
	return fleet.Options{
		Registry: reg, Jobs: f.jobs, Version: version, Epoch: epoch, IndexCacheDir: f.indexCache,
		ImageBudget: budget, ImageTimeout: f.imageTimeout,
		Password: []byte(os.Getenv("COSIGN_PASSWORD")),
		Progress: stderr, Terminal: publish.IsTerminal(stderr), Logger: g.log,
	}, nil
}

// shardPools loads the plan and keeps this shard's pools; spec is the
// shard ("I/N", "" for the whole plan).
func (f *fleetFlags) shardPools(planPath string) (spec string, pools []fleet.Pool, err error) {
	if spec, err = f.shardSpec(); err != nil {
		return "", nil, &exitError{code: 2, err: err}
	}
	shard, shards := 0, 1
	if spec != "" {
		if shard, shards, err = fleet.ParseShard(spec); err != nil {
			from := "--shard"
			if f.shard == "" {
				from = "--shards and $JOB_COMPLETION_INDEX"
			}
			return "", nil, &exitError{code: 2, err: fmt.Errorf("%s: %w", from, err)}
		}
	}
	if pools, err = fleet.Load(planPath); err != nil {
		return "", nil, &exitError{code: 2, err: err} // an invalid plan is bad input
	}
	return spec, fleet.Shard(pools, shard, shards), nil
}

// writeSummary writes the Tekton results and the JSON summary file when
// asked for.
func (f *fleetFlags) writeSummary(sum *fleet.Summary) error {
	if f.results != "" {
		if err := sum.WriteTektonResults(f.results); err != nil {
			return fmt.Errorf("--tekton-results: %w", err) // I/O: exit 1
		}
	}
	if f.summary == "" {
		return nil
	}
	var b bytes.Buffer
	if err := sum.WriteJSON(&b); err != nil {
		return err
	}
	if err := writeAtomic(f.summary, b.Bytes()); err != nil {
		return fmt.Errorf("--summary %s: %w", f.summary, err) // I/O: exit 1
	}
	return nil
}
