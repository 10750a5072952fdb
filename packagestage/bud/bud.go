//go:build containers_image_openpgp && exclude_graphdriver_btrfs && exclude_graphdriver_devicemapper

package bud

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/docker/distribution/registry/api/errcode"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"go.podman.io/buildah"
	"go.podman.io/image/v5/docker"
	"go.podman.io/storage"

	"github.com/oslayer/oslayer/assemble"
	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/packagestage"
)

// InitReexec must be called first in main and TestMain; when it returns
// true the process was started as one of buildah's helpers and has done its
// work: return at once.
func InitReexec() bool { return buildah.InitReexec() }

// enabled: this binary has the buildah executor.
const enabled = true

// Options say what to build and where the package base goes.
type Options struct {
	Plan *packagestage.Plan
	// Base is the official base pinned by digest as a registry reference
	// ("REG/REPO@sha256:..."); it is pulled only on a cache miss.
	Base string
	// Repository is where the package base is pushed ("REG/REPO"): by
	// digest, and tagged with Plan.Key.Tag().
	Repository string
	// Secrets are build secrets by id ("id" → file); RUN
	// --mount=type=secret,id=ID sees them. They are in no layer, label or
	// history, and not in the key.
	Secrets map[string]string
	// Registry reaches the registries (insecure hosts, timeouts).
	Registry *registry.Options
	// ScratchDir is where the scratch storage is made ("" for the system's
	// temporary directory). It is removed afterwards.
	ScratchDir string
	// StorageDriver is the storage driver of the scratch storage:
	// "overlay" or "vfs", "" for overlay where the kernel and the scratch
	// directory allow it (a test mount succeeds), else vfs. vfs copies the
	// whole tree for every layer: on a base of many big layers it needs
	// many times the base's size on disk.
	StorageDriver string
	// RemoveScratch, when set, is handed the scratch directory (its
	// storage shut down) once the package base is pushed and read back,
	// and removes it: Run returns without waiting for the removal (a few
	// seconds for a base of a gigabyte), which then overlaps with the rest
	// of the build. nil: Run removes it before returning ("cleanup" phase).
	// On an error Run always removes it itself.
	RemoveScratch func(dir string)
	// Log receives buildah's output.
	Log io.Writer
}

// Result reports the package stage.
type Result struct {
	// Hit reports that the tagged package base was used without building.
	Hit bool `json:"hit"`
	// Key is the plan's key; Ref is the package base by digest.
	Key    string  `json:"key"`
	Ref    string  `json:"ref"`
	Digest v1.Hash `json:"digest"`
	// Commands are the instructions of the Containerfile that ran
	// (empty for a hit).
	Commands []string `json:"commands,omitempty"`
	// Layers are the layers on top of the official base (Source: the
	// history's created_by), AddedLayers their number and AddedBytes their
	// compressed size.
	Layers      []assemble.AddedLayer `json:"layers"`
	AddedLayers int                   `json:"addedLayers"`
	AddedBytes  int64                 `json:"addedBytes"`
	Duration    time.Duration         `json:"duration"`
	// StorageDriver is the scratch storage's driver (empty for a hit).
	StorageDriver string `json:"storageDriver,omitempty"`
	// Phases are the stage's steps with their wall and CPU time: lookup,
	// and on a miss storage (opening the scratch storage), pull (the base
	// into it), build (the steps and the commit), push (the package base,
	// by its key's tag), describe (reading it back) and cleanup (removing
	// the scratch storage).
	Phases []assemble.Phase `json:"phases"`
}

// Run looks the package base up by its key and builds and pushes it on a
// miss. A failing step fails naming its Containerfile line, and nothing is
// pushed or tagged. Its errors start with "package stage: ".
func Run(ctx context.Context, o Options) (*Result, error) {
	res, err := lookupOrBuild(ctx, o)
	if err != nil {
		return res, fmt.Errorf("package stage: %w", err)
	}
	return res, nil
}

