package render

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing/fstest"

	"github.com/oslayer/oslayer/internal/field"
	"github.com/oslayer/oslayer/render/systemd"
	"github.com/oslayer/oslayer/render/tree"
	"github.com/oslayer/oslayer/render/varmech"
	"github.com/oslayer/oslayer/sources/model"
)

// Layer names, bottom first.
const (
	LayerPayload  = "payload"
	LayerConfig   = "config"
	LayerMetadata = "metadata"
)

// PayloadThreshold is the size from which a file goes to the payload layer
// even when it does not come from an image.
const PayloadThreshold = 1 << 20

// Paths oslayer writes.
const (
	// ManifestPath is the ownership manifest inside the image.
	ManifestPath = "/usr/lib/oslayer/manifest.json"
	// KargsPath is the bootc kernel-arguments file.
	KargsPath = "/usr/lib/bootc/kargs.d/10-oslayer.toml"
	// UnitDir is where units and drop-ins go.
	UnitDir = "/etc/systemd/system"
	// FallbackWantedBy is used for units shipped by the OS when the base
	// tree is not available.
	FallbackWantedBy = "multi-user.target"
)

// apiDirs are kernel/runtime file systems: ostree drops their children.
var apiDirs = map[string]string{
	"run":  "a tmpfs on the node: ostree drops the children of /run",
	"tmp":  "a tmpfs on the node: ostree drops the children of /tmp",
	"proc": "an API file system: ostree drops the children of /proc",
	"sys":  "an API file system: ostree drops the children of /sys",
	"dev":  "an API file system: ostree drops the children of /dev",
}

// placer applies the ostree placement rules to a merged configuration.
type placer struct {
	req    Request
	tree   *tree.Tree
	baked  map[string]*Baked // by image path
	units  []UnitReport
	warns  []string
	errs   []error
	varEnt []varmech.Entry
	varSrc map[string]varItem // canonical node path -> item
	// firstBoot are the links a first boot's presets add (firstBootPresets).
	firstBoot []string
	// layerOf remembers the layer of each regular file, for hard links.
	layerOf map[string]string
}

type varItem struct {
	path      string // as the source wrote it
	data      []byte
	origin    model.Origin
	fromImage string
	secret    bool
	ignition  string
}

type placeClass int

const (
	asIs placeClass = iota + 1
	viaVar
)

func (p *placer) errorf(o model.Origin, nodePath, format string, args ...any) {
	p.errs = append(p.errs, model.Errorf(o, nodePath, format, args...))
}

// classify applies the placement rules to a node path.
func (p *placer) classify(o model.Origin, np string) (placeClass, bool) {
	if err := tree.CheckPath(np); err != nil {
		p.errs = append(p.errs, model.Errorf(o, "", "%v", err))
		return 0, false
	}
	parts := strings.Split(np[1:], "/")
	top := parts[0]
	if why, ok := apiDirs[top]; ok {
		p.errorf(o, np, "not representable in an image: /%s is %s", top, why)
		return 0, false
	}
	switch top {
	case "boot":
		p.errorf(o, np, "not representable in an image: ostree masks /boot content of a container image")
		return 0, false
	case "sysroot":
		p.errorf(o, np, "not representable in an image: /sysroot must never appear in an image")
		return 0, false
	case "etc":
		if len(parts) == 1 {
			p.errorf(o, np, "the top-level directory itself cannot be changed by a layer")
			return 0, false
		}
		return asIs, true
	case "usr":
		if len(parts) > 1 && parts[1] == "etc" {
			p.errorf(o, np, "/usr/etc is ostree's copy of the image's /etc: write /etc%s instead", strings.TrimPrefix(np, "/usr/etc"))
			return 0, false
		}
		if len(parts) > 1 && parts[1] == "local" {
			return viaVar, true
		}
		if len(parts) == 1 {
			p.errorf(o, np, "the top-level directory itself cannot be changed by a layer")
			return 0, false
		}
		return asIs, true
	case "var", "opt", "root", "home", "srv", "mnt":
		// /var itself and the FCOS/RHCOS symlinks into it (see
		// varmech.Canonical): placed like /opt content.
		if len(parts) == 1 {
			p.errorf(o, np, "the top-level directory itself cannot be changed by a layer")
			return 0, false
		}
		return viaVar, true
	}
	if slices.ContainsFunc(p.req.AllowTopLevel, func(a string) bool { return strings.Trim(a, "/") == top }) {
		if len(parts) == 1 {
			p.errorf(o, np, "the top-level directory itself cannot be changed by a layer")
			return 0, false
		}
		return asIs, true
	}
	p.errorf(o, np, "top-level directory /%s is not kept by ostree-native bases (only on composefs bases); allow it explicitly (%v %s)", top, field.Name("allowTopLevel"), top)
	return 0, false
}

