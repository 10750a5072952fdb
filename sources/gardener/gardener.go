// Package gardener decodes Gardener OperatingSystemConfigs
// (extensions.gardener.cloud/v1alpha1) into a model.Config, reproducing what
// gardener-node-agent would write on a node.
//
// Accepted inputs (several per file when separated by "---"):
//   - an OperatingSystemConfig in YAML or JSON;
//   - a Kubernetes Secret manifest whose data (base64) or stringData key
//     "osc.yaml" holds one (the gardener-node-agent Secret);
//   - a bare osc.yaml (an OperatingSystemConfig document).
//
// Decoding follows gardener-node-agent's decoder, which ignores fields the
// OSC API does not have (as the API server prunes them from the CRD): a
// field the OSC API no longer has (for instance a file-level "encoding" or
// "spec.cri") is ignored with a warning naming the file, document and field
// path; Options.Strict makes it an error instead. A duplicated field is
// always an error.
//
// Semantics follow gardener-node-agent's OSC controller (gardener/gardener
// @ b312835d1784c3628983205c05452b2eaa95b645,
// pkg/nodeagent/controller/operatingsystemconfig, reconciler.go and
// changes.go; pkg/nodeagent/files/files.go):
//   - OSCs of purpose "provision" are refused: they are per-machine user
//     data with placeholders the machine controller fills in.
//   - status.extensionFiles are appended to spec.files; status.extensionUnits
//     are merged into spec.units by name (a later non-nil enable, command or
//     content wins; dropIns and filePaths are appended).
//   - File modes as the node agent writes them (see FileMode): the
//     permissions (0600 when unset) as an os.FileMode, which carries no
//     setuid, setgid or sticky bit; inline and secretRef files are created
//     through the umask of its systemd service (0022), imageRef files are
//     chmod-ed (no umask). Owner root.
//   - Unit files and drop-ins are written 0600 (the node agent writes and
//     chmods them so). A unit without drop-ins has its drop-in directory
//     /etc/systemd/system/NAME.d removed (model.Unit.ClearDropIns).
//   - Inline content is plain or "b64"; transmitUnencoded does not matter
//     for baking.
//   - imageRef content is read through Options.Images; its mode follows the
//     rule above, never the mode inside the image.
//   - secretRef content is not baked unless Options.BakeSecrets: it is
//     reported as runtime-delivered. When Options.SecretsDir is set the
//     referenced Secret and key must exist there.
//   - hostName files and spec.criConfig are runtime-delivered.
//   - A containerd spec.criConfig (name containerd with a containerd
//     section) makes the node agent add containerd.service to the OSC with
//     its drop-in 30-env_config.conf (containerd.go,
//     addContainerdEnvironmentDropIn): containerd.service is enabled and
//     started like any OSC unit without enable: false, and its drop-in
//     directory is kept. The drop-in (the agent's own PATH), config.toml
//     (from the node's containerd defaults) and certs.d (registry hosts,
//     some written only once their mirror answers) stay runtime-delivered.
//   - Units are enabled unless enable is false; gardener-node-agent.service
//     is always enabled. command: stop does not disable (the node agent
//     enables the unit and stops it once; reported as a warning).
//   - Every unit the node agent restarts when it applies the OSC (all but
//     those with enable: false or command: stop; its own unit always) is
//     marked model.Unit.StartOnApply: it runs on the node agent's nodes even
//     without an [Install] section, so the image starts it at boot.
//   - Every unit's filePaths must name a file of the same OSC.
//
// One file's decoded content is limited to model.MaxContentSize (imageRef
// content to model.MaxImageFileSize).
package gardener

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	extv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	corev1 "k8s.io/api/core/v1"

	"github.com/oslayer/oslayer/internal/field"
	"github.com/oslayer/oslayer/internal/inputfile"
	"github.com/oslayer/oslayer/sources/model"
)

// Kind is the document kind of an OperatingSystemConfig.
const Kind = "OperatingSystemConfig"

// APIVersion is the OSC API group/version.
const APIVersion = "extensions.gardener.cloud/v1alpha1"

// SecretKey is the data key of the gardener-node-agent Secret that holds the OSC.
const SecretKey = "osc.yaml"

// ContainerdUnit is the unit gardener-node-agent adds to an OSC with a
// containerd criConfig (its PATH drop-in), so it enables and starts it.
const ContainerdUnit = "containerd.service"

// NodeAgentUnit is gardener-node-agent's own unit, which the node agent
// always enables and restarts.
const NodeAgentUnit = "gardener-node-agent.service"

