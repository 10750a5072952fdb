package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/spf13/pflag"

	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/packagestage"
	"github.com/oslayer/oslayer/packagestage/bud"
	"github.com/oslayer/oslayer/pipeline"
)

// packageFlags are the package stage's own inputs, shared by render (which
// plans the stage) and build (which runs it).
type packageFlags struct {
	containerfile string
	contextDir    string
	buildArgs     []string
	secrets       []string
	repoFiles     []string
}

func (f *packageFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.containerfile, "containerfile", "", "Containerfile run in the package stage after the pool's extensions and kernelType; its final stage starts FROM "+packagestage.BaseStage+" (or FROM "+packagestage.MCOStageAlias+", as a MachineOSConfig's)")
	fs.StringVar(&f.contextDir, "context", "", "build context of --containerfile (COPY and ADD read it; every file is part of the package key) (default: the Containerfile's directory)")
	fs.StringArrayVar(&f.buildArgs, "build-arg", nil, "build argument NAME=VALUE for the package stage (repeatable; part of the package key)")
	fs.StringArrayVar(&f.secrets, "build-secret", nil, "build secret id=ID,src=FILE for RUN --mount=type=secret,id=ID in the package stage (repeatable; never in a layer, label, history or the package key)")
	fs.StringArrayVar(&f.repoFiles, "repo-file", nil, "yum/dnf repository definition (*.repo) or directory of them, for the package stage's installs (repeatable; mounted for the install steps only)")
}

// secretID is what buildah accepts as a secret id.
var secretID = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// config reads the flags' files into the stage's configuration; the
// package bases go to repository ("" for an OCI layout target).
func (f *packageFlags) config(reg *registry.Options, repository string, log io.Writer) (bud.Config, error) {
	c := bud.Config{Repository: repository, Registry: reg, Log: log}
	for _, step := range []func(*bud.Config) error{
		f.readContainerfile, f.readContext, f.readBuildArgs, f.readSecrets, f.readRepoFiles,
	} {
		if err := step(&c); err != nil {
			return c, err
		}
	}
	return c, nil
}

// readContainerfile reads --containerfile; its directory is the default
// build context.
func (f *packageFlags) readContainerfile(c *bud.Config) error {
	if f.containerfile == "" {
		return nil
	}
	data, err := os.ReadFile(f.containerfile)
	if err != nil {
		return fmt.Errorf("--containerfile: %w", err)
	}
	if len(strings.TrimSpace(string(data))) == 0 {
		return fmt.Errorf("--containerfile %s: empty", f.containerfile)
	}
	c.Containerfile, c.ContainerfileName = data, f.containerfile
	c.ContextDir = filepath.Dir(f.containerfile)
	return nil
}

// readContext sets and checks the build context (--context, only with
// --containerfile).
func (f *packageFlags) readContext(c *bud.Config) error {
	if f.contextDir != "" {
		if f.containerfile == "" {
			return fmt.Errorf("--context %s: only with --containerfile", f.contextDir)
		}
		c.ContextDir = f.contextDir
	}
	if c.ContextDir == "" {
		return nil
	}
	if fi, err := os.Stat(c.ContextDir); err != nil {
		return fmt.Errorf("--context: %w", err)
	} else if !fi.IsDir() {
		return fmt.Errorf("--context %s: not a directory", c.ContextDir)
	}
	return nil
}

// readBuildArgs parses each --build-arg NAME=VALUE (a name once).
func (f *packageFlags) readBuildArgs(c *bud.Config) error {
	for _, a := range f.buildArgs {
		k, v, ok := strings.Cut(a, "=")
		if !ok || k == "" {
			return fmt.Errorf("--build-arg %q: want NAME=VALUE", a)
		}
		if c.BuildArgs == nil {
			c.BuildArgs = map[string]string{}
		}
		if _, dup := c.BuildArgs[k]; dup {
			return fmt.Errorf("--build-arg %s given twice", k)
		}
		c.BuildArgs[k] = v
	}
	return nil
}

// readSecrets parses each --build-secret id=ID,src=FILE (an id once, a
// regular file).
func (f *packageFlags) readSecrets(c *bud.Config) error {
	for _, s := range f.secrets {
		id, src, err := parseSecret(s)
		if err != nil {
			return err
		}
		if fi, err := os.Stat(src); err != nil {
			return fmt.Errorf("--build-secret id=%s: %w", id, err)
		} else if !fi.Mode().IsRegular() {
			return fmt.Errorf("--build-secret id=%s: %s is not a regular file", id, src)
		}
		if c.Secrets == nil {
			c.Secrets = map[string]string{}
		}
		if _, dup := c.Secrets[id]; dup {
			return fmt.Errorf("--build-secret id=%s given twice", id)
		}
		c.Secrets[id] = src
	}
	return nil
}

// parseSecret splits one --build-secret value into its id and source
// file.
func parseSecret(s string) (id, src string, err error) {
	for _, kv := range strings.Split(s, ",") {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "id":
			id = v
		case "src":
			src = v
		default:
			return "", "", fmt.Errorf("--build-secret %q: unknown key %q (want id=ID,src=FILE)", s, k)
		}
	}
	if !secretID.MatchString(id) || src == "" {
		return "", "", fmt.Errorf("--build-secret %q: want id=ID,src=FILE (ID of letters, digits, '_', '.', '-')", s)
	}
	return id, src, nil
}

// readRepoFiles reads each --repo-file (a *.repo file, or a directory of
// them), each file name once.
func (f *packageFlags) readRepoFiles(c *bud.Config) error {
	for _, p := range f.repoFiles {
		files, err := repoFiles(p)
		if err != nil {
			return err
		}
		for _, file := range files {
			if err := addRepo(c, file); err != nil {
				return err
			}
		}
	}
	return nil
}

// repoFiles is p, or the *.repo files of directory p in order.
func repoFiles(p string) ([]string, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("--repo-file: %w", err)
	}
	if !fi.IsDir() {
		return []string{p}, nil
	}
	files, _ := filepath.Glob(filepath.Join(p, "*.repo"))
	if len(files) == 0 {
		return nil, fmt.Errorf("--repo-file %s: no *.repo file in the directory", p)
	}
	sort.Strings(files)
	return files, nil
}

// addRepo reads one repository file into c.Repos under its base name.
func addRepo(c *bud.Config, file string) error {
	name := filepath.Base(file)
	if !strings.HasSuffix(name, ".repo") {
		return fmt.Errorf("--repo-file %s: want a file whose name ends in .repo", file)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("--repo-file: %w", err)
	}
	if c.Repos == nil {
		c.Repos = map[string][]byte{}
	}
	if _, dup := c.Repos[name]; dup {
		return fmt.Errorf("--repo-file %s: a repository file named %s is given twice", file, name)
	}
	c.Repos[name] = data
	return nil
}

// spec maps the flags onto the build specification's package stage,
// which build always runs: without a Containerfile it runs the pool's
// extensions and kernelType, and nothing when there are none.
func (f *packageFlags) spec() (*pipeline.Packages, error) {
	c, err := f.config(nil, "", nil)
	if err != nil {
		return nil, err
	}
	return &pipeline.Packages{Containerfile: c.Containerfile, ContainerfileName: c.ContainerfileName, ContextDir: c.ContextDir,
		BuildArgs: c.BuildArgs, Secrets: c.Secrets, Repos: c.Repos}, nil
}