func layerFor(size int, fromImage string) string {
	if fromImage != "" || size >= PayloadThreshold {
		return LayerPayload
	}
	return LayerConfig
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func modeString(m uint32) string { return fmt.Sprintf("%04o", m) }

// add puts an entry into the tree and records it for the report.
func (p *placer) add(e tree.Entry, b Baked) {
	e.Origin = b.Source.String()
	if err := p.tree.Add(e); err != nil {
		p.errs = append(p.errs, err)
		return
	}
	b.Type = e.Kind.String()
	b.Mode = modeString(e.Mode)
	b.UID, b.GID = e.UID, e.GID
	b.Layer = e.Layer
	if e.Path != b.Path {
		b.StoredAt = e.Path
	}
	switch e.Kind {
	case tree.File:
		b.Size = int64(len(e.Data))
		b.SHA256 = sha(e.Data)
		p.layerOf[e.Path] = e.Layer
	case tree.Symlink, tree.Hardlink:
		b.Target = e.Target
	}
	if _, dup := p.baked[e.Path]; !dup {
		bb := b
		p.baked[e.Path] = &bb
	}
}

// place builds the tree of cfg. Errors are joined; nothing is kept on error.
func place(req Request, cfg *model.Config) (*placer, error) {
	p := &placer{
		req:     req,
		tree:    tree.New(),
		baked:   map[string]*Baked{},
		varSrc:  map[string]varItem{},
		layerOf: map[string]string{},
	}
	var hardLinks []model.Link
	for _, d := range cfg.Dirs {
		p.placeDir(d)
	}
	for _, f := range cfg.Files {
		p.placeFile(f)
	}
	for _, l := range cfg.Links {
		if l.Hard {
			hardLinks = append(hardLinks, l)
			continue
		}
		p.placeSymlink(l)
	}
	p.placeUnits(cfg.Units)
	p.placeVar()
	// Hard links last: their target must be an earlier entry of the layer.
	for _, l := range hardLinks {
		p.placeHardlink(l)
	}
	p.placeKargs(cfg.KernelArgs)
	p.warnUsrReplacements()
	if len(p.errs) > 0 {
		return nil, errors.Join(p.errs...)
	}
	return p, nil
}

// warnUsrReplacements warns, when the base tree is known, about every item
// of the configuration written under /usr at a path where the base image
// has a file or link: the image replaces the OS's own file, which an OS
// update then no longer changes. (oslayer's own generated files are not
// items of the configuration.) Preflight's usr-override check finds the same
// in a built image and can make it an error.
func (p *placer) warnUsrReplacements() {
	if p.req.Base == nil {
		return
	}
	for _, b := range p.bakedList() {
		if b.Generated || b.StoredAt != "" || !strings.HasPrefix(b.Path, "/usr/") || b.Type == "dir" || b.Type == "whiteout" {
			continue
		}
		fi, err := fs.Lstat(p.req.Base, strings.TrimPrefix(b.Path, "/"))
		if err != nil || fi.IsDir() {
			continue
		}
		p.warns = append(p.warns, fmt.Sprintf("%s: writes %s, which replaces the base image's %s %s: an OS update no longer changes it", b.Source, b.Path, BaseFileKind(fi), b.Path))
	}
}

// BaseFileKind names a file of the base tree in messages: "symlink",
// "file (N bytes)" for a regular file, "file" otherwise.
func BaseFileKind(fi fs.FileInfo) string {
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return "symlink"
	case fi.Mode().IsRegular():
		return fmt.Sprintf("file (%d bytes)", fi.Size())
	}
	return "file"
}