// UnitFileMode is the mode gardener-node-agent writes unit files and
// drop-ins with.
const UnitFileMode = 0o600

// NodeAgentUmask is the umask gardener-node-agent runs with: its systemd
// unit sets no UMask=, so systemd's default 0022 applies.
const NodeAgentUmask = 0o022

// FileMode is the mode gardener-node-agent gives a file of the OSC:
// permissions (nil: 0600) converted to an os.FileMode, which keeps only the
// permission bits (07777 bits such as 04000 are not setuid in an
// os.FileMode, so setuid, setgid and sticky are dropped). Inline and
// secretRef files are created with os.WriteFile, so the umask applies;
// imageRef files are copied and chmod-ed, so it does not.
func FileMode(permissions *uint32, imageRef bool) uint32 {
	mode := uint32(0o600)
	if permissions != nil {
		mode = *permissions & 0o777
	}
	if !imageRef {
		mode &^= NodeAgentUmask
	}
	return mode
}

// Runtime reasons, stable strings that the report shows.
const (
	ReasonSecret   = "secret content is delivered at runtime (bakeSecrets bakes it)"
	ReasonHostName = "file is only for host %q: host-specific content cannot be part of a per-pool image"
	ReasonCRI      = "CRI configuration (containerd config, registries, sandbox image) is generated on the node by gardener-node-agent"
	// ReasonUnknownField is the warning for a field the OSC API does not
	// have; the origin before it names the field.
	ReasonUnknownField = "unknown field ignored: the OperatingSystemConfig API has no such field, and gardener-node-agent ignores it (strict refuses it)"
)

// Options tune how OSC files are resolved.
type Options struct {
	// SecretsDir holds Secret manifests for secretRef files.
	SecretsDir string
	// BakeSecrets bakes secretRef content instead of reporting it as
	// runtime-delivered.
	BakeSecrets bool
	// Images reads imageRef files; nil makes an imageRef an error.
	Images model.ImageFiles
	// MaxContentSize bounds one file's decoded inline or secret content;
	// 0 means model.MaxContentSize (64 MiB).
	MaxContentSize int
	// Stdin is read for an input named "-" (once).
	Stdin io.Reader
	// Strict refuses a field the OSC API does not have instead of ignoring
	// it with a warning.
	Strict bool
	// Pool, when set, is the pool being built: an OSC (or its node-agent
	// Secret) labelled PoolLabel with another pool is an error.
	Pool string
}

// PoolLabel is the label Gardener puts on a worker pool's OSC and on the
// gardener-node-agent Secret that carries it.
const PoolLabel = "worker.gardener.cloud/pool"

// checkPool refuses an object labelled for another pool than the one built.
func (l *loader) checkPool(where, kind, name string, labels map[string]string) error {
	got, ok := labels[PoolLabel]
	if l.opts.Pool == "" || !ok || got == l.opts.Pool {
		return nil
	}
	return field.Errorf("%s: %s %s is labelled %s=%s, but the pool built is %q (%v): give this pool's OperatingSystemConfig, or %v %s",
		where, kind, name, PoolLabel, got, l.opts.Pool, field.Name("pool"), field.Name("pool"), got)
}

func (o Options) maxContent() int {
	if o.MaxContentSize > 0 {
		return o.MaxContentSize
	}
	return model.MaxContentSize
}

// Load decodes and merges the OSC inputs at paths. Several inputs merge into
// one Config; an item defined twice with different content is an error that
// names both origins.
//
// Its errors are bad input (model.InputError: a file missing or not
// parsing, a wrong kind, a field value refused) but for imageRef content
// that could not be read (model.Failure) and a context's end.
func Load(ctx context.Context, paths []string, opts Options) (*model.Config, error) {
	c, err := load(ctx, paths, opts)
	return c, model.MarkInput(err)
}

func load(ctx context.Context, paths []string, opts Options) (*model.Config, error) {
	l := &loader{opts: opts}
	var cfgs []*model.Config
	for _, p := range paths {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		data, err := l.read(p)
		if err != nil {
			return nil, fmt.Errorf("OSC input: %w", err)
		}
		cs, err := l.loadFile(ctx, p, data)
		if err != nil {
			return nil, err
		}
		cfgs = append(cfgs, cs...)
	}
	if len(cfgs) == 0 {
		return nil, errors.New("no OperatingSystemConfig given")
	}
	return l.finish(cfgs)
}

