// Package fleet builds many pools' images in one process: a plan (YAML)
// lists defaults and clusters, each with pools; every pool is one
// pipeline specification, prepared through one pipeline.Cache for the run
// and grouped by plan identity (pools of one identity are one image), and
// the pools share what they can share (the resolved base and its index,
// the registry credentials and connections, the imageRef files read for
// rendering, the signing key). It calls nothing below pipeline.
//
// A plan:
//
//	defaults:                      # inherited by every cluster and pool
//	  base: quay.io/fedora/fedora-coreos@sha256:...
//	  target: registry.example.com/os/{cluster}/{pool}:latest
//	  signKey: cosign.key
//	  preflight: {fatalWarnings: true}
//	clusters:
//	- name: prod-eu1
//	  arch: arm64                  # a cluster overrides the defaults
//	  pools:
//	  - name: worker
//	    osc: [prod-eu1/worker-osc.yaml]
//	  - name: infra
//	    machineConfig: [prod-eu1/mcs/]
//
// Scalars (base, target, arch, signKey, secrets, ...) are inherited and
// overridden by the innermost level that sets them; lists (osc,
// machineConfig, machineConfigPool, allowTopLevel, preflight.skip,
// preflight.allowSecrets) add up, outermost first. In target, {cluster} and
// {pool} are replaced by the names. Relative paths are relative to the
// plan's directory.
//
// Load validates the whole plan before anything is built and reports every
// error, each naming its place in the plan ("clusters[3].pools[1].base").
package fleet

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/pipeline"
	"github.com/oslayer/oslayer/pipeline/settings"
)

// MaxPlanSize bounds the plan file.
const MaxPlanSize = 64 << 20

// Plan is a fleet: defaults and clusters.
type Plan struct {
	Defaults Settings  `json:"defaults"`
	Clusters []Cluster `json:"clusters"`
}

// Cluster is a named group of pools with its own settings.
type Cluster struct {
	Name string `json:"name"`
	Settings
	Pools []PoolSpec `json:"pools"`
}

// PoolSpec is one pool as the plan writes it.
type PoolSpec struct {
	Name string `json:"name"`
	Settings
}

// Settings are what a level of the plan may set; unset fields inherit.
type Settings struct {
	// Inputs: Gardener OSCs (or node-agent Secret manifests),
	// MachineConfig files or directories, MachineConfigPool files.
	OSC               []string `json:"osc,omitempty"`
	MachineConfig     []string `json:"machineConfig,omitempty"`
	MachineConfigPool []string `json:"machineConfigPool,omitempty"`
	// Secrets is the directory of Secret manifests for Gardener secretRef files.
	Secrets string `json:"secrets,omitempty"`
	// Base is the base image ("" for MachineConfig pools: their osImageURL).
	Base string `json:"base,omitempty"`
	// Target is REG/REPO[:TAG] or oci:DIR[:TAG]; {cluster} and {pool}
	// are replaced.
	Target string `json:"target,omitempty"`
	// Arch is one architecture, a list ("amd64,arm64": one OCI index of
	// an image per platform, as oslayer build --arch) or "all" (every
	// platform of the base's index).
	Arch string `json:"arch,omitempty"`
	// SignKey is a cosign key file (or Secret manifest); empty: unsigned.
	SignKey             string `json:"signKey,omitempty"`
	SignKeyPasswordFile string `json:"signKeyPasswordFile,omitempty"`
	// SignReferrers also attaches the signature as an OCI 1.1 referrer;
	// SignIdentity is, for an OCI layout target, the repository nodes
	// pull the image from (oslayer build --sign-referrers,
	// --sign-identity).
	SignReferrers *bool  `json:"signReferrers,omitempty"`
	SignIdentity  string `json:"signIdentity,omitempty"`
	// Settings are the build settings every front-end writes the same
	// way: baseIndex, preflight, bakeSecrets, strict, allowTopLevel.
	settings.Settings `json:",inline"`
}

// Pool is one pool with every setting resolved.
type Pool struct {
	Cluster string `json:"cluster"`
	Name    string `json:"pool"`
	// Path is the pool's place in the plan ("clusters[0].pools[1]").
	Path string `json:"path"`
	// Index is the pool's position in the plan (0-based, across clusters).
	Index int `json:"-"`
	Settings
}