func (p *placer) placeDir(d model.Dir) {
	cls, ok := p.classify(d.Origin, d.Path)
	if !ok {
		return
	}
	if cls == viaVar {
		p.addVar(d.Origin, d.Path, varmech.Entry{Kind: varmech.Dir, Mode: d.Mode, UID: d.UID, GID: d.GID}, varItem{})
		return
	}
	p.add(tree.Entry{Path: d.Path, Kind: tree.Dir, Mode: d.Mode, UID: d.UID, GID: d.GID, Layer: LayerConfig},
		Baked{Path: d.Path, Source: d.Origin})
}

func (p *placer) placeFile(f model.File) {
	cls, ok := p.classify(f.Origin, f.Path)
	if !ok {
		return
	}
	if cls == viaVar {
		p.addVar(f.Origin, f.Path, varmech.Entry{Kind: varmech.File, Mode: f.Mode, UID: f.UID, GID: f.GID},
			varItem{data: f.Data, fromImage: f.FromImage, secret: f.Secret, ignition: f.Ignition})
		return
	}
	p.add(tree.Entry{Path: f.Path, Kind: tree.File, Mode: f.Mode, UID: f.UID, GID: f.GID, Data: f.Data, Layer: layerFor(len(f.Data), f.FromImage)},
		Baked{Path: f.Path, Source: f.Origin, FromImage: f.FromImage, Secret: f.Secret, Ignition: f.Ignition})
}

func (p *placer) placeSymlink(l model.Link) {
	cls, ok := p.classify(l.Origin, l.Path)
	if !ok {
		return
	}
	if strings.IndexByte(l.Target, 0) >= 0 || l.Target == "" {
		p.errorf(l.Origin, l.Path, "invalid symlink target %q", l.Target)
		return
	}
	if cls == viaVar {
		p.addVar(l.Origin, l.Path, varmech.Entry{Kind: varmech.Symlink, UID: l.UID, GID: l.GID, Target: l.Target}, varItem{})
		return
	}
	p.add(tree.Entry{Path: l.Path, Kind: tree.Symlink, Mode: 0o777, UID: l.UID, GID: l.GID, Target: l.Target, Layer: LayerConfig},
		Baked{Path: l.Path, Source: l.Origin})
}

func (p *placer) placeHardlink(l model.Link) {
	cls, ok := p.classify(l.Origin, l.Path)
	if !ok {
		return
	}
	if cls == viaVar {
		p.errorf(l.Origin, l.Path, "hard links under /var and its aliases (/opt, /usr/local, /root, /home, /srv, /mnt) are not supported (the content is materialised on the node); use a symbolic link")
		return
	}
	tcls, ok := p.classify(l.Origin, l.Target)
	if !ok {
		return
	}
	if tcls == viaVar {
		p.errorf(l.Origin, l.Path, "hard link target %s is under /var or one of its aliases and not part of the same layer", l.Target)
		return
	}
	layer, ok := p.layerOf[l.Target]
	if !ok {
		p.errorf(l.Origin, l.Path, "hard link target %s is not a regular file of this configuration (hard links only within the layer)", l.Target)
		return
	}
	var mode uint32
	if te, ok := p.tree.Get(l.Target); ok {
		mode = te.Mode // tar readers ignore it; keep it equal to the file's
	}
	p.add(tree.Entry{Path: l.Path, Kind: tree.Hardlink, Mode: mode, UID: l.UID, GID: l.GID, Target: l.Target, Layer: layer},
		Baked{Path: l.Path, Source: l.Origin})
}