// Decode decodes one input file's bytes (named path in errors and
// origins) into a Config. It is Load for a single in-memory input, its
// errors marked as Load's.
func Decode(ctx context.Context, path string, data []byte, opts Options) (*model.Config, error) {
	l := &loader{opts: opts}
	cs, err := l.loadFile(ctx, path, data)
	if err != nil {
		return nil, model.MarkInput(err)
	}
	c, err := l.finish(cs)
	return c, model.MarkInput(err)
}

func (l *loader) finish(cfgs []*model.Config) (*model.Config, error) {
	c, err := model.Merge(cfgs...)
	if err != nil {
		return nil, err
	}
	c.Inputs = append(c.Inputs, l.usedSecrets()...)
	return c, nil
}

// read reads an input file, or standard input for "-" (once, bounded
// like a file).
func (l *loader) read(p string) ([]byte, error) {
	if p != StdinName {
		return inputfile.Read(p)
	}
	if l.opts.Stdin == nil || l.stdinRead {
		return nil, fmt.Errorf("%s: standard input can be given once, and only where there is one", p)
	}
	l.stdinRead = true
	b, err := io.ReadAll(io.LimitReader(l.opts.Stdin, inputfile.MaxSize+1))
	if err != nil {
		return nil, fmt.Errorf("standard input: %w", err)
	}
	if len(b) > inputfile.MaxSize {
		return nil, fmt.Errorf("standard input: more than %d bytes, the limit for an input file", inputfile.MaxSize)
	}
	return b, nil
}

// StdinName is the input name that stands for standard input.
const StdinName = "-"

type loader struct {
	stdinRead bool
	opts      Options
	secrets   map[string][]secretEntry // by metadata.name, loaded lazily
	used      map[string]bool          // secrets whose content was baked
}

type secretEntry struct {
	path   string
	ns     string
	data   map[string][]byte
	digest string
	err    error
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func (l *loader) loadFile(ctx context.Context, path string, data []byte) ([]*model.Config, error) {
	docs := model.SplitDocuments(data)
	if len(docs) == 0 {
		return nil, fmt.Errorf("%s: no document in file", path)
	}
	var out []*model.Config
	for i, doc := range docs {
		where := path
		if len(docs) > 1 {
			where = fmt.Sprintf("%s (document %d)", path, i+1)
		}
		tm, err := model.PeekType(doc)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", where, err)
		}
		in := model.Input{Path: path, Kind: tm.Kind, Name: tm.Metadata.Name, SHA256: sha(doc)}
		switch {
		case tm.Kind == "Secret" && (tm.APIVersion == "v1" || tm.APIVersion == ""):
			var s corev1.Secret
			if err := model.DecodeStrict(doc, &s); err != nil {
				return nil, fmt.Errorf("%s: Secret %s: %v", where, tm.Metadata.Name, err)
			}
			oscBytes, ok := s.Data[SecretKey]
			if sd, ok2 := s.StringData[SecretKey]; ok2 {
				oscBytes, ok = []byte(sd), true
			}
			if !ok {
				return nil, fmt.Errorf("%s: Secret %s/%s has no key %q (data or stringData)", where, s.Namespace, s.Name, SecretKey)
			}
			in.Name = nsName(s.Namespace, s.Name)
			if err := l.checkPool(where, "Secret", in.Name, s.Labels); err != nil {
				return nil, err
			}
			c, err := l.decodeOSC(ctx, where, oscBytes, "data["+SecretKey+"].", nsName(s.Namespace, s.Name))
			if err != nil {
				return nil, err
			}
			c.Inputs = append([]model.Input{in}, c.Inputs...)
			out = append(out, c)
		case tm.Kind == Kind:
			c, err := l.decodeOSC(ctx, where, doc, "", "")
			if err != nil {
				return nil, err
			}
			c.Inputs = append([]model.Input{in}, c.Inputs...)
			out = append(out, c)
		default:
			return nil, fmt.Errorf("%s: kind %q (apiVersion %q) is neither an %s nor a Secret with key %s", where, tm.Kind, tm.APIVersion, Kind, SecretKey)
		}
	}
	return out, nil
}

func nsName(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}