// lookupOrBuild is Run without its errors' prefix: the stage calls it
// (the build prefixes the stage's errors with its step's name).
func lookupOrBuild(ctx context.Context, o Options) (*Result, error) {
	start := time.Now()
	if o.Plan == nil || o.Base == "" || o.Repository == "" {
		return nil, errors.New("plan, base and repository are required")
	}
	reg := o.Registry
	if reg == nil {
		reg = &registry.Options{}
	}
	log := o.Log
	if log == nil {
		log = io.Discard
	}
	key := o.Plan.Key
	tagRef := o.Repository + ":" + key.Tag()
	res := &Result{Key: key.String()}

	var hit v1.Image
	if err := assemble.TimePhase(&res.Phases, "lookup", func() (err error) {
		hit, err = lookup(ctx, reg, tagRef, key.String())
		return err
	}); err != nil {
		return res, err
	} else if hit != nil {
		res.Hit = true
		if err := describe(ctx, reg, res, o.Repository, hit, o.Plan.BaseDigest, o.Base, o.Plan.Containerfile); err != nil {
			return res, err
		}
		res.Duration = time.Since(start)
		return res, nil
	}

	scratch, err := os.MkdirTemp(o.ScratchDir, "oslayer-packages-")
	if err != nil {
		return res, fmt.Errorf("scratch directory: %w", err)
	}
	removed := false
	defer func() {
		if !removed {
			os.RemoveAll(scratch)
		}
	}()
	if err := runBuild(ctx, o, reg, scratch, log, res); err != nil {
		// The commands that ran, up to the failing one.
		var se *stepErr
		if errors.As(err, &se) && se.step != "" {
			res.Commands = commandsUpTo(o.Plan.Containerfile.Commands(), se.step)
		}
		res.Duration = time.Since(start)
		return res, err
	}
	res.Commands = o.Plan.Containerfile.Commands()
	if err := assemble.TimePhase(&res.Phases, "describe", func() error {
		img, err := remote.Image(mustRef(tagRef), reg.RemoteOptions(ctx)...)
		if err != nil {
			return fmt.Errorf("reading the pushed package base %s: %w", tagRef, registry.ExplainRefused(err, mustRef(tagRef).Context()))
		}
		return describe(ctx, reg, res, o.Repository, img, o.Plan.BaseDigest, o.Base, o.Plan.Containerfile)
	}); err != nil {
		return res, err
	}
	if o.RemoveScratch != nil {
		removed = true
		o.RemoveScratch(scratch)
	} else if err := assemble.TimePhase(&res.Phases, "cleanup", func() error { return os.RemoveAll(scratch) }); err != nil {
		return res, fmt.Errorf("removing the scratch storage: %w", err)
	}
	res.Duration = time.Since(start)
	return res, nil
}

func mustRef(s string) name.Reference {
	r, err := name.ParseReference(s, name.Insecure)
	if err != nil {
		panic(err)
	}
	return r
}

// lookup returns the image tagged ref if it records key, nil if the tag is
// missing or records another key.
func lookup(ctx context.Context, reg *registry.Options, ref, key string) (v1.Image, error) {
	r, err := reg.ParseReference(ref)
	if err != nil {
		return nil, fmt.Errorf("repository: %w", err)
	}
	img, err := remote.Image(r, reg.RemoteOptions(ctx)...)
	if err != nil {
		var te *transport.Error
		if errors.As(err, &te) && te.StatusCode == 404 {
			return nil, nil
		}
		return nil, fmt.Errorf("looking up %s: %w", ref, registry.ExplainRefused(err, r.Context()))
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("%s: config: %w", ref, err)
	}
	if cfg.Config.Labels[packagestage.LabelKey] != key {
		return nil, nil
	}
	return img, nil
}

// describe fills in the digest, reference and added layers of img. A
// layer is named by what the user wrote (cf): buildah commits a stage's
// steps as one layer, attributed to its last instruction (the key LABEL
// for the final stage), so the final stage's layer is named by the user's
// steps, or by every input (Containerfile.Describe) when the stage added
// one layer; an earlier layer (the generated stage's) keeps its history's
// command.
func describe(ctx context.Context, reg *registry.Options, res *Result, repo string, img v1.Image, baseDigest v1.Hash, base string, cf *packagestage.Containerfile) error {
	d, err := img.Digest()
	if err != nil {
		return err
	}
	res.Digest = d
	res.Ref = repo + "@" + d.String()
	br, err := reg.ParseReference(base)
	if err != nil {
		return fmt.Errorf("base: %w", err)
	}
	bimg, err := remote.Image(br, reg.RemoteOptions(ctx)...)
	if err != nil {
		return fmt.Errorf("base %s: %w", base, registry.ExplainRefused(err, br.Context()))
	}
	bm, err := bimg.Manifest()
	if err != nil {
		return err
	}
	m, err := img.Manifest()
	if err != nil {
		return err
	}
	if len(m.Layers) < len(bm.Layers) {
		return fmt.Errorf("%s has fewer layers than its base", res.Ref)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return err
	}
	if len(cfg.RootFS.DiffIDs) != len(m.Layers) {
		return fmt.Errorf("%s: manifest has %d layers but config rootfs.diff_ids has %d", res.Ref, len(m.Layers), len(cfg.RootFS.DiffIDs))
	}
	var created []string
	for _, h := range cfg.History {
		if !h.EmptyLayer {
			created = append(created, h.CreatedBy)
		}
	}
	res.Layers = []assemble.AddedLayer{}
	for i := len(bm.Layers); i < len(m.Layers); i++ {
		l := assemble.AddedLayer{Digest: m.Layers[i].Digest, DiffID: cfg.RootFS.DiffIDs[i], Size: m.Layers[i].Size}
		var history string
		if len(created) == len(m.Layers) && !strings.Contains(created[i], "#(nop) ") {
			history = created[i]
		}
		switch {
		case len(m.Layers)-len(bm.Layers) == 1:
			l.Source = cf.Describe()
		case i == len(m.Layers)-1 && cf.DescribeUser() != "":
			l.Source = cf.DescribeUser()
		case history != "":
			l.Source = history
		default:
			l.Source = cf.Describe()
		}
		res.Layers = append(res.Layers, l)
		res.AddedLayers++
		res.AddedBytes += l.Size
	}
	return nil
}