// addVar queues an entry for the /var mechanism.
func (p *placer) addVar(o model.Origin, np string, e varmech.Entry, it varItem) {
	c, ok := varmech.Canonical(np)
	if !ok {
		p.errorf(o, np, "not handled by the /var mechanism")
		return
	}
	if prev, dup := p.varSrc[c]; dup {
		p.errorf(o, np, "conflict: %s is also claimed as %s by %s", c, prev.path, prev.origin)
		return
	}
	e.Path = c
	it.path, it.origin = np, o
	p.varEnt = append(p.varEnt, e)
	p.varSrc[c] = it
}

// placeVar runs the /var mechanism: content stored under /usr plus the
// generated tmpfiles.d rules and prune unit.
func (p *placer) placeVar() {
	// Always: an image that drops its last /var entry must still prune
	// what the previous image owned.
	plan, err := varmech.NewPlan(p.varEnt)
	if err != nil {
		p.errs = append(p.errs, fmt.Errorf("/var mechanism: %w", err))
		return
	}
	for _, e := range p.varEnt {
		it := p.varSrc[e.Path]
		switch e.Kind {
		case varmech.File:
			img, ok := plan.Store[e.Path]
			if !ok {
				p.errorf(it.origin, it.path, "the /var mechanism has no image path for %s", e.Path)
				continue
			}
			p.add(tree.Entry{Path: img, Kind: tree.File, Mode: e.Mode, UID: e.UID, GID: e.GID, Data: it.data, Layer: layerFor(len(it.data), it.fromImage)},
				Baked{Path: it.path, Source: it.origin, FromImage: it.fromImage, Secret: it.secret, Ignition: it.ignition})
		default:
			// Directories and symlinks are created by tmpfiles.d rules; they
			// are baked as part of the rules file and reported here.
			b := Baked{Path: it.path, Type: kindName(e.Kind), Mode: modeString(e.Mode), UID: e.UID, GID: e.GID, Target: e.Target,
				Layer: LayerConfig, Source: it.origin, StoredAt: "tmpfiles.d"}
			if e.Kind == varmech.Symlink {
				b.Mode = "0777"
			}
			p.baked["var:"+e.Path] = &b
		}
	}
	gen := model.Origin{Document: "oslayer", Field: "/var mechanism"}
	for _, g := range plan.Files {
		if g.Symlink != "" {
			p.add(tree.Entry{Path: g.Path, Kind: tree.Symlink, Mode: 0o777, Target: g.Symlink, Layer: LayerConfig},
				Baked{Path: g.Path, Source: gen, Generated: true})
			continue
		}
		p.add(tree.Entry{Path: g.Path, Kind: tree.File, Mode: g.Mode, Data: g.Data, Layer: LayerConfig},
			Baked{Path: g.Path, Source: gen, Generated: true})
	}
}

func kindName(k varmech.Kind) string {
	switch k {
	case varmech.File:
		return "file"
	case varmech.Dir:
		return "dir"
	case varmech.Symlink:
		return "symlink"
	}
	return "unknown"
}