// decodeOSC decodes one OSC document. fieldPrefix is prepended to every
// Origin field ("data[osc.yaml]." for an OSC inside a Secret); fallbackName
// names the object when the OSC itself has no name.
func (l *loader) decodeOSC(ctx context.Context, doc string, data []byte, fieldPrefix, fallbackName string) (*model.Config, error) {
	osc, unknown, err := l.decodeDoc(doc, data, fieldPrefix, fallbackName)
	if err != nil {
		return nil, err
	}
	name := osc.Name
	if name == "" {
		name = fallbackName
	}
	if err := l.checkPool(doc, fieldPrefix+Kind, name, osc.Labels); err != nil {
		return nil, err
	}
	d := &oscDecoder{l: l, ctx: ctx, doc: doc, prefix: fieldPrefix, name: name, cfg: &model.Config{},
		filePaths: map[string]bool{}, merged: map[string]*srcUnit{}}
	for _, f := range unknown {
		d.cfg.Warnings = append(d.cfg.Warnings, fmt.Sprintf("%s: %s", d.origin(f), ReasonUnknownField))
	}
	if osc.Spec.CRIConfig != nil {
		d.cfg.Runtime = append(d.cfg.Runtime, model.Runtime{Item: "spec.criConfig", Reason: ReasonCRI, Origin: d.origin("spec.criConfig")})
	}
	if osc.Spec.InPlaceUpdates != nil {
		d.cfg.Warnings = append(d.cfg.Warnings, fmt.Sprintf("%s: ignored: in-place updates do not apply to image-based nodes", d.origin("spec.inPlaceUpdates")))
	}
	if err := d.files(osc); err != nil {
		return nil, err
	}
	d.units(osc)
	if len(d.errs) > 0 {
		return nil, errors.Join(d.errs...)
	}
	// Identical duplicates are fine, different ones are an error naming both.
	return model.Merge(d.cfg)
}

// decodeDoc decodes one OSC document and checks its kind, apiVersion and
// purpose; it returns the fields it did not know (unless Strict refuses
// them). A value of the wrong type is named like every other error: the
// document, the OSC's name and the field with its item index.
func (l *loader) decodeDoc(doc string, data []byte, fieldPrefix, fallbackName string) (*extv1alpha1.OperatingSystemConfig, []string, error) {
	var osc extv1alpha1.OperatingSystemConfig
	decode := model.DecodeKnown
	if l.opts.Strict {
		decode = func(doc []byte, v any) ([]string, error) { return nil, model.DecodeStrict(doc, v) }
	}
	unknown, err := decode(data, &osc)
	if err != nil {
		var fe *model.FieldTypeError
		if errors.As(err, &fe) {
			name := fallbackName
			if tm, perr := model.PeekType(data); perr == nil && tm.Metadata.Name != "" {
				name = tm.Metadata.Name
			}
			o := model.Origin{Document: doc, Kind: Kind, Name: name, Field: fieldPrefix + fe.Path}
			return nil, nil, fmt.Errorf("%s: %s", o, fe.Problem())
		}
		if fieldPrefix != "" {
			return nil, nil, fmt.Errorf("%s: %s%s: %v", doc, fieldPrefix, Kind, err)
		}
		return nil, nil, fmt.Errorf("%s: %s: %v", doc, Kind, err)
	}
	if osc.Kind != Kind {
		return nil, nil, fmt.Errorf("%s: %skind %q, want %s", doc, fieldPrefix, osc.Kind, Kind)
	}
	if osc.APIVersion != APIVersion {
		return nil, nil, fmt.Errorf("%s: %sapiVersion %q, want %s", doc, fieldPrefix, osc.APIVersion, APIVersion)
	}
	if osc.Spec.Purpose == extv1alpha1.OperatingSystemConfigPurposeProvision {
		return nil, nil, fmt.Errorf("%s: %sspec.purpose is %q: a provision OperatingSystemConfig is the per-machine user data that bootstraps gardener-node-agent "+
			"(placeholders such as <<BOOTSTRAP_TOKEN>> and <<MACHINE_NAME>> are filled in for each machine), not pool content; "+
			"give the reconcile OSC (the gardener-node-agent Secret's osc.yaml)", doc, fieldPrefix, osc.Spec.Purpose)
	}
	return &osc, unknown, nil
}

// oscDecoder turns one decoded OSC into a config: its files, then its
// units merged by name, as gardener-node-agent applies them.
type oscDecoder struct {
	l           *loader
	ctx         context.Context
	doc, prefix string
	name        string
	cfg         *model.Config
	errs        []error
	filePaths   map[string]bool // the OSC's file paths, for units' filePaths
	merged      map[string]*srcUnit
	order       []string // unit names in first-seen order
}

func (d *oscDecoder) origin(field string) model.Origin {
	return model.Origin{Document: d.doc, Kind: Kind, Name: d.name, Field: d.prefix + field}
}

