// Package machineconfig decodes OpenShift MachineConfigs
// (machineconfiguration.openshift.io/v1) into a model.Config, merging them the
// way the Machine Config Operator renders a pool.
//
// Inputs are files or directories (walked recursively for *.yaml, *.yml and
// *.json, in lexical order; other files are skipped). A file may hold several
// YAML documents, and a List or MachineConfigList holds items. Documents of
// another kind are ignored with a warning. A pool is selected by the role
// label (Options.Pool) or by a MachineConfigPool's spec.machineConfigSelector
// (Options.MachineConfigPool, see LoadPool).
//
// Merging follows the MCO's MergeMachineConfigs
// (openshift/machine-config-operator @ 7ff337a4ffac8e7562692181178ede61e4b2eec5,
// pkg/controller/common/helpers.go): the selected MachineConfigs labelled
// with the worker role come first, then the others, each group sorted by
// metadata.name; their Ignition configs are merged in that order with
// Ignition's own merge (a later config wins per file, directory or link
// path and per unit name; unit fields and drop-ins merge by name), with the
// MCO's fix that a later file without compression does not inherit an
// earlier one's "gzip". kernelArguments accumulate in order without
// de-duplication (MCO keeps repeats, they can be meaningful); extensions
// accumulate with exact repeats dropped; kernelType is realtime or
// 64k-pages when any MachineConfig sets it (the last one), "default" never
// overrides; osImageURL: the last non-empty value of a MachineConfig
// without the generated-by-controller-version annotation wins.
//
// spec.config is parsed and validated with github.com/coreos/ignition/v2/config
// (spec 3.0 to 3.5, translated to the newest); spec 2.0 to 2.2 is parsed
// and converted as the MCO converts it (see parseSpec2); validation errors
// are reported with the MachineConfig's name.
//
// Owners: numeric ids are kept; user and group names resolve through the
// base image's passwd and group files (Options.Base) as ignition-apply
// resolves them in the image root; without a base tree only root and core
// resolve, reported as assumed.
//
// Representation: files (data URLs, gzip compression, mode default 0644,
// user/group as above), directories (mode default 0755), links
// (symbolic or hard) and units (contents, enabled, mask, drop-ins) become
// model items. The "overwrite" flag has no meaning in an image and is
// ignored. Not representable, reported as model.Runtime: files with
// "append", the credentials the platform delivers itself (credentials.go),
// passwd users and groups (SSH keys live under /var/home), fips,
// storage disks/raid/filesystems/luks, Ignition kernelArguments. Remote
// content (http, https, s3, gs, tftp, arn URLs) is an error. A
// verification.hash is checked against the decompressed content, as Ignition
// does.
package machineconfig

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/coreos/go-semver/semver"
	ign "github.com/coreos/ignition/v2/config"
	ignexp "github.com/coreos/ignition/v2/config/v3_6_experimental"
	igntypes "github.com/coreos/ignition/v2/config/v3_6_experimental/types"
	"github.com/coreos/vcontext/report"
	mcfgv1 "github.com/openshift/api/machineconfiguration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/oslayer/oslayer/internal/field"
	"github.com/oslayer/oslayer/internal/inputfile"
	"github.com/oslayer/oslayer/sources/model"
)

// Kind is the document kind of a MachineConfig.
const Kind = "MachineConfig"

// APIVersion is the MachineConfig API group/version.
const APIVersion = "machineconfiguration.openshift.io/v1"

// GeneratedByAnnotation marks MachineConfigs a controller generated; the
// MCO ignores their osImageURL.
const GeneratedByAnnotation = "machineconfiguration.openshift.io/generated-by-controller-version"

// RoleLabel selects the pool of a MachineConfig.
const RoleLabel = "machineconfiguration.openshift.io/role"

// Runtime reasons.
const (
	ReasonAppend  = "Ignition append extends a file on the node; an image can only hold whole files"
	ReasonPasswd  = "users, groups and SSH keys live in /etc/passwd and /var/home; they are managed on the node, not in an image"
	ReasonFIPS    = "FIPS mode is a boot-time setting applied on the node (fips=1 kernel argument and crypto policy), not image content"
	ReasonStorage = "disks, RAID, filesystems and LUKS are set up by Ignition at first boot, not by an image"
	ReasonIgnKarg = "Ignition kernelArguments are applied by Ignition at first boot; use spec.kernelArguments"
)

type doc struct {
	path   string
	index  int // document number inside the file, from 1
	raw    []byte
	mc     mcfgv1.MachineConfig
	digest string
}

func (d doc) where() string {
	if d.index > 1 {
		return fmt.Sprintf("%s (document %d)", d.path, d.index)
	}
	return d.path
}

