package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/spf13/pflag"

	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/pipeline"
	"github.com/oslayer/oslayer/pipeline/settings"
	"github.com/oslayer/oslayer/render"
	"github.com/oslayer/oslayer/sources/imageref"
)

// inputFlags are the render inputs shared by render and build.
type inputFlags struct {
	stdin      io.Reader // read for --osc -
	oscs       []string
	mcs        []string
	mcps       []string
	pool       string
	secretsDir string
	// set holds bakeSecrets, strict and allowTopLevel (pipeline.Flags),
	// shared with the command's other settings flags.
	set          *settings.Settings
	imageBudget  string
	imageTimeout time.Duration
}

func (f *inputFlags) register(fs *pflag.FlagSet) {
	fs.StringArrayVar(&f.oscs, "osc", nil, "Gardener OperatingSystemConfig, node-agent Secret manifest, or bare osc.yaml; - reads standard input (repeatable)")
	fs.StringArrayVar(&f.mcs, "machineconfig", nil, "MachineConfig file or directory of them (repeatable)")
	fs.StringArrayVar(&f.mcps, "machineconfigpool", nil, "MachineConfigPool file; its machineConfigSelector selects the MachineConfigs (repeatable; --pool NAME picks one of several)")
	fs.StringVar(&f.pool, "pool", "", "pool name; selects MachineConfigs labelled machineconfiguration.openshift.io/role=NAME (with --machineconfigpool: the pool of that name)")
	fs.StringVar(&f.secretsDir, "secrets", "", "directory of Secret manifests for Gardener secretRef files")
	if f.set == nil {
		f.set = &settings.Settings{}
	}
	registerSettings(fs, pipeline.FlagsInputs, f.set)
	fs.StringVar(&f.imageBudget, "imageref-budget", "1GiB", "total size of all Gardener imageRef files read by one run (bytes, or with KiB, MiB, GiB)")
	fs.DurationVar(&f.imageTimeout, "imageref-timeout", imageref.DefaultTimeout, "time bound for reading all Gardener imageRef files of one run")
}

// sourceDateEpoch reads SOURCE_DATE_EPOCH (seconds since 1970); zero time
// when unset.
func sourceDateEpoch() (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return time.Time{}, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: want a non-negative number of seconds", s)
	}
	return time.Unix(n, 0).UTC(), nil
}

// request builds the render.Request; reg reaches imageRef images. It fails
// on an invalid SOURCE_DATE_EPOCH.
func (f *inputFlags) request(reg *registry.Options) (render.Request, error) {
	epoch, err := sourceDateEpoch()
	r := render.Request{
		OSCs:               f.oscs,
		Stdin:              f.stdin,
		MachineConfigs:     f.mcs,
		MachineConfigPools: f.mcps,
		Pool:               f.pool,
		SecretsDir:         f.secretsDir,
		BakeSecrets:        settings.True(f.set.BakeSecrets),
		Strict:             settings.True(f.set.Strict),
		AllowTopLevel:      f.set.AllowTopLevel,
		Epoch:              epoch,
	}
	if err != nil {
		return r, err
	}
	if reg != nil {
		images, err := f.images(reg)
		if err != nil {
			return r, err
		}
		r.Images = images(nil)
	}
	return r, nil
}

// spec maps the input flags onto the build specification's inputs
// (SOURCE_DATE_EPOCH is Epoch) but the settings (Spec.SetSettings maps
// them); it fails on an invalid SOURCE_DATE_EPOCH
// or imageRef bound.
func (f *inputFlags) spec() (pipeline.Inputs, error) {
	epoch, err := sourceDateEpoch()
	if err != nil {
		return pipeline.Inputs{}, err
	}
	budget, err := parseSize(f.imageBudget)
	if err != nil {
		return pipeline.Inputs{}, fmt.Errorf("--imageref-budget: %w", err)
	}
	if f.imageTimeout <= 0 {
		return pipeline.Inputs{}, fmt.Errorf("--imageref-timeout %s: want a positive duration", f.imageTimeout)
	}
	return pipeline.Inputs{
		Pool: f.pool, OSCs: f.oscs, MachineConfigs: f.mcs, MachineConfigPools: f.mcps,
		SecretsDir: f.secretsDir,
		Epoch:      epoch, ImageRefs: &pipeline.ImageRefs{Budget: budget, Timeout: f.imageTimeout},
	}, nil
}

// images checks the imageRef flags and returns a constructor of readers
// of imageRef files for a platform (nil: linux/amd64).
func (f *inputFlags) images(reg *registry.Options) (func(*v1.Platform) *imageref.Reader, error) {
	budget, err := parseSize(f.imageBudget)
	if err != nil {
		return nil, fmt.Errorf("--imageref-budget: %w", err)
	}
	if f.imageTimeout <= 0 {
		return nil, fmt.Errorf("--imageref-timeout %s: want a positive duration", f.imageTimeout)
	}
	return func(p *v1.Platform) *imageref.Reader {
		opts := []imageref.Option{imageref.WithBudget(budget), imageref.WithTimeout(f.imageTimeout)}
		if p != nil {
			opts = append(opts, imageref.WithPlatform(*p))
		}
		return imageref.New(reg, opts...)
	}, nil
}

// parseSize reads "1073741824", "512MiB", "1GiB", "64KiB".
func parseSize(s string) (int64, error) {
	num, mult := s, int64(1)
	for suffix, m := range map[string]int64{"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30} {
		if strings.HasSuffix(s, suffix) {
			num, mult = strings.TrimSuffix(s, suffix), m
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("%q: want a size in bytes, or a number with KiB, MiB or GiB", s)
	}
	return n * mult, nil
}