// policy accepts any image: the base is pinned by digest and verified by
// its digest, not by signature policy.
const policy = `{"default":[{"type":"insecureAcceptAnything"}]}`

const v1MediaTypeOCIManifest = "application/vnd.oci.image.manifest.v1+json"

// refused explains an error of buildah's for ref (a repository or an
// image in it) whose registry refused the credentials.
func refused(err error, ref string) error {
	var ue docker.ErrUnauthorizedForCredentials
	var se docker.UnexpectedHTTPStatusError
	var es errcode.Errors
	switch {
	case errors.As(err, &ue), authCode(err), errors.As(err, &es) && slices.ContainsFunc(es, authCode):
	case errors.As(err, &se) && (se.StatusCode == http.StatusUnauthorized || se.StatusCode == http.StatusForbidden):
	default:
		return err
	}
	r, perr := name.NewRepository(strings.SplitN(ref, "@", 2)[0], name.Insecure)
	if perr != nil {
		return err
	}
	return registry.RefusedError(err, r)
}

// authCode reports whether err is a registry's "unauthorized" or "denied".
func authCode(err error) bool {
	var e errcode.Error
	if errors.As(err, &e) {
		return e.Code == errcode.ErrorCodeUnauthorized || e.Code == errcode.ErrorCodeDenied
	}
	return errors.Is(err, errcode.ErrorCodeUnauthorized) || errors.Is(err, errcode.ErrorCodeDenied)
}

// copyBaseLayers copies the layers of base into repo when they are on
// different registries. buildah keeps layers uncompressed: pushing, it
// reuses a base layer only where the registry already has its compressed
// blob (it mounts it from the base's repository on the same registry) and
// otherwise compresses it anew, to a blob of another digest, and the
// package base would no longer start with the official base's layers.
// With the blobs in repo, buildah finds them there.
func copyBaseLayers(ctx context.Context, reg *registry.Options, base, repo string) error {
	br, err := reg.ParseReference(base)
	if err != nil {
		return fmt.Errorf("base: %w", err)
	}
	tr, err := name.NewRepository(repo, name.Insecure)
	if err != nil {
		return fmt.Errorf("repository %s: %w", repo, err)
	}
	if br.Context().RegistryStr() == tr.RegistryStr() {
		return nil
	}
	img, err := remote.Image(br, reg.RemoteOptions(ctx)...)
	if err != nil {
		return fmt.Errorf("base %s: %w", base, registry.ExplainRefused(err, br.Context()))
	}
	layers, err := img.Layers()
	if err != nil {
		return fmt.Errorf("base %s: %w", base, err)
	}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return fmt.Errorf("base %s: %w", base, err)
		}
		if err := remote.WriteLayer(tr, l, reg.RemoteOptions(ctx)...); err != nil {
			return fmt.Errorf("copying base layer %s to %s: %w", d, repo, registry.ExplainRefused(err, tr))
		}
	}
	return nil
}

// stepRE finds the failing step in buildah's error ("building at STEP
// \"RUN ...\": ...").
var stepRE = regexp.MustCompile(`building at STEP "([^"]*)"`)