// Options select the pool's MachineConfigs and resolve what the base
// image knows.
type Options struct {
	// Pool selects MachineConfigs labelled RoleLabel=Pool, the shortcut for
	// a pool whose machineConfigSelector is that one label. Empty (and no
	// MachineConfigPool) selects every MachineConfig.
	Pool string
	// MachineConfigPool, when set, selects MachineConfigs with its
	// spec.machineConfigSelector as the MCO does; Pool is then ignored.
	MachineConfigPool *mcfgv1.MachineConfigPool
	// PoolSource names where MachineConfigPool was read from, for messages.
	PoolSource string
	// Base is the base image's root tree; user and group names resolve
	// through its passwd and group files. Nil: only the names of the
	// Fedora CoreOS/RHCOS defaults resolve (reported as assumed).
	Base fs.FS
	// BaseName names the base in messages (default "the base image").
	BaseName string
	// BakeCredential reports whether a credential file (CredentialPaths)
	// at this node path is baked; nil or false: it is runtime-delivered.
	BakeCredential func(nodePath string) bool

	poolPath, poolDigest string // the pool document, for the inputs
}

// Load reads MachineConfig files and directories at paths, selects those of
// the pool (see Options) and merges them as the MCO renders a pool. Its
// errors are bad input (model.InputError: a file missing or not parsing, a
// wrong kind, a field value refused) but a context's end: the files are
// all there is to read.
func Load(ctx context.Context, paths []string, opts Options) (*model.Config, error) {
	c, err := load(ctx, paths, opts)
	return c, model.MarkInput(err)
}

func load(ctx context.Context, paths []string, opts Options) (*model.Config, error) {
	cfg := &model.Config{}
	var docs []doc
	for _, p := range paths {
		st, err := inputfile.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("MachineConfig input: %w", err)
		}
		var files []string
		if st.IsDir() {
			err := filepath.WalkDir(p, func(fp string, d fs.DirEntry, err error) error {
				if err != nil {
					return err
				}
				if d.IsDir() {
					return nil
				}
				switch strings.ToLower(filepath.Ext(fp)) {
				case ".yaml", ".yml", ".json":
					// A pipe, device or socket named like a document
					// is an error, not a read that never ends.
					if !d.Type().IsRegular() {
						if _, err := inputfile.Stat(fp); err != nil {
							return err
						}
					}
					files = append(files, fp)
				}
				return nil
			})
			if err != nil {
				return nil, fmt.Errorf("MachineConfig input: %w", err)
			}
		} else {
			files = []string{p}
		}
		for _, f := range files {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			data, err := inputfile.Read(f)
			if err != nil {
				return nil, fmt.Errorf("MachineConfig input: %w", err)
			}
			ds, warns, err := decodeFile(f, data)
			if err != nil {
				return nil, err
			}
			docs = append(docs, ds...)
			cfg.Warnings = append(cfg.Warnings, warns...)
		}
	}
	return merge(ctx, cfg, docs, opts)
}

// Decode decodes the MachineConfigs in one file's bytes (named path in
// errors and origins), selects pool and merges them: Load for one in-memory
// input, its errors marked as Load's.
func Decode(ctx context.Context, path string, data []byte, opts Options) (*model.Config, error) {
	ds, warns, err := decodeFile(path, data)
	if err != nil {
		return nil, model.MarkInput(err)
	}
	c, err := merge(ctx, &model.Config{Warnings: warns}, ds, opts)
	return c, model.MarkInput(err)
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// decodeFile splits a file into MachineConfig documents.
func decodeFile(path string, data []byte) ([]doc, []string, error) {
	var out []doc
	var warns []string
	for i, d := range model.SplitDocuments(data) {
		where := path
		if i > 0 {
			where = fmt.Sprintf("%s (document %d)", path, i+1)
		}
		tm, err := model.PeekType(d)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %v", where, err)
		}
		switch tm.Kind {
		case Kind:
			mc, err := decodeMC(where, d)
			if err != nil {
				return nil, nil, err
			}
			out = append(out, doc{path: path, index: i + 1, raw: d, mc: mc, digest: sha(d)})
		case "List", "MachineConfigList":
			items, err := listItems(d)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %s: %v", where, tm.Kind, err)
			}
			for j, it := range items {
				iw := fmt.Sprintf("%s items[%d]", where, j)
				itm, err := model.PeekType(it)
				if err != nil {
					return nil, nil, fmt.Errorf("%s: %v", iw, err)
				}
				if itm.Kind != Kind && !(itm.Kind == "" && tm.Kind == "MachineConfigList") {
					warns = append(warns, fmt.Sprintf("%s: ignored: kind %q is not a %s", iw, itm.Kind, Kind))
					continue
				}
				mc, err := decodeMC(iw, it)
				if err != nil {
					return nil, nil, err
				}
				out = append(out, doc{path: path, index: i + 1, raw: it, mc: mc, digest: sha(it)})
			}
		default:
			warns = append(warns, fmt.Sprintf("%s: ignored: kind %q (apiVersion %q) is not a %s", where, tm.Kind, tm.APIVersion, Kind))
		}
	}
	return out, warns, nil
}