// files decodes spec.files then status.extensionFiles, as
// gardener-node-agent.
func (d *oscDecoder) files(osc *extv1alpha1.OperatingSystemConfig) error {
	type srcFile struct {
		f     extv1alpha1.File
		field string
	}
	var files []srcFile
	for i, f := range osc.Spec.Files {
		files = append(files, srcFile{f, fmt.Sprintf("spec.files[%d]", i)})
	}
	for i, f := range osc.Status.ExtensionFiles {
		files = append(files, srcFile{f, fmt.Sprintf("status.extensionFiles[%d]", i)})
	}
	for _, sf := range files {
		if err := d.ctx.Err(); err != nil {
			return err
		}
		o := d.origin(sf.field)
		f, rt, err := d.l.file(d.ctx, o, sf.f)
		if err != nil {
			d.errs = append(d.errs, err)
			continue
		}
		d.filePaths[sf.f.Path] = true
		if p := sf.f.Permissions; p != nil && *p&0o7000 != 0 {
			d.cfg.Warnings = append(d.cfg.Warnings, fmt.Sprintf("%s: %s: permissions %#o: gardener-node-agent drops the setuid, setgid and sticky bits (an os.FileMode has none of them at 07000); written %#o", o, sf.f.Path, *p, FileMode(p, sf.f.Content.ImageRef != nil)))
		}
		if rt != nil {
			d.cfg.Runtime = append(d.cfg.Runtime, *rt)
			continue
		}
		d.cfg.Files = append(d.cfg.Files, *f)
	}
	return nil
}

// srcUnit is a unit merged from the OSC's entries of one name.
type srcUnit struct {
	u      extv1alpha1.Unit
	origin model.Origin
	// field of each drop-in and filePath, parallel to u.DropIns / u.FilePaths
	dropFields []string
	pathFields []string
}

// addUnit merges u (at field) into the units by name: a later entry sets
// enable, command and content when it has them and adds its drop-ins and
// filePaths.
func (d *oscDecoder) addUnit(u extv1alpha1.Unit, field string) {
	var dropFields, pathFields []string
	for i := range u.DropIns {
		dropFields = append(dropFields, fmt.Sprintf("%s.dropIns[%d]", field, i))
	}
	for i := range u.FilePaths {
		pathFields = append(pathFields, fmt.Sprintf("%s.filePaths[%d]", field, i))
	}
	ex, ok := d.merged[u.Name]
	if !ok {
		u.DropIns = slices.Clone(u.DropIns)
		u.FilePaths = slices.Clone(u.FilePaths)
		d.merged[u.Name] = &srcUnit{u: u, origin: d.origin(field), dropFields: dropFields, pathFields: pathFields}
		d.order = append(d.order, u.Name)
		return
	}
	if u.Enable != nil {
		ex.u.Enable = u.Enable
	}
	if u.Command != nil {
		ex.u.Command = u.Command
	}
	if u.Content != nil {
		ex.u.Content = u.Content
	}
	ex.u.DropIns = append(ex.u.DropIns, u.DropIns...)
	ex.dropFields = append(ex.dropFields, dropFields...)
	ex.u.FilePaths = append(ex.u.FilePaths, u.FilePaths...)
	ex.pathFields = append(ex.pathFields, pathFields...)
}

// units merges spec.units, the node agent's containerd drop-in and
// status.extensionUnits by name, then converts each.
func (d *oscDecoder) units(osc *extv1alpha1.OperatingSystemConfig) {
	for i, u := range osc.Spec.Units {
		d.addUnit(u, fmt.Sprintf("spec.units[%d]", i))
	}
	// containerd.go addContainerdEnvironmentDropIn: the node agent appends
	// its drop-in to spec.units' containerd.service, or appends the unit,
	// before status.extensionUnits are merged.
	containerdDropIn := hasContainerdConfig(osc.Spec.CRIConfig)
	if _, ok := d.merged[ContainerdUnit]; containerdDropIn && !ok {
		d.addUnit(extv1alpha1.Unit{Name: ContainerdUnit}, "spec.criConfig")
	}
	for i, u := range osc.Status.ExtensionUnits {
		d.addUnit(u, fmt.Sprintf("status.extensionUnits[%d]", i))
	}
	for _, name := range d.order {
		d.unit(name, containerdDropIn && name == ContainerdUnit)
	}
}