// placeUnits writes units and drop-ins and creates enablement or mask links.
//
// Enablement looks units up the way systemctl does in the image being
// built: the configuration's units, drop-ins and other files (see
// unitFS) over the base tree when there is one, so that an [Install]
// section in a drop-in, instances of configured templates and Also= resolve
// as on the node.
func (p *placer) placeUnits(units []model.Unit) {
	p.clearDropInDirs(units)
	reports := make([]*UnitReport, len(units))
	bad := make([]bool, len(units)) // contents that do not parse: not enabled
	for i, u := range units {
		if err := model.ValidateUnitName(u.Name); err != nil {
			p.errorf(u.Origin, "", "unit name: %v", err)
			continue
		}
		ur := &UnitReport{Name: u.Name, Source: u.Origin}
		reports[i] = ur
		unitPath := path.Join(UnitDir, u.Name)
		if u.Contents != nil && !u.Mask {
			if _, err := systemd.ParseInstall(*u.Contents); err != nil {
				p.errorf(u.Origin, unitPath, "unit %s: %v", u.Name, err)
				bad[i] = true
			}
			p.add(tree.Entry{Path: unitPath, Kind: tree.File, Mode: unitFileMode(u), Data: []byte(*u.Contents), Layer: LayerConfig},
				Baked{Path: unitPath, Source: u.Origin})
			ur.Written = true
		}
		for _, d := range u.DropIns {
			if err := model.ValidateDropInName(d.Name); err != nil {
				p.errorf(d.Origin, "", "unit %s: %v", u.Name, err)
				continue
			}
			dp := path.Join(UnitDir, u.Name+".d", d.Name)
			if _, err := systemd.ParseInstallDropIns("", []systemd.DropIn{{Name: d.Name, Text: d.Contents}}); err != nil {
				p.errorf(d.Origin, dp, "unit %s: %v", u.Name, err)
				bad[i] = true
			}
			p.add(tree.Entry{Path: dp, Kind: tree.File, Mode: unitFileMode(u), Data: []byte(d.Contents), Layer: LayerConfig},
				Baked{Path: dp, Source: d.Origin})
			ur.DropIns = append(ur.DropIns, d.Name)
		}
		if u.Mask {
			if u.Contents != nil {
				p.warns = append(p.warns, fmt.Sprintf("%s: unit %s is masked; its contents are not written", u.Origin, u.Name))
			}
			l := systemd.MaskLink(u.Name)
			p.add(tree.Entry{Path: l.Path, Kind: tree.Symlink, Mode: 0o777, Target: l.Target, Layer: LayerConfig},
				Baked{Path: l.Path, Source: u.Origin, Generated: true})
			ur.Enablement = "masked"
			ur.Links = append(ur.Links, l.Path+" -> "+l.Target)
		}
	}
	cfgFS := p.unitFS()
	var fsys fs.FS = cfgFS
	if p.req.Base != nil {
		fsys = systemd.Overlay(cfgFS, p.req.Base)
	}
	for i, u := range units {
		if ur := reports[i]; ur != nil && !bad[i] && !u.Mask && u.Enabled != nil {
			p.enable(u, ur, fsys, cfgFS)
		}
	}
	p.disableUnits(units, reports, bad)
	p.placePresets(units, reports, bad, fsys)
	p.startOnBoot(units, reports, bad)
	p.firstBootPresets(units, reports)
	for _, ur := range reports {
		if ur != nil {
			p.units = append(p.units, *ur)
		}
	}
}

// unitFileMode is the mode of a unit's file and drop-ins: the source's, or
// 0644 as Ignition writes them.
func unitFileMode(u model.Unit) uint32 {
	if u.FileMode != 0 {
		return u.FileMode
	}
	return 0o644
}

// unitFS is the configuration's part of the image as far as systemctl
// looks at it: every regular file and symlink placed so far (units,
// drop-ins, mask links, and files the configuration writes into unit
// directories), rooted at "/".
func (p *placer) unitFS() fstest.MapFS {
	m := fstest.MapFS{}
	for _, e := range p.tree.Entries() {
		switch e.Kind {
		case tree.File:
			m[e.Path[1:]] = &fstest.MapFile{Data: e.Data, Mode: fs.FileMode(e.Mode) & fs.ModePerm}
		case tree.Symlink:
			m[e.Path[1:]] = &fstest.MapFile{Data: []byte(e.Target), Mode: fs.ModeSymlink | 0o777}
		}
	}
	return m
}