func decodeMC(where string, d []byte) (mcfgv1.MachineConfig, error) {
	var mc mcfgv1.MachineConfig
	if err := model.DecodeStrict(d, &mc); err != nil {
		var fe *model.FieldTypeError
		if errors.As(err, &fe) {
			// Located like the other errors: the document, the
			// MachineConfig's name and the field with its item index.
			tm, _ := model.PeekType(d)
			o := model.Origin{Document: where, Kind: Kind, Name: tm.Metadata.Name, Field: fe.Path}
			return mc, fmt.Errorf("%s: %s", o, fe.Problem())
		}
		return mc, fmt.Errorf("%s: %s: %v", where, Kind, err)
	}
	if mc.Kind == "" {
		mc.Kind = Kind
	}
	if mc.APIVersion != "" && mc.APIVersion != APIVersion {
		return mc, fmt.Errorf("%s: %s %s: apiVersion %q, want %s", where, Kind, mc.Name, mc.APIVersion, APIVersion)
	}
	if mc.Name == "" {
		return mc, fmt.Errorf("%s: %s without metadata.name", where, Kind)
	}
	return mc, nil
}

// poolSelector returns the pool's selector and a description of it.
// With a MachineConfigPool it is the pool's spec.machineConfigSelector,
// which the MCO's render controller applies to every MachineConfig
// (openshift/machine-config-operator @ 7ff337a4ffac8e7562692181178ede61e4b2eec5,
// pkg/controller/render/render_controller.go getMachineConfigsForPool): a
// nil or empty selector matches nothing there, so it is an error here.
func poolSelector(opts Options) (labels.Selector, string, error) {
	if p := opts.MachineConfigPool; p != nil {
		where := fmt.Sprintf("MachineConfigPool %s", p.Name)
		if opts.PoolSource != "" {
			where = fmt.Sprintf("%s (MachineConfigPool %s)", opts.PoolSource, p.Name)
		}
		sel, err := metav1.LabelSelectorAsSelector(p.Spec.MachineConfigSelector)
		if err != nil {
			return nil, "", fmt.Errorf("%s: spec.machineConfigSelector: %v", where, err)
		}
		if p.Spec.MachineConfigSelector == nil || sel.Empty() {
			return nil, "", fmt.Errorf("%s: spec.machineConfigSelector is empty: the MCO selects no MachineConfig for such a pool", where)
		}
		return sel, fmt.Sprintf("selected by %s spec.machineConfigSelector %q", where, sel.String()), nil
	}
	if opts.Pool != "" {
		return labels.SelectorFromSet(labels.Set{RoleLabel: opts.Pool}), fmt.Sprintf("labelled %s=%s", RoleLabel, opts.Pool), nil
	}
	return labels.Everything(), "", nil
}

// mcoOrder sorts MachineConfigs the way the MCO's MergeMachineConfigs does
// (openshift/machine-config-operator @ 7ff337a4ffac8e7562692181178ede61e4b2eec5,
// pkg/controller/common/helpers.go): those labelled with the worker role
// first, by name, then all others by name, so that a custom pool's own
// configs override the worker configs it inherits.
func mcoOrder(sel []doc) {
	worker := func(d doc) bool { return d.mc.Labels[RoleLabel] == "worker" }
	sort.SliceStable(sel, func(i, j int) bool {
		if wi, wj := worker(sel[i]), worker(sel[j]); wi != wj {
			return wi
		}
		return sel[i].mc.Name < sel[j].mc.Name
	})
}