// stepError names the Containerfile line of the failing step and adds the
// last lines the step wrote (its stderr and stdout, from output).
func stepError(cf *packagestage.Containerfile, err error, output string) error {
	m := stepRE.FindStringSubmatch(err.Error())
	if m == nil {
		// Not a step (pulling the base, committing): the error says it.
		return &stepErr{msg: err.Error(), err: err}
	}
	out := stepOutput(output)
	if out != "" {
		out = "\n" + out
	}
	step := m[1]
	lines := strings.Split(string(cf.Bytes()), "\n")
	for i := range lines {
		if instructionAt(lines, i) == step {
			return &stepErr{msg: fmt.Sprintf("%s: %s: %v%s", cf.Locate(i+1), firstLine(step), err, out), err: err, step: step}
		}
	}
	return &stepErr{msg: fmt.Sprintf("%v%s", err, out), err: err, step: step}
}

type stepErr struct {
	msg string
	err error
	// step is the failing instruction as buildah names it.
	step string
}

// commandsUpTo is commands up to and including step (all of them when
// step is not found). buildah names a step with its continuation lines
// joined without spaces.
func commandsUpTo(commands []string, step string) []string {
	squash := func(s string) string { return strings.Join(strings.Fields(s), "") }
	for i, c := range commands {
		if squash(c) == squash(step) {
			return commands[:i+1]
		}
	}
	return commands
}

func (e *stepErr) Error() string { return e.msg }
func (e *stepErr) Unwrap() error { return e.err }

// stepOutputLines bounds the output quoted in an error.
const stepOutputLines = 20