// fallbackInstall is the [Install] section assumed for a unit that neither
// the configuration nor the base tree has.
const fallbackInstall = "[Install]\nWantedBy=" + FallbackWantedBy + "\n"

// enable creates the links `systemctl enable` (u.Enabled true) creates for
// u, looking units up in fsys (cfgFS over the base).
func (p *placer) enable(u model.Unit, ur *UnitReport, fsys fs.FS, cfgFS fs.FS) {
	unitPath := path.Join(UnitDir, u.Name)
	if !*u.Enabled {
		ur.Enablement = "disabled" // see disableUnits
		return
	}
	ur.Enablement = "enabled"
	uf, err := systemd.LoadFromFS(fsys, u.Name)
	switch {
	case err == nil:
		ur.InstallFrom = "base"
		if _, err := fs.Lstat(cfgFS, strings.TrimPrefix(uf.Path, "/")); err == nil {
			ur.InstallFrom = "unit"
		}
	case errors.Is(err, systemd.ErrNotFound) && p.req.Base != nil:
		// The base is known and does not ship it: `systemctl enable`
		// fails there ("Unit file ... does not exist") and creates no
		// link, and Ignition's presets name a unit that is not there.
		ur.InstallFrom = "missing"
		p.warns = append(p.warns, fmt.Sprintf("%s: unit %s is enabled, but neither the configuration nor the base image ships it: systemctl enable fails for it on the node; no enablement links created", u.Origin, u.Name))
		return
	case errors.Is(err, systemd.ErrNotFound):
		// Shipped by the OS, but the base tree is not available or does
		// not have it: assume WantedBy=multi-user.target, plus what the
		// configured drop-ins say.
		ur.InstallFrom = "fallback"
		dropins := make([]systemd.DropIn, 0, len(u.DropIns))
		for _, d := range u.DropIns {
			dropins = append(dropins, systemd.DropIn{Name: d.Name, Text: d.Contents})
		}
		in, err := systemd.ParseInstallDropIns(fallbackInstall, dropins)
		if err != nil {
			p.errorf(u.Origin, unitPath, "enable %s: %v", u.Name, err)
			return
		}
		uf = systemd.UnitFile{Name: u.Name, Path: path.Join("/usr/lib/systemd/system", u.Name), Install: in}
		why := "the base image tree is not available"
		also := ""
		if plain, _ := systemd.ParseInstall(fallbackInstall); !reflect.DeepEqual(plain, in) {
			also = " and the [Install] lines of its drop-ins"
		}
		p.warns = append(p.warns, fmt.Sprintf("%s: unit %s has no contents and %s: enabled with WantedBy=%s%s", u.Origin, u.Name, why, FallbackWantedBy, also))
	default:
		// Masked, linked, unreadable: systemctl enable fails too.
		p.errorf(u.Origin, unitPath, "cannot enable: %v", err)
		return
	}
	if uf.Install.Empty() {
		p.warns = append(p.warns, fmt.Sprintf("%s: unit %s is enabled but has no [Install] section: systemctl enable creates no links", u.Origin, u.Name))
	}
	links, err := systemd.EnableLinks(uf, systemd.FSLookup(fsys))
	if err != nil {
		// systemctl enable fails too (after creating the valid links):
		// the node agent would report the unit as failed. The errors
		// name the unit ("enable NAME: ...").
		p.errorf(u.Origin, unitPath, "%s", strings.ReplaceAll(err.Error(), "\n", "; "))
		return
	}
	for _, l := range links {
		p.add(tree.Entry{Path: l.Path, Kind: tree.Symlink, Mode: 0o777, Target: l.Target, Layer: LayerConfig},
			Baked{Path: l.Path, Source: u.Origin, Generated: true})
		ur.Links = append(ur.Links, l.Path+" -> "+l.Target)
	}
	if p.req.Base != nil {
		p.warnUnshippedTargets(u, links, fsys)
	}
}