// unit converts the merged unit name; keepDropIns keeps its drop-in
// directory (the agent's containerd drop-in is runtime-delivered).
func (d *oscDecoder) unit(name string, keepDropIns bool) {
	su := d.merged[name]
	u, err := unit(su.u, su.origin, su.dropFields, d.origin, d.l.opts.maxContent())
	if err != nil {
		d.errs = append(d.errs, err)
		return
	}
	if keepDropIns {
		u.ClearDropIns = false
	}
	stop := su.u.Command != nil && *su.u.Command == extv1alpha1.CommandStop
	if name == NodeAgentUnit && (stop || (su.u.Enable != nil && !*su.u.Enable)) {
		d.cfg.Warnings = append(d.cfg.Warnings, fmt.Sprintf("%s: unit %s: gardener-node-agent always enables and restarts its own unit; enable: false and command: stop are ignored", su.origin, name))
	} else if stop && *u.Enabled {
		d.cfg.Warnings = append(d.cfg.Warnings, fmt.Sprintf("%s: unit %s has command stop but is not disabled (enable: false): gardener-node-agent enables it and stops it once when it applies the OSC; in the image it is enabled, so it starts at boot", su.origin, name))
	}
	for i, fp := range su.u.FilePaths {
		if !d.filePaths[fp] {
			d.errs = append(d.errs, model.Errorf(d.origin(su.pathFields[i]), fp, "filePaths of unit %s names a file that is not part of the OperatingSystemConfig", name))
		}
	}
	d.cfg.Units = append(d.cfg.Units, u)
}

// hasContainerdConfig is gardener's HasContainerdConfiguration: the node
// agent configures containerd only for a criConfig named containerd with a
// containerd section.
func hasContainerdConfig(c *extv1alpha1.CRIConfig) bool {
	return c != nil && c.Name == extv1alpha1.CRINameContainerD && c.Containerd != nil
}

func unit(u extv1alpha1.Unit, o model.Origin, dropFields []string, origin func(string) model.Origin, limit int) (model.Unit, error) {
	if err := model.ValidateUnitName(u.Name); err != nil {
		if len(u.DropIns) > 0 && u.Content == nil {
			return model.Unit{}, model.Errorf(o, "", "drop-ins for unit %q: %v", u.Name, err)
		}
		return model.Unit{}, model.Errorf(o, "", "%v", err)
	}
	stop := false
	if u.Command != nil {
		switch *u.Command {
		case extv1alpha1.CommandStart, extv1alpha1.CommandRestart:
		case extv1alpha1.CommandStop:
			stop = true
		default:
			return model.Unit{}, model.Errorf(o, "", "unit %s: unknown command %q (want start, restart or stop)", u.Name, *u.Command)
		}
	}
	// reconciler.go applyChangedUnits: its own unit or enable unset/true
	// → dbus Enable, else Disable. changes.go getCommandToExecute: stop
	// when enable is false or command is stop, else restart; its own unit
	// is always restarted (Reconcile routes it through
	// MustRestartNodeAgent).
	enable := u.Enable == nil || *u.Enable
	enabled := u.Name == NodeAgentUnit || enable
	start := u.Name == NodeAgentUnit || (enable && !stop)
	mu := model.Unit{Name: u.Name, Enabled: &enabled, StartOnApply: start, FileMode: UnitFileMode, Origin: o}
	if u.Content != nil {
		c := *u.Content
		if err := checkText(c, limit); err != nil {
			return model.Unit{}, model.Errorf(o, "", "unit %s content: %v", u.Name, err)
		}
		mu.Contents = &c
	}
	seen := map[string]int{}
	for i, d := range u.DropIns {
		do := origin(dropFields[i])
		if err := model.ValidateDropInName(d.Name); err != nil {
			return model.Unit{}, model.Errorf(do, "", "unit %s: %v", u.Name, err)
		}
		if err := checkText(d.Content, limit); err != nil {
			return model.Unit{}, model.Errorf(do, "", "unit %s drop-in %s: %v", u.Name, d.Name, err)
		}
		if j, ok := seen[d.Name]; ok {
			if mu.DropIns[j].Contents != d.Content {
				return model.Unit{}, model.Errorf(do, "", "unit %s: drop-in %s defined twice with different content (also %s)", u.Name, d.Name, mu.DropIns[j].Origin)
			}
			continue
		}
		seen[d.Name] = len(mu.DropIns)
		mu.DropIns = append(mu.DropIns, model.DropIn{Name: d.Name, Contents: d.Content, Origin: do})
	}
	// reconciler.go applyChangedUnits: a unit without drop-ins gets its
	// drop-in directory under /etc/systemd/system removed (RemoveAll).
	mu.ClearDropIns = len(mu.DropIns) == 0
	return mu, nil
}

func checkText(s string, limit int) error {
	if len(s) > limit {
		return fmt.Errorf("content of %d bytes exceeds the limit of %d bytes", len(s), limit)
	}
	return nil
}