// merge selects the documents of the pool and merges them as the MCO does.
func merge(ctx context.Context, cfg *model.Config, docs []doc, opts Options) (*model.Config, error) {
	sel, err := selectPool(cfg, docs, opts)
	if err != nil {
		return nil, err
	}
	if opts.MachineConfigPool != nil {
		cfg.Inputs = append(cfg.Inputs, opts.poolInput())
	}
	mcoOrder(sel)
	own := newOwners(opts.Base, opts.BaseName)
	var merged igntypes.Config
	haveIgn := false
	origins := map[string]model.Origin{}
	var errs []error
	for _, d := range sel {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		ic, ok, err := mergeFields(cfg, d)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !ok {
			continue
		}
		recordOrigins(ic, origins, d.origin)
		if !haveIgn {
			merged, haveIgn = ic, true
		} else {
			merged = mergeIgnition(merged, ic)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if haveIgn {
		if err := convert(cfg, merged, origins, own, opts.BakeCredential); err != nil {
			return nil, err
		}
	}
	for _, w := range own.warnings {
		cfg.Warnings = append(cfg.Warnings, "MachineConfig owners: "+w)
	}
	return model.Merge(cfg)
}

// selectPool returns the MachineConfigs of the pool built (each name
// once; the same name with other content is an error). Without a pool,
// MachineConfigs of several roles are refused: the MCO renders each pool
// on its own.
func selectPool(cfg *model.Config, docs []doc, opts Options) ([]doc, error) {
	selector, what, err := poolSelector(opts)
	if err != nil {
		return nil, err
	}
	if what == "" {
		if err := oneRole(docs); err != nil {
			return nil, err
		}
	}
	var sel []doc
	byName := map[string]doc{}
	for _, d := range docs {
		if !selector.Matches(labels.Set(d.mc.Labels)) {
			continue
		}
		if prev, ok := byName[d.mc.Name]; ok {
			if prev.digest != d.digest {
				return nil, fmt.Errorf("MachineConfig %s is defined twice with different content: %s and %s", d.mc.Name, prev.where(), d.where())
			}
			continue
		}
		byName[d.mc.Name] = d
		sel = append(sel, d)
	}
	if len(sel) == 0 {
		var ignored string
		if len(cfg.Warnings) > 0 {
			ignored = " (" + strings.Join(cfg.Warnings, "; ") + ")"
		}
		if what != "" {
			return nil, fmt.Errorf("no MachineConfig %s among %d MachineConfig(s)%s", what, len(docs), ignored)
		}
		return nil, fmt.Errorf("no MachineConfig found in the inputs%s", ignored)
	}
	return sel, nil
}

// oneRole refuses MachineConfigs of several roles.
func oneRole(docs []doc) error {
	roles := map[string]bool{}
	for _, d := range docs {
		if r := d.mc.Labels[RoleLabel]; r != "" {
			roles[r] = true
		}
	}
	if len(roles) <= 1 {
		return nil
	}
	names := make([]string, 0, len(roles))
	for r := range roles {
		names = append(names, r)
	}
	sort.Strings(names)
	return field.Errorf("the MachineConfigs are for %d roles (%s labelled %s): give %v to say which pool to build; the MCO renders each pool on its own",
		len(names), strings.Join(names, ", "), RoleLabel, field.Name("pool"))
}

// origin names a field of the MachineConfig d.
func (d doc) origin(field string) model.Origin {
	return model.Origin{Document: d.where(), Kind: Kind, Name: d.mc.Name, Field: field}
}

// mergeFields merges what MachineConfig d sets besides its Ignition
// config into cfg, as the MCO renders a pool, and returns its parsed
// Ignition config (ok false: none).
func mergeFields(cfg *model.Config, d doc) (ic igntypes.Config, ok bool, err error) {
	mc := d.mc
	cfg.Inputs = append(cfg.Inputs, model.Input{Path: d.path, Kind: Kind, Name: mc.Name, SHA256: d.digest})
	cfg.KernelArgs = append(cfg.KernelArgs, mc.Spec.KernelArguments...)
	for _, e := range mc.Spec.Extensions {
		if !slices.Contains(cfg.Extensions, e) {
			cfg.Extensions = append(cfg.Extensions, e)
		}
	}
	// The MCO: any MachineConfig setting realtime or 64k-pages sets the
	// kernel type (the last such one); "default" never overrides it.
	var kerr error
	if k := mc.Spec.KernelType; k == "realtime" || k == "64k-pages" {
		cfg.KernelType = k
	} else if k != "" && k != "default" {
		kerr = model.Errorf(d.origin("spec.kernelType"), "", "unknown kernelType %q (want default, realtime or 64k-pages)", k)
	}
	// The MCO takes osImageURL only from MachineConfigs that no
	// controller generated (the rendered config or a user's).
	if mc.Spec.OSImageURL != "" && mc.Annotations[GeneratedByAnnotation] == "" {
		cfg.OSImageURL = mc.Spec.OSImageURL
	}
	if mc.Spec.FIPS {
		cfg.Runtime = append(cfg.Runtime, model.Runtime{Item: "spec.fips", Reason: ReasonFIPS, Origin: d.origin("spec.fips")})
	}
	if mc.Spec.BaseOSExtensionsContainerImage != "" {
		cfg.Warnings = append(cfg.Warnings, fmt.Sprintf("%s: ignored: extensions are installed by a package stage, not from an extensions container", d.origin("spec.baseOSExtensionsContainerImage")))
	}
	ic, ok, warns, err := parseIgnition(mc.Spec.Config.Raw)
	if fe := (*model.FieldTypeError)(nil); errors.As(err, &fe) {
		return ic, false, errors.Join(kerr, model.Errorf(d.origin(fe.Path), "", "invalid Ignition config: %s", fe.Problem()))
	}
	if err != nil {
		return ic, false, errors.Join(kerr, model.Errorf(d.origin("spec.config"), "", "%v", err))
	}
	for _, w := range warns {
		cfg.Warnings = append(cfg.Warnings, fmt.Sprintf("%s: Ignition: %s", d.origin("spec.config"), w))
	}
	return ic, ok, kerr
}

// mergeIgnition merges a later config into the merged one with Ignition's
// merge, with the MCO's compression fix
// (openshift/machine-config-operator @ 7ff337a4ffac8e7562692181178ede61e4b2eec5,
// pkg/controller/common/helpers.go MergeMachineConfigs and
// ignitionMergeSetFilesDefaultCompression): Ignition merges a file's
// compression and its source as separate fields, so a later plain file
// would keep an earlier "gzip". Every file of the later config without a
// compression gets "" (which overrides), and "" is turned back into none
// after the merge.
func mergeIgnition(merged, later igntypes.Config) igntypes.Config {
	empty := ""
	later.Storage.Files = slices.Clone(later.Storage.Files)
	for i := range later.Storage.Files {
		if c := &later.Storage.Files[i].Contents; c.Compression == nil {
			c.Compression = &empty
		}
	}
	out := ignexp.Merge(merged, later)
	for i := range out.Storage.Files {
		if c := &out.Storage.Files[i].Contents; c.Compression != nil && *c.Compression == "" {
			c.Compression = nil
		}
	}
	return out
}

// parseIgnition parses spec.config. ok is false when there is no config
// (absent or null; the MCO skips a nil config). An empty object has no
// ignition.version and is refused, as the MCO's IgnParseWrapper refuses it
// ("invalid version").
// warns are the non-fatal entries of Ignition's validation report (such as
// unused keys).
func parseIgnition(raw []byte) (cfg igntypes.Config, ok bool, warns []string, err error) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || bytes.Equal(t, []byte("null")) {
		return igntypes.Config{}, false, nil, nil
	}
	var stub struct {
		Ignition struct {
			Version *string `json:"version"`
		} `json:"ignition"`
	}
	if err := json.Unmarshal(t, &stub); err != nil {
		return igntypes.Config{}, false, nil, fmt.Errorf("invalid Ignition config: %v", err)
	}
	if stub.Ignition.Version == nil {
		return igntypes.Config{}, false, nil, errors.New("invalid Ignition config: ignition.version is missing")
	}
	v, err := semver.NewVersion(*stub.Ignition.Version)
	if err != nil {
		return igntypes.Config{}, false, nil, fmt.Errorf("invalid Ignition version %q: %v", *stub.Ignition.Version, err)
	}
	if v.Major == 2 {
		c, warns, err := parseSpec2(t)
		return c, err == nil, warns, err
	}
	if v.Major != 3 || v.Minor > 5 {
		return igntypes.Config{}, false, nil, fmt.Errorf("unsupported Ignition version %s (spec 3.0 to 3.5 is supported)", *stub.Ignition.Version)
	}
	c, rpt, err := ign.Parse(t)
	if err != nil {
		// Ignition names a type error by line and column of the JSON it
		// was given; name the field with its item indices instead.
		if fe := model.LocateTypeErrorIn(t, &igntypes.Config{}); fe != nil {
			return igntypes.Config{}, false, nil, &model.FieldTypeError{Path: "spec.config." + fe.Path, Got: fe.Got, Want: fe.Want}
		}
		if r := strings.TrimSpace(rpt.String()); r != "" {
			return igntypes.Config{}, false, nil, fmt.Errorf("invalid Ignition config: %v: %s", err, r)
		}
		return igntypes.Config{}, false, nil, fmt.Errorf("invalid Ignition config: %v", err)
	}
	for _, e := range rpt.Entries {
		if e.Kind != report.Error {
			warns = append(warns, e.String())
		}
	}
	return c, true, warns, nil
}

// recordOrigins notes, for every item of one MachineConfig's Ignition
// config, that this MachineConfig is now its origin (later ones override).
func recordOrigins(c igntypes.Config, o map[string]model.Origin, origin func(string) model.Origin) {
	for i, f := range c.Storage.Files {
		o["path:"+f.Path] = origin(fmt.Sprintf("spec.config.storage.files[%d]", i))
	}
	for i, d := range c.Storage.Directories {
		o["path:"+d.Path] = origin(fmt.Sprintf("spec.config.storage.directories[%d]", i))
	}
	for i, l := range c.Storage.Links {
		o["path:"+l.Path] = origin(fmt.Sprintf("spec.config.storage.links[%d]", i))
	}
	for i, u := range c.Systemd.Units {
		o["unit:"+u.Name] = origin(fmt.Sprintf("spec.config.systemd.units[%d]", i))
		for j, d := range u.Dropins {
			o["dropin:"+u.Name+"/"+d.Name] = origin(fmt.Sprintf("spec.config.systemd.units[%d].dropins[%d]", i, j))
		}
	}
	for i, u := range c.Passwd.Users {
		o["user:"+u.Name] = origin(fmt.Sprintf("spec.config.passwd.users[%d]", i))
	}
	for i, g := range c.Passwd.Groups {
		o["group:"+g.Name] = origin(fmt.Sprintf("spec.config.passwd.groups[%d]", i))
	}
	for i, d := range c.Storage.Disks {
		o["disk:"+d.Device] = origin(fmt.Sprintf("spec.config.storage.disks[%d]", i))
	}
	for i, r := range c.Storage.Raid {
		o["raid:"+r.Name] = origin(fmt.Sprintf("spec.config.storage.raid[%d]", i))
	}
	for i, f := range c.Storage.Filesystems {
		o["fs:"+f.Device] = origin(fmt.Sprintf("spec.config.storage.filesystems[%d]", i))
	}
	for i, l := range c.Storage.Luks {
		o["luks:"+l.Name] = origin(fmt.Sprintf("spec.config.storage.luks[%d]", i))
	}
	if len(c.KernelArguments.ShouldExist)+len(c.KernelArguments.ShouldNotExist) > 0 {
		o["kargs"] = origin("spec.config.kernelArguments")
	}
	if len(c.Ignition.Config.Merge) > 0 || c.Ignition.Config.Replace.Source != nil {
		o["ignconfig"] = origin("spec.config.ignition.config")
	}
}

// convert turns the merged Ignition config into model items.
func convert(cfg *model.Config, c igntypes.Config, origins map[string]model.Origin, own *owners, bake func(string) bool) error {
	v := &converter{cfg: cfg, origins: origins, own: own, bake: bake}
	if o, ok := origins["ignconfig"]; ok && (len(c.Ignition.Config.Merge) > 0 || c.Ignition.Config.Replace.Source != nil) {
		v.fail(model.Errorf(o, "", "ignition.config merge/replace fetches other configs; not supported, inline them instead"))
	}
	for _, f := range c.Storage.Files {
		v.file(f)
	}
	for _, d := range c.Storage.Directories {
		v.dir(d)
	}
	for _, l := range c.Storage.Links {
		v.link(l)
	}
	for _, u := range c.Systemd.Units {
		v.unit(u)
	}
	v.runtime(c)
	return errors.Join(v.errs...)
}

// converter is the state of one convert: the config it fills, where each
// item came from, the owners' names, and the errors found.
type converter struct {
	cfg     *model.Config
	origins map[string]model.Origin
	own     *owners
	bake    func(string) bool // Options.BakeCredential
	errs    []error
}

func (v *converter) fail(err error) { v.errs = append(v.errs, err) }

// file converts a storage.files entry; appended content is delivered at
// runtime.
func (v *converter) file(f igntypes.File) {
	o := v.origins["path:"+f.Path]
	if err := model.ValidatePath(f.Path); err != nil {
		v.fail(model.Errorf(o, "", "%v", err))
		return
	}
	if len(f.Append) > 0 {
		v.cfg.Runtime = append(v.cfg.Runtime, model.Runtime{Item: f.Path, Reason: ReasonAppend, Origin: o})
		return
	}
	data, err := contents(f.Contents)
	if err != nil {
		v.fail(model.Errorf(o, f.Path, "contents: %v", err))
		return
	}
	if v.runtimeCredential(f.Path) {
		v.cfg.Runtime = append(v.cfg.Runtime, model.Runtime{Item: f.Path, Reason: ReasonCredential, SHA256: sha(data), Origin: o})
		return
	}
	uid, gid, err := v.own.resolve(f.User, f.Group)
	if err != nil {
		v.fail(model.Errorf(o, f.Path, "%v", err))
		return
	}
	mode, err := modeOr(f.Mode, 0o644)
	if err != nil {
		v.fail(model.Errorf(o, f.Path, "%v", err))
		return
	}
	v.cfg.Files = append(v.cfg.Files, model.File{Path: f.Path, Mode: mode, UID: uid, GID: gid, Data: data, Ignition: entrySum(f), Origin: o})
}

// entrySum is the SHA-256 of the file entry's JSON: the daemon compares
// entries whole (openshift/machine-config-operator @ 7ff337a4ffac,
// pkg/controller/common/helpers.go CalculateConfigFileDiffs,
// reflect.DeepEqual of the ign3types.File).
func entrySum(f igntypes.File) string {
	data, err := json.Marshal(f)
	if err != nil {
		return ""
	}
	return sha(data)
}

// dir converts a storage.directories entry.
func (v *converter) dir(d igntypes.Directory) {
	o := v.origins["path:"+d.Path]
	if err := model.ValidatePath(d.Path); err != nil {
		v.fail(model.Errorf(o, "", "%v", err))
		return
	}
	uid, gid, err := v.own.resolve(d.User, d.Group)
	if err != nil {
		v.fail(model.Errorf(o, d.Path, "%v", err))
		return
	}
	mode, err := modeOr(d.Mode, 0o755)
	if err != nil {
		v.fail(model.Errorf(o, d.Path, "%v", err))
		return
	}
	v.cfg.Dirs = append(v.cfg.Dirs, model.Dir{Path: d.Path, Mode: mode, UID: uid, GID: gid, Origin: o})
}

// link converts a storage.links entry.
func (v *converter) link(l igntypes.Link) {
	o := v.origins["path:"+l.Path]
	if err := model.ValidatePath(l.Path); err != nil {
		v.fail(model.Errorf(o, "", "%v", err))
		return
	}
	if l.Target == nil || *l.Target == "" {
		v.fail(model.Errorf(o, l.Path, "link without target"))
		return
	}
	t := *l.Target
	if !utf8.ValidString(t) || strings.IndexByte(t, 0) >= 0 {
		v.fail(model.Errorf(o, l.Path, "link target %q: not valid UTF-8 or contains NUL", t))
		return
	}
	hard := l.Hard != nil && *l.Hard
	if hard {
		if err := model.ValidatePath(t); err != nil {
			v.fail(model.Errorf(o, l.Path, "hard link target: %v", err))
			return
		}
	}
	uid, gid, err := v.own.resolve(l.User, l.Group)
	if err != nil {
		v.fail(model.Errorf(o, l.Path, "%v", err))
		return
	}
	v.cfg.Links = append(v.cfg.Links, model.Link{Path: l.Path, Target: t, Hard: hard, UID: uid, GID: gid, Origin: o})
}

// unit converts a systemd.units entry with its drop-ins; a unit with a
// bad drop-in is left out (the error names the drop-in).
func (v *converter) unit(u igntypes.Unit) {
	o := v.origins["unit:"+u.Name]
	if err := model.ValidateUnitName(u.Name); err != nil {
		if len(u.Dropins) > 0 {
			v.fail(model.Errorf(o, "", "drop-ins for unit %q: %v", u.Name, err))
		} else {
			v.fail(model.Errorf(o, "", "%v", err))
		}
		return
	}
	mu := model.Unit{Name: u.Name, Enabled: u.Enabled, Mask: u.Mask != nil && *u.Mask, Origin: o}
	if u.Contents != nil {
		s := *u.Contents
		if len(s) > model.MaxContentSize {
			v.fail(model.Errorf(o, "", "unit %s: contents of %d bytes exceed the limit of %d bytes", u.Name, len(s), model.MaxContentSize))
			return
		}
		mu.Contents = &s
	}
	ok := true
	for _, d := range u.Dropins {
		do := v.origins["dropin:"+u.Name+"/"+d.Name]
		if err := model.ValidateDropInName(d.Name); err != nil {
			v.fail(model.Errorf(do, "", "unit %s: %v", u.Name, err))
			ok = false
			continue
		}
		s := ""
		if d.Contents != nil {
			s = *d.Contents
		}
		mu.DropIns = append(mu.DropIns, model.DropIn{Name: d.Name, Contents: s, Origin: do})
	}
	if ok {
		v.cfg.Units = append(v.cfg.Units, mu)
	}
}

// runtime records what only the node can do at runtime: users and groups,
// disks, RAID, filesystems, LUKS, and Ignition's kernel arguments.
func (v *converter) runtime(c igntypes.Config) {
	add := func(item, reason, key string) {
		v.cfg.Runtime = append(v.cfg.Runtime, model.Runtime{Item: item, Reason: reason, Origin: v.origins[key]})
	}
	for _, u := range c.Passwd.Users {
		add("passwd.users["+u.Name+"]", ReasonPasswd, "user:"+u.Name)
	}
	for _, g := range c.Passwd.Groups {
		add("passwd.groups["+g.Name+"]", ReasonPasswd, "group:"+g.Name)
	}
	for _, d := range c.Storage.Disks {
		add("storage.disks["+d.Device+"]", ReasonStorage, "disk:"+d.Device)
	}
	for _, r := range c.Storage.Raid {
		add("storage.raid["+r.Name+"]", ReasonStorage, "raid:"+r.Name)
	}
	for _, f := range c.Storage.Filesystems {
		add("storage.filesystems["+f.Device+"]", ReasonStorage, "fs:"+f.Device)
	}
	for _, l := range c.Storage.Luks {
		add("storage.luks["+l.Name+"]", ReasonStorage, "luks:"+l.Name)
	}
	if len(c.KernelArguments.ShouldExist)+len(c.KernelArguments.ShouldNotExist) > 0 {
		add("kernelArguments", ReasonIgnKarg, "kargs")
	}
}

// remoteSchemes are URL schemes Ignition fetches over the network.
var remoteSchemes = []string{"http", "https", "s3", "gs", "tftp", "arn"}

// contents resolves an Ignition resource to bytes: a data URL (optionally
// gzip-compressed), or empty when there is no source.
func contents(r igntypes.Resource) ([]byte, error) {
	if r.Source == nil || *r.Source == "" {
		if r.Compression != nil && *r.Compression != "" {
			return nil, fmt.Errorf("compression %q without a source", *r.Compression)
		}
		return []byte{}, nil
	}
	src := *r.Source
	scheme, _, ok := strings.Cut(src, ":")
	if !ok {
		return nil, fmt.Errorf("source %q is not a URL", truncate(src))
	}
	switch s := strings.ToLower(scheme); {
	case s == "data":
	case slices.Contains(remoteSchemes, s):
		return nil, fmt.Errorf("remote source URL %q: an image can only bake inline data: URLs (fetch the content and inline it)", truncate(src))
	default:
		return nil, fmt.Errorf("unsupported source URL scheme %q in %q", scheme, truncate(src))
	}
	data, err := DecodeDataURL(src, model.MaxContentSize)
	if err != nil {
		return nil, err
	}
	comp := ""
	if r.Compression != nil {
		comp = *r.Compression
	}
	switch comp {
	case "":
	case "gzip":
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("compression gzip: %v", err)
		}
		out, err := io.ReadAll(io.LimitReader(zr, model.MaxContentSize+1))
		if err != nil {
			return nil, fmt.Errorf("compression gzip: %v", err)
		}
		if len(out) > model.MaxContentSize {
			return nil, fmt.Errorf("gzip content exceeds the limit of %d bytes", model.MaxContentSize)
		}
		data = out
	default:
		return nil, fmt.Errorf("unsupported compression %q (want gzip)", comp)
	}
	if err := verify(r.Verification, data); err != nil {
		return nil, err
	}
	return data, nil
}