// stepOutput returns the last lines of the failing step's output: what
// follows buildah's last "STEP N/M:" line, at most stepOutputLines lines,
// each indented as "  | LINE".
func stepOutput(output string) string {
	if i := strings.LastIndex(output, "STEP "); i >= 0 {
		if j := strings.IndexByte(output[i:], '\n'); j >= 0 {
			output = output[i+j+1:]
		} else {
			output = ""
		}
	}
	lines := strings.Split(strings.TrimRight(output, "\n"), "\n")
	var keep []string
	for _, l := range lines {
		if strings.TrimSpace(l) != "" {
			keep = append(keep, l)
		}
	}
	if len(keep) > stepOutputLines {
		keep = keep[len(keep)-stepOutputLines:]
	}
	for i, l := range keep {
		keep[i] = "  | " + l
	}
	return strings.Join(keep, "\n")
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

// Reset empties the tail.
func (t *tailBuffer) Reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = t.buf[:0]
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// instructionAt joins the instruction starting at line i as buildah
// prints it (continuations joined).
func instructionAt(lines []string, i int) string {
	s := strings.TrimSpace(lines[i])
	for strings.HasSuffix(s, `\`) && i+1 < len(lines) {
		i++
		s = strings.TrimSuffix(s, `\`) + strings.TrimSpace(lines[i])
	}
	return s
}

func firstLine(s string) string {
	if len(s) > 80 {
		return s[:77] + "..."
	}
	return s
}

// execute runs plan for req with buildah (Run, without its prefix: the
// build names the step, "package-stage: ...") and reports it for builder.
func execute(ctx context.Context, c Config, req assemble.PackageRequest, plan *packagestage.Plan, removeScratch func(string)) (*assemble.PackageResult, error) {
	reg := c.Registry
	if reg == nil {
		reg = &registry.Options{}
	}
	r, err := reg.ParseReference(req.Base.Ref)
	if err != nil {
		return nil, fmt.Errorf("base %s: %w", req.Base.Ref, err)
	}
	res, err := lookupOrBuild(ctx, Options{
		Plan:          plan,
		Base:          r.Context().Name() + "@" + req.Base.Digest.String(),
		Repository:    c.Repository,
		Secrets:       c.Secrets,
		Registry:      reg,
		ScratchDir:    c.ScratchDir,
		StorageDriver: c.StorageDriver,
		RemoveScratch: removeScratch,
		Log:           c.Log,
	})
	if err != nil {
		// Build names the step ("package-stage: ..."); the result says
		// how far the stage got.
		var pr *assemble.PackageResult
		if res != nil {
			pr = &assemble.PackageResult{
				Key: res.Key, Tag: c.Repository + ":" + plan.Key.Tag(), Ref: res.Ref, Commands: res.Commands,
				Layers: res.Layers, AddedBytes: res.AddedBytes, Seconds: res.Duration.Seconds(),
				StorageDriver: res.StorageDriver, Phases: res.Phases,
			}
		}
		return pr, err
	}
	return &assemble.PackageResult{
		Hit:           res.Hit,
		Key:           res.Key,
		Tag:           c.Repository + ":" + plan.Key.Tag(),
		Ref:           res.Ref,
		Commands:      res.Commands,
		Layers:        res.Layers,
		AddedBytes:    res.AddedBytes,
		Seconds:       res.Duration.Seconds(),
		StorageDriver: res.StorageDriver,
		Phases:        res.Phases,
	}, nil
}

// openStore opens the scratch storage under scratch with driver, or with
// overlay where it works and vfs otherwise when driver is "".
func openStore(scratch, driver string) (storage.Store, string, error) {
	drivers := []string{driver}
	if driver == "" {
		drivers = []string{"overlay", "vfs"}
	}
	var errs []string
	for _, d := range drivers {
		store, err := storage.GetStore(storage.StoreOptions{
			RunRoot:         filepath.Join(scratch, "run-"+d),
			GraphRoot:       filepath.Join(scratch, "root-"+d),
			GraphDriverName: d,
		})
		if err == nil {
			return store, d, nil
		}
		errs = append(errs, d+": "+err.Error())
	}
	return nil, "", fmt.Errorf("storage: %s", strings.Join(errs, "; "))
}

// writeAuthFile writes the credentials reg's keychain has for the
// registries of refs to a podman auth.json in dir and returns its path.
// Each entry is keyed by the registry's host and port, as containers/image
// looks it up. An identity token goes with an "auth" of the user name and
// an empty password: containers/image ignores an entry without "auth".
func writeAuthFile(dir string, reg *registry.Options, refs ...string) (string, error) {
	kc := reg.Keychain
	if kc == nil {
		kc = authn.DefaultKeychain
	}
	type entry struct {
		Auth          string `json:"auth"`
		IdentityToken string `json:"identitytoken,omitempty"`
	}
	b64 := func(user, pass string) string { return base64.StdEncoding.EncodeToString([]byte(user + ":" + pass)) }
	auths := map[string]entry{}
	for _, ref := range refs {
		r, err := name.NewRepository(strings.SplitN(ref, "@", 2)[0], name.Insecure)
		if err != nil {
			return "", fmt.Errorf("%s: %w", ref, err)
		}
		a, err := kc.Resolve(r.Registry)
		if err != nil {
			return "", fmt.Errorf("credentials for %s: %w", r.RegistryStr(), err)
		}
		cfg, err := a.Authorization()
		if err != nil {
			return "", fmt.Errorf("credentials for %s: %w", r.RegistryStr(), err)
		}
		switch {
		case cfg.IdentityToken != "":
			auths[r.RegistryStr()] = entry{Auth: b64(cfg.Username, ""), IdentityToken: cfg.IdentityToken}
		case cfg.Auth != "":
			auths[r.RegistryStr()] = entry{Auth: cfg.Auth}
		case cfg.Username != "" || cfg.Password != "":
			auths[r.RegistryStr()] = entry{Auth: b64(cfg.Username, cfg.Password)}
		}
	}
	b, err := json.Marshal(map[string]any{"auths": auths})
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, "auth.json")
	return p, os.WriteFile(p, b, 0o600)
}

var quietLogrus sync.Once

// noiseRE matches what buildah's chroot runtime writes on stderr for a
// failing step at every level of its process chain ("subprocess exited
// with status 3", twice): the step's error says how it exited.
var noiseRE = regexp.MustCompile(`^subprocess exited (with status \d+|on \w+)$`)

// noiseFilter passes the steps' output on line by line, without noiseRE's
// lines.
type noiseFilter struct {
	mu      sync.Mutex
	w       io.Writer
	pending []byte
}

func (f *noiseFilter) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pending = append(f.pending, p...)
	for {
		i := bytes.IndexByte(f.pending, '\n')
		if i < 0 {
			break
		}
		line := f.pending[:i+1]
		if !noiseRE.Match(bytes.TrimRight(line, "\r\n")) {
			if _, err := f.w.Write(line); err != nil {
				return len(p), err
			}
		}
		f.pending = f.pending[i+1:]
	}
	// A line without its end yet is kept, within bounds.
	if len(f.pending) > 64<<10 {
		_, err := f.w.Write(f.pending)
		f.pending = f.pending[:0]
		return len(p), err
	}
	return len(p), nil
}

// Flush writes a last line without its end.
func (f *noiseFilter) Flush() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.pending) > 0 && !noiseRE.Match(f.pending) {
		_, _ = f.w.Write(f.pending)
	}
	f.pending = nil
}