// warnUnshippedTargets warns about the targets (or other units) a unit is
// enabled into (X.wants/, X.requires/, X.upholds/) that neither the
// configuration nor the base ships: the link is there, but nothing pulls
// the unit in until something ships X.
func (p *placer) warnUnshippedTargets(u model.Unit, links []systemd.Link, fsys fs.FS) {
	seen := map[string]bool{}
	for _, l := range links {
		dir := path.Dir(l.Path)
		if path.Dir(dir) != UnitDir {
			continue
		}
		name := path.Base(dir)
		for _, suffix := range []string{".wants", ".requires", ".upholds"} {
			t, ok := strings.CutSuffix(name, suffix)
			if !ok || seen[l.Path] {
				continue
			}
			seen[l.Path] = true
			if _, err := systemd.LoadFromFS(fsys, t); errors.Is(err, systemd.ErrNotFound) {
				by := ""
				if n := path.Base(l.Path); n != u.Name {
					by = " (through " + u.Name + ")"
				}
				p.warns = append(p.warns, fmt.Sprintf("%s: enabling %s%s links it into %s, which neither the configuration nor the base image ships: nothing pulls it in through %s", u.Origin, path.Base(l.Path), by, t, l.Path))
			}
		}
	}
}

// disableUnits does what `systemctl disable` does for the units the
// configuration disables, after the enabling (as the MCO runs it, and as
// the node agent disables a unit): every enablement link of the unit (its
// name, its aliases, its Also= units, links to it) goes. Links this layer
// would add are dropped; links and directories the base image has are
// removed with whiteouts, so that the image has exactly the links
// `systemctl --root disable` leaves on the base with this layer.
func (p *placer) disableUnits(units []model.Unit, reports []*UnitReport, bad []bool) {
	var names []string
	var idx []int
	for i, u := range units {
		if reports[i] != nil && !bad[i] && !u.Mask && u.Enabled != nil && !*u.Enabled {
			names = append(names, u.Name)
			idx = append(idx, i)
		}
	}
	if len(names) == 0 {
		return
	}
	var fsys fs.FS = p.unitFS()
	if p.req.Base != nil {
		fsys = systemd.Overlay(fsys, p.req.Base)
	}
	all, err := systemd.DisableLinks(fsys, names...)
	if err != nil {
		u := units[idx[0]]
		p.errorf(u.Origin, path.Join(UnitDir, u.Name), "%s", strings.ReplaceAll(err.Error(), "\n", "; "))
		return
	}
	origin := p.reportDisabled(fsys, units, reports, idx)
	gone := p.removeDisabled(all, origin)
	// Links another unit's Also= created and a disable removed again are
	// not in the image.
	for _, ur := range reports {
		if ur == nil {
			continue
		}
		kept := ur.Links[:0]
		for _, l := range ur.Links {
			if lp, _, _ := strings.Cut(l, " -> "); !gone[lp] {
				kept = append(kept, l)
			}
		}
		ur.Links = kept
	}
}

// reportDisabled names in each disabled unit's report what its own
// disable removes, and returns the origin of each removed path (the first
// unit that removes it).
func (p *placer) reportDisabled(fsys fs.FS, units []model.Unit, reports []*UnitReport, idx []int) map[string]model.Origin {
	for _, i := range idx {
		u, ur := units[i], reports[i]
		if r, err := systemd.DisableLinks(fsys, u.Name); err == nil {
			ur.Removed = append(append(ur.Removed, r.Links...), r.Dirs...)
		}
		if p.req.Base == nil && u.Contents == nil {
			p.warns = append(p.warns, fmt.Sprintf("%s: unit %s is disabled, but the base image tree is not available: enablement links the base has stay", u.Origin, u.Name))
		}
	}
	origin := map[string]model.Origin{}
	for _, i := range idx {
		for _, r := range reports[i].Removed {
			if _, ok := origin[r]; !ok {
				origin[r] = units[i].Origin
			}
		}
	}
	return origin
}