// ID is "cluster/pool".
func (p *Pool) ID() string { return p.Cluster + "/" + p.Name }

// Errors are every problem of a plan, each naming its place.
type Errors []error

func (e Errors) Error() string {
	s := make([]string, len(e))
	for i, err := range e {
		s[i] = err.Error()
	}
	return fmt.Sprintf("plan has %d error(s):\n  %s", len(e), strings.Join(s, "\n  "))
}

// Unwrap lets errors.Is and errors.As see each error.
func (e Errors) Unwrap() []error { return e }

// Load reads, resolves and validates the plan at path.
func Load(path string) ([]Pool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil {
		return nil, fmt.Errorf("plan %s: %w", path, err)
	} else if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("plan %s: not a regular file", path)
	} else if st.Size() > MaxPlanSize {
		return nil, fmt.Errorf("plan %s: %d bytes, more than %d", path, st.Size(), MaxPlanSize)
	}
	data := make([]byte, 0, 4096)
	buf := make([]byte, 64<<10)
	for {
		n, err := f.Read(buf)
		data = append(data, buf[:n]...)
		if err != nil {
			break
		}
	}
	return Parse(data, filepath.Dir(path), path)
}

// Parse decodes a plan (YAML or JSON), resolves inheritance and relative
// paths (against dir) and validates every pool; name is the plan's name in
// errors.
func Parse(data []byte, dir, name string) ([]Pool, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("plan %s: %w", name, err)
	}
	var generic any
	if err := json.Unmarshal(js, &generic); err != nil {
		return nil, fmt.Errorf("plan %s: %w", name, err)
	}
	var errs Errors
	checkKeys("", generic, reflect.TypeOf(Plan{}), &errs)
	if len(errs) > 0 {
		return nil, fmt.Errorf("plan %s: %w", name, errs)
	}
	var p Plan
	if err := json.Unmarshal(js, &p); err != nil {
		return nil, fmt.Errorf("plan %s: %w", name, err)
	}
	pools, errs := p.resolve(dir)
	if len(errs) > 0 {
		return nil, fmt.Errorf("plan %s: %w", name, errs)
	}
	return pools, nil
}

// checkKeys reports every key of v that t (a struct, slice or pointer of
// one) has no JSON field for, and values of the wrong kind, with its path.
func checkKeys(path string, v any, t reflect.Type, errs *Errors) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	at := func(p string) string {
		if p == "" {
			return "the plan"
		}
		return p
	}
	if v == nil {
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			*errs = append(*errs, fmt.Errorf("%s: want a mapping", at(path)))
			return
		}
		fields := map[string]reflect.Type{}
		structFields(t, fields)
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			sub := k
			if path != "" {
				sub = path + "." + k
			}
			ft, ok := fields[k]
			if !ok {
				*errs = append(*errs, fmt.Errorf("%s: unknown field", sub))
				continue
			}
			checkKeys(sub, m[k], ft, errs)
		}
	case reflect.Slice:
		l, ok := v.([]any)
		if !ok {
			*errs = append(*errs, fmt.Errorf("%s: want a list", at(path)))
			return
		}
		for i, e := range l {
			checkKeys(fmt.Sprintf("%s[%d]", path, i), e, t.Elem(), errs)
		}
	case reflect.String:
		if _, ok := v.(string); !ok {
			*errs = append(*errs, fmt.Errorf("%s: want a string", at(path)))
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			*errs = append(*errs, fmt.Errorf("%s: want true or false", at(path)))
		}
	}
}

func structFields(t reflect.Type, out map[string]reflect.Type) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Anonymous {
			structFields(f.Type, out)
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out[name] = f.Type
		}
	}
}

var knownArch = map[string]bool{"amd64": true, "arm64": true, "ppc64le": true, "s390x": true}

var nameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$`)

// resolve applies inheritance and validates; every error names its path.
func (p *Plan) resolve(dir string) ([]Pool, Errors) {
	var errs Errors
	add := func(path, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", path, fmt.Sprintf(format, args...)))
	}
	p.Defaults.check("defaults", dir, add)
	if len(p.Clusters) == 0 {
		add("clusters", "no clusters")
	}
	var pools []Pool
	clusters := map[string]string{}
	targets := map[string]string{}
	for ci := range p.Clusters {
		c := &p.Clusters[ci]
		cpath := fmt.Sprintf("clusters[%d]", ci)
		if !nameRE.MatchString(c.Name) {
			add(cpath+".name", "%q: want a lower-case name (letters, digits, '.', '_', '-'; at most 63)", c.Name)
		} else if prev, ok := clusters[c.Name]; ok {
			add(cpath+".name", "%q is also the name of %s", c.Name, prev)
		} else {
			clusters[c.Name] = cpath
		}
		c.Settings.check(cpath, dir, add)
		if len(c.Pools) == 0 {
			add(cpath+".pools", "no pools")
		}
		names := map[string]string{}
		for pi := range c.Pools {
			ps := &c.Pools[pi]
			ppath := fmt.Sprintf("%s.pools[%d]", cpath, pi)
			if !nameRE.MatchString(ps.Name) {
				add(ppath+".name", "%q: want a lower-case name (letters, digits, '.', '_', '-'; at most 63)", ps.Name)
			} else if prev, ok := names[ps.Name]; ok {
				add(ppath+".name", "%q is also the name of %s", ps.Name, prev)
			} else {
				names[ps.Name] = ppath
			}
			ps.Settings.check(ppath, dir, add)
			s := p.Defaults.merge(c.Settings).merge(ps.Settings)
			pool := Pool{Cluster: c.Name, Name: ps.Name, Path: ppath, Index: len(pools), Settings: s}
			pool.Target = strings.NewReplacer("{cluster}", c.Name, "{pool}", ps.Name).Replace(s.Target)
			pool.validate(add)
			if pool.Target != "" {
				key := pool.Target
				if !registry.IsLayout(key) {
					if name, err := pipeline.TargetName(key); err == nil {
						key = name
					}
				}
				if prev, ok := targets[key]; ok {
					add(ppath+".target", "%s is also the target of %s", pool.Target, prev)
				} else {
					targets[key] = ppath
				}
			}
			pools = append(pools, pool)
		}
	}
	return pools, errs
}

// addFunc records a problem at a plan path.
type addFunc func(path, format string, args ...any)

// check validates what one level sets and makes its paths absolute.
func (s *Settings) check(path, dir string, add func(path, format string, args ...any)) {
	s.checkFiles(path, dir, add)
	s.checkBase(path, dir, add)
	if registry.IsLayout(s.Target) {
		if l, tag, err := registry.SplitLayout(s.Target); err == nil && !filepath.IsAbs(l) {
			s.Target = registry.LayoutPrefix + filepath.Join(dir, l)
			if tag != "" {
				s.Target += ":" + tag
			}
		}
	}
	s.checkArch(path, add)
	s.checkSettings(path, add)
}

// checkFiles makes the input, secrets and key paths absolute against dir
// and checks they exist.
func (s *Settings) checkFiles(path, dir string, add addFunc) {
	files := func(field string, l []string, wantDir int) {
		for i := range l {
			fp := fmt.Sprintf("%s.%s[%d]", path, field, i)
			l[i] = checkPath(fp, dir, l[i], wantDir, add)
		}
	}
	files("osc", s.OSC, 0)
	files("machineConfig", s.MachineConfig, -1)
	files("machineConfigPool", s.MachineConfigPool, 0)
	if s.Secrets != "" {
		s.Secrets = checkPath(path+".secrets", dir, s.Secrets, 1, add)
	}
	if s.SignKey != "" {
		s.SignKey = checkPath(path+".signKey", dir, s.SignKey, 0, add)
	}
	if s.SignKeyPasswordFile != "" {
		s.SignKeyPasswordFile = checkPath(path+".signKeyPasswordFile", dir, s.SignKeyPasswordFile, 0, add)
	}
}

// checkBase checks the base reference; a layout's directory is made
// absolute against dir.
func (s *Settings) checkBase(path, dir string, add addFunc) {
	if s.Base == "" {
		return
	}
	if !registry.IsLayout(s.Base) {
		if _, err := (&registry.Options{}).ParseReference(s.Base); err != nil {
			add(path+".base", "%v", err)
		}
		return
	}
	l, err := registry.ParseLayout(s.Base)
	if err != nil {
		add(path+".base", "%v", err)
		return
	}
	d := checkPath(path+".base", dir, l.Dir, 1, add)
	s.Base = registry.LayoutPrefix + d + strings.TrimPrefix(s.Base, registry.LayoutPrefix+l.Dir)
}

// checkArch checks arch: one known architecture, a list of them or all.
func (s *Settings) checkArch(path string, add addFunc) {
	if s.Arch == "" {
		return
	}
	arch, err := pipeline.ParsePlatforms(s.Arch)
	if err != nil {
		add(path+".arch", "%v", err)
		return
	}
	for _, a := range arch.Normalized() {
		if a != pipeline.ArchAll && !knownArch[a] {
			add(path+".arch", "%q: want one of amd64, arm64, ppc64le, s390x (or x86_64, aarch64), a list of them (amd64,arm64) or all", a)
		}
	}
}

// checkSettings checks the build settings this level sets, as the
// pipeline does (the layer limits of several levels are the pool's).
func (s *Settings) checkSettings(path string, add addFunc) {
	var pe *pipeline.Error
	for _, e := range unjoin(pipeline.CheckSettings(s.Settings)) {
		if errors.As(e, &pe) && pe.Field != "" {
			add(path+"."+pe.Field, "%v", pe.Err)
		} else {
			add(path, "%v", e)
		}
	}
}

// checkPath makes p absolute against dir and checks it exists: a file
// (wantDir 0), a directory (1) or either (-1).
func checkPath(field, dir, p string, wantDir int, add func(path, format string, args ...any)) string {
	if p == "" {
		add(field, "empty path")
		return p
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(dir, p)
	}
	st, err := os.Stat(p)
	switch {
	case err != nil:
		add(field, "%v", err)
	case wantDir == 1 && !st.IsDir():
		add(field, "%s: not a directory", p)
	case wantDir == 0 && !st.Mode().IsRegular():
		add(field, "%s: not a regular file", p)
	}
	return p
}

// merge returns s with what o sets on top: scalars override, lists add up.
func (s Settings) merge(o Settings) Settings {
	cat := func(a, b []string) []string {
		if len(b) == 0 {
			return a
		}
		return append(append([]string(nil), a...), b...)
	}
	str := func(a, b string) string {
		if b != "" {
			return b
		}
		return a
	}
	boolp := func(a, b *bool) *bool {
		if b != nil {
			return b
		}
		return a
	}
	return Settings{
		OSC:                 cat(s.OSC, o.OSC),
		MachineConfig:       cat(s.MachineConfig, o.MachineConfig),
		MachineConfigPool:   cat(s.MachineConfigPool, o.MachineConfigPool),
		Secrets:             str(s.Secrets, o.Secrets),
		Base:                str(s.Base, o.Base),
		Target:              str(s.Target, o.Target),
		Arch:                str(s.Arch, o.Arch),
		SignKey:             str(s.SignKey, o.SignKey),
		SignKeyPasswordFile: str(s.SignKeyPasswordFile, o.SignKeyPasswordFile),
		SignReferrers:       boolp(s.SignReferrers, o.SignReferrers),
		SignIdentity:        str(s.SignIdentity, o.SignIdentity),
		Settings:            s.Settings.Inherit(o.Settings),
	}
}

// validate checks what only the resolved pool can tell.
func (p *Pool) validate(add func(path, format string, args ...any)) {
	if len(p.OSC) == 0 && len(p.MachineConfig) == 0 && len(p.MachineConfigPool) == 0 {
		add(p.Path, "no inputs: give osc, machineConfig or machineConfigPool (here or inherited)")
	}
	if p.Base == "" && len(p.MachineConfig) == 0 && len(p.MachineConfigPool) == 0 {
		add(p.Path+".base", "no base: give base (here or inherited); only MachineConfig pools may take their osImageURL")
	}
	switch {
	case p.Target == "":
		add(p.Path+".target", "no target: give target (here or inherited), e.g. registry.example.com/os/{cluster}/{pool}:latest")
	case registry.IsLayout(p.Target):
		if _, _, err := registry.SplitLayout(p.Target); err != nil {
			add(p.Path+".target", "%v", err)
		}
	default:
		if _, err := pipeline.TargetName(p.Target); err != nil {
			add(p.Path+".target", "%v", err)
		}
	}
	if p.SignKeyPasswordFile != "" && p.SignKey == "" {
		add(p.Path+".signKeyPasswordFile", "needs signKey")
	}
	if (p.SignIdentity != "" || isTrue(p.SignReferrers)) && p.SignKey == "" {
		add(p.Path+".signKey", "signIdentity and signReferrers need signKey")
	}
	// What only the merged pool can tell (the layer limits of several
	// levels, signIdentity with the target); check reported the rest at
	// the level that sets it.
	spec, err := p.spec(Options{}, false)
	err = errors.Join(err, spec.Check())
	var pe *pipeline.Error
	for _, e := range unjoin(err) {
		switch {
		case !errors.As(e, &pe):
			add(p.Path, "%v", e)
		case pe.Field == "preflight.warnLayers":
			add(p.Path+".preflight.warnLayers", "%v", pe.Err)
		case pe.Field == "signing.identity":
			add(p.Path+".signIdentity", "%v", pe.Err)
		}
	}
}

// unjoin lists the errors err joins, and those they join (err itself
// when it joins none).
func unjoin(err error) []error {
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		if err == nil {
			return nil
		}
		return []error{err}
	}
	var out []error
	for _, e := range j.Unwrap() {
		out = append(out, unjoin(e)...)
	}
	return out
}

// Spec maps the resolved pool onto the build specification: osc,
// machineConfig, machineConfigPool and secrets onto Inputs (with the
// run's SOURCE_DATE_EPOCH and imageRef bounds), base, arch and target onto
// the fields of those names, the build settings (bakeSecrets, strict,
// allowTopLevel, baseIndex, preflight) with pipeline's one mapping
// (Spec.SetSettings), the run's registry flags onto Registry and its
// cache onto IndexCacheDir, signKey, signKeyPasswordFile (else the run's password),
// signReferrers and signIdentity onto Signing. A fleet runs no package
// stage (Absent). It reads the signing key.
func (p *Pool) Spec(o Options) (pipeline.Spec, error) { return p.spec(o, true) }

// spec is Spec; without readKey the signing key is not read (Signing.Key
// nil), for checking the plan.
func (p *Pool) spec(o Options, readKey bool) (pipeline.Spec, error) {
	arch, _ := pipeline.ParsePlatforms(p.Arch) // checked by Load
	s := pipeline.Spec{
		Inputs: pipeline.Inputs{
			Pool: p.Name, OSCs: p.OSC, MachineConfigs: p.MachineConfig, MachineConfigPools: p.MachineConfigPool,
			SecretsDir: p.Secrets, Epoch: o.Epoch, ImageRefs: &pipeline.ImageRefs{Budget: o.ImageBudget, Timeout: o.ImageTimeout},
		},
		Base: p.Base, Arch: arch, Target: p.Target, Registry: o.Registry, IndexCacheDir: o.IndexCacheDir,
	}
	if err := s.SetSettings(p.Settings.Settings); err != nil {
		return s, err
	}
	if p.SignKey != "" {
		var km *pipeline.KeyMaterial
		if readKey {
			var err error
			if km, err = pipeline.ReadKey(p.SignKey); err != nil {
				return s, &pipeline.Error{Step: pipeline.StepSign, Err: fmt.Errorf("%s: %w", pipeline.StepSign, err), Input: true}
			}
		}
		pass := pipeline.Password(o.Password)
		if p.SignKeyPasswordFile != "" {
			pass = pipeline.PasswordFile(p.SignKeyPasswordFile)
		}
		s.Signing = &pipeline.Signing{Key: km, Password: pass, Referrers: isTrue(p.SignReferrers), Identity: p.SignIdentity}
	}
	return s, nil
}