// file resolves one OSC file into a baked File or a Runtime item.
func (l *loader) file(ctx context.Context, o model.Origin, f extv1alpha1.File) (*model.File, *model.Runtime, error) {
	if err := checkFile(o, f); err != nil {
		return nil, nil, err
	}
	c := f.Content
	if f.HostName != nil {
		return nil, &model.Runtime{Item: f.Path, Reason: fmt.Sprintf(ReasonHostName, *f.HostName), Origin: o}, nil
	}
	out := &model.File{Path: f.Path, Mode: FileMode(f.Permissions, c.ImageRef != nil), Origin: o}
	switch {
	case c.Inline != nil:
		data, err := decodeInline(c.Inline, l.opts.maxContent())
		if err != nil {
			return nil, nil, model.Errorf(o, f.Path, "content.inline: %v", err)
		}
		out.Data = data
	case c.SecretRef != nil:
		return l.secretFile(o, out, c.SecretRef)
	case c.ImageRef != nil:
		return l.imageFile(ctx, o, out, c.ImageRef)
	}
	return out, nil, nil
}

// checkFile checks an OSC file's path, permissions and that its content
// has exactly one source.
func checkFile(o model.Origin, f extv1alpha1.File) error {
	if err := model.ValidatePath(f.Path); err != nil {
		return model.Errorf(o, "", "%v", err)
	}
	if f.Permissions != nil && *f.Permissions&^0o7777 != 0 {
		return model.Errorf(o, f.Path, "permissions %d (%#o) has bits outside 07777", *f.Permissions, *f.Permissions)
	}
	c := f.Content
	n := 0
	for _, set := range []bool{c.Inline != nil, c.SecretRef != nil, c.ImageRef != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		return model.Errorf(o, f.Path, "content must have exactly one of inline, secretRef, imageRef (has %d)", n)
	}
	return nil
}

// secretFile is out with the content of a Secret's key: baked only with
// BakeSecrets (and a secrets directory), else delivered at runtime.
func (l *loader) secretFile(o model.Origin, out *model.File, ref *extv1alpha1.FileContentSecretRef) (*model.File, *model.Runtime, error) {
	if ref.Name == "" || ref.DataKey == "" {
		return nil, nil, model.Errorf(o, out.Path, "content.secretRef needs name and dataKey")
	}
	if l.opts.SecretsDir == "" {
		if l.opts.BakeSecrets {
			return nil, nil, model.Errorf(o, out.Path, "content.secretRef %s key %s: baking secrets needs a secrets directory (%v DIR)", ref.Name, ref.DataKey, field.Name("secretsDir"))
		}
		return nil, &model.Runtime{Item: out.Path, Reason: ReasonSecret, Origin: o}, nil
	}
	data, err := l.secret(ref.Name, ref.DataKey)
	if err != nil {
		return nil, nil, model.Errorf(o, out.Path, "content.secretRef: %v", err)
	}
	if !l.opts.BakeSecrets {
		return nil, &model.Runtime{Item: out.Path, Reason: ReasonSecret, Origin: o}, nil
	}
	out.Data = data
	out.Secret = true
	if l.used == nil {
		l.used = map[string]bool{}
	}
	l.used[ref.Name] = true
	return out, nil, nil
}

// imageFile is out with the content of a file in an image, read through
// the image reader.
func (l *loader) imageFile(ctx context.Context, o model.Origin, out *model.File, ref *extv1alpha1.FileContentImageRef) (*model.File, *model.Runtime, error) {
	if ref.Image == "" || ref.FilePathInImage == "" {
		return nil, nil, model.Errorf(o, out.Path, "content.imageRef needs image and filePathInImage")
	}
	if l.opts.Images == nil {
		return nil, nil, model.Errorf(o, out.Path, "content.imageRef %s:%s: no image reader configured", ref.Image, ref.FilePathInImage)
	}
	data, _, pinned, err := l.opts.Images.ReadFile(ctx, ref.Image, ref.FilePathInImage)
	if err != nil {
		e := model.Errorf(o, out.Path, "content.imageRef: %v", err)
		if !model.IsInput(err) {
			// A registry that is down, a read that took too long: not
			// the OSC's fault.
			return nil, nil, &model.Failure{Err: e}
		}
		return nil, nil, e
	}
	if len(data) > model.MaxImageFileSize {
		return nil, nil, model.Errorf(o, out.Path, "content.imageRef %s:%s: %d bytes exceed the limit of %d bytes", ref.Image, ref.FilePathInImage, len(data), model.MaxImageFileSize)
	}
	out.Data = data
	out.FromImage = pinned
	return out, nil, nil
}