// verify checks verification.hash ("sha256-HEX" or "sha512-HEX"), which
// Ignition defines over the decompressed content.
func verify(v igntypes.Verification, data []byte) error {
	if v.Hash == nil || *v.Hash == "" {
		return nil
	}
	typ, want, ok := strings.Cut(*v.Hash, "-")
	if !ok {
		return fmt.Errorf("verification.hash %q: want TYPE-HEX", *v.Hash)
	}
	var got []byte
	switch typ {
	case "sha256":
		s := sha256.Sum256(data)
		got = s[:]
	case "sha512":
		s := sha512.Sum512(data)
		got = s[:]
	default:
		return fmt.Errorf("verification.hash %q: unsupported hash type %q", *v.Hash, typ)
	}
	if !strings.EqualFold(hex.EncodeToString(got), want) {
		return fmt.Errorf("verification.hash mismatch: content has %s-%x, want %s", typ, got, *v.Hash)
	}
	return nil
}

func truncate(s string) string {
	if len(s) > 120 {
		return s[:120] + "..."
	}
	return s
}

func modeOr(m *int, def uint32) (uint32, error) {
	if m == nil {
		return def, nil
	}
	if *m < 0 || *m&^0o7777 != 0 {
		return 0, fmt.Errorf("mode %d (%#o) has bits outside 07777", *m, *m)
	}
	return uint32(*m), nil
}