// removeDisabled takes the links and directories a disable removes out of
// the layer, and whites out those the base has (a path below a removed
// directory goes with it). It returns every removed path.
func (p *placer) removeDisabled(all systemd.Removal, origin map[string]model.Origin) map[string]bool {
	gone := map[string]bool{}
	for _, d := range all.Dirs {
		gone[d] = true
	}
	below := func(q string) bool {
		for d := path.Dir(q); d != "/"; d = path.Dir(d) {
			if gone[d] {
				return true
			}
		}
		return false
	}
	for _, l := range all.Links {
		if _, ok := p.tree.Get(l); ok {
			if err := p.tree.Remove(l); err != nil {
				p.errs = append(p.errs, err)
			}
			delete(p.baked, l)
		}
		gone[l] = true
	}
	for _, q := range append(append([]string(nil), all.Links...), all.Dirs...) {
		if e, ok := p.tree.Get(q); ok && e.Kind == tree.Dir {
			if err := p.tree.Remove(q); err != nil {
				p.errs = append(p.errs, err)
			}
			delete(p.baked, q)
		}
		if below(q) || p.req.Base == nil {
			continue
		}
		if _, err := fs.Lstat(p.req.Base, strings.TrimPrefix(q, "/")); err != nil {
			continue // only in this layer: not creating it is enough
		}
		p.add(tree.Entry{Path: q, Kind: tree.Whiteout, Layer: LayerConfig},
			Baked{Path: q, Source: origin[q], Generated: true})
	}
	return gone
}

// placeKargs writes the bootc kargs.d file.
func (p *placer) placeKargs(kargs []string) {
	if len(kargs) == 0 {
		return
	}
	data := KargsTOML(kargs)
	p.add(tree.Entry{Path: KargsPath, Kind: tree.File, Mode: 0o644, Data: data, Layer: LayerConfig},
		Baked{Path: KargsPath, Source: model.Origin{Document: "oslayer", Field: "kernelArguments"}, Generated: true})
}

// KargsTOML renders bootc's kargs.d file: `kargs = ["a", "b"]` with TOML
// basic-string escaping.
func KargsTOML(kargs []string) []byte {
	var b strings.Builder
	b.WriteString("# Kernel arguments of this pool, written by oslayer.\nkargs = [")
	for i, k := range kargs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(tomlString(k))
	}
	b.WriteString("]\n")
	return []byte(b.String())
}

func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			b.WriteString(`\u` + fmt.Sprintf("%04X", r))
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// bakedList returns the report entries in tree order.
func (p *placer) bakedList() []Baked {
	keys := make([]string, 0, len(p.baked))
	for k := range p.baked {
		keys = append(keys, k)
	}
	key := func(k string) string { return strings.TrimPrefix(k, "var:") }
	sort.Slice(keys, func(i, j int) bool {
		a, b := key(keys[i]), key(keys[j])
		if a != b {
			return tree.Less(a, b)
		}
		return keys[i] < keys[j]
	})
	out := make([]Baked, 0, len(keys))
	for _, k := range keys {
		out = append(out, *p.baked[k])
	}
	return out
}

// docName is the name of a source document as recorded inside the image.
// Files given on the command line are not named at all, so that the image
// depends on their content only, never on file names or paths: the
// object's kind, name and field say where an item came from, and the
// report and the provenance map those to the files. Content that came
// from a Secret ("Secret NAMESPACE/NAME") and generated content
// ("oslayer") keep their names, which are content too.
func docName(d string) string {
	if d == "oslayer" || strings.HasPrefix(d, "Secret ") {
		return d
	}
	return ""
}

func packages(cfg *model.Config) []string {
	var out []string
	for _, e := range cfg.Extensions {
		out = append(out, "extension:"+e)
	}
	if cfg.KernelType != "" && cfg.KernelType != "default" {
		out = append(out, "kernelType:"+cfg.KernelType)
	}
	return out
}