func decodeInline(in *extv1alpha1.FileContentInline, limit int) ([]byte, error) {
	switch in.Encoding {
	case "":
		if len(in.Data) > limit {
			return nil, fmt.Errorf("content of %d bytes exceeds the limit of %d bytes", len(in.Data), limit)
		}
		return []byte(in.Data), nil
	case "b64":
		if base64.StdEncoding.DecodedLen(len(in.Data)) > limit+3 {
			return nil, fmt.Errorf("content of about %d bytes exceeds the limit of %d bytes", base64.StdEncoding.DecodedLen(len(in.Data)), limit)
		}
		b, err := base64.StdEncoding.DecodeString(in.Data)
		if err != nil {
			return nil, fmt.Errorf("invalid base64 (encoding b64): %v", err)
		}
		if len(b) > limit {
			return nil, fmt.Errorf("content of %d bytes exceeds the limit of %d bytes", len(b), limit)
		}
		return b, nil
	default:
		return nil, fmt.Errorf("unknown encoding %q (want \"\" or \"b64\")", in.Encoding)
	}
}

// secret returns key of the Secret named name from SecretsDir.
func (l *loader) secret(name, key string) ([]byte, error) {
	if l.secrets == nil {
		if err := l.loadSecrets(); err != nil {
			return nil, err
		}
	}
	cands, ok := l.secrets[name]
	if !ok {
		return nil, fmt.Errorf("secret %q not found in %s", name, l.opts.SecretsDir)
	}
	s := cands[0]
	for _, c := range cands[1:] {
		if c.digest != s.digest {
			return nil, fmt.Errorf("secret %q is defined differently in %s and %s", name, s.path, c.path)
		}
	}
	if s.err != nil {
		return nil, s.err
	}
	v, ok := s.data[key]
	if !ok {
		keys := make([]string, 0, len(s.data))
		for k := range s.data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		return nil, fmt.Errorf("secret %q (%s) has no key %q (keys: %s)", name, s.path, key, strings.Join(keys, ", "))
	}
	if len(v) > l.opts.maxContent() {
		return nil, fmt.Errorf("secret %q key %q: %d bytes exceed the limit of %d bytes", name, key, len(v), l.opts.maxContent())
	}
	return v, nil
}

// loadSecrets reads every *.yaml, *.yml, *.json file directly in SecretsDir
// and indexes the Secret documents by metadata.name. Other kinds are ignored.
func (l *loader) loadSecrets() error {
	l.secrets = map[string][]secretEntry{}
	// Opening a pipe given as the directory would block.
	if _, err := inputfile.Stat(l.opts.SecretsDir); err != nil {
		return fmt.Errorf("secrets directory: %w", err)
	}
	ents, err := os.ReadDir(l.opts.SecretsDir)
	if err != nil {
		return fmt.Errorf("secrets directory: %w", err)
	}
	for _, e := range ents {
		ext := filepath.Ext(e.Name())
		if e.IsDir() || (ext != ".yaml" && ext != ".yml" && ext != ".json") {
			continue
		}
		p := filepath.Join(l.opts.SecretsDir, e.Name())
		data, err := inputfile.Read(p)
		if err != nil {
			return fmt.Errorf("secrets directory: %w", err)
		}
		for _, doc := range model.SplitDocuments(data) {
			tm, err := model.PeekType(doc)
			if err != nil || tm.Kind != "Secret" {
				continue
			}
			var s corev1.Secret
			if err := model.DecodeStrict(doc, &s); err != nil {
				// Reported only if this Secret is referenced.
				l.secrets[tm.Metadata.Name] = append(l.secrets[tm.Metadata.Name], secretEntry{path: p, digest: sha(doc),
					err: fmt.Errorf("%s: Secret %s: %v", p, tm.Metadata.Name, err)})
				continue
			}
			d := map[string][]byte{}
			for k, v := range s.Data {
				d[k] = v
			}
			for k, v := range s.StringData {
				d[k] = []byte(v)
			}
			l.secrets[s.Name] = append(l.secrets[s.Name], secretEntry{path: p, ns: s.Namespace, data: d, digest: sha(doc)})
		}
	}
	return nil
}

// usedSecrets lists the Secret documents whose content was baked.
func (l *loader) usedSecrets() []model.Input {
	names := make([]string, 0, len(l.used))
	for n := range l.used {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []model.Input
	for _, n := range names {
		s := l.secrets[n][0]
		out = append(out, model.Input{Path: s.path, Kind: "Secret", Name: nsName(s.ns, n), SHA256: s.digest})
	}
	return out
}
