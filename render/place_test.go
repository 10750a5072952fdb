package render

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/oslayer/oslayer/render/systemd"
	"github.com/oslayer/oslayer/render/tree"
	"github.com/oslayer/oslayer/render/varmech"
	"github.com/oslayer/oslayer/sources/model"
)

func org(field string) model.Origin {
	return model.Origin{Document: "in/pool.yaml", Kind: "MachineConfig", Name: "99-test", Field: field}
}

func ptr[T any](v T) *T { return &v }

// handConfig exercises every placement rule with a hand-built config.
func handConfig() *model.Config {
	big := make([]byte, PayloadThreshold)
	return &model.Config{
		Files: []model.File{
			{Path: "/etc/sysctl.d/99-k8s.conf", Mode: 0o644, Data: []byte("net.ipv4.ip_forward = 1\n"), Origin: org("spec.config.storage.files[0]")},
			{Path: "/usr/libexec/helper", Mode: 0o4755, UID: 0, GID: 10, Data: []byte("#!/bin/sh\n"), Origin: org("spec.config.storage.files[1]")},
			{Path: "/usr/share/big.bin", Mode: 0o644, Data: big, Origin: org("spec.config.storage.files[2]")},
			{Path: "/var/lib/kubelet/config.yaml", Mode: 0o600, Data: []byte("kind: KubeletConfiguration\n"), Origin: org("spec.config.storage.files[3]")},
			{Path: "/opt/bin/kubelet", Mode: 0o755, Data: []byte("ELF"), FromImage: "registry.example/hyperkube@sha256:00", Origin: org("spec.files[4]")},
			{Path: "/usr/local/bin/configure-ovs.sh", Mode: 0o755, Data: []byte("#!/bin/bash\n"), Origin: org("spec.config.storage.files[5]")},
		},
		Dirs: []model.Dir{
			{Path: "/etc/kubernetes/manifests", Mode: 0o750, Origin: org("spec.config.storage.directories[0]")},
			{Path: "/var/lib/containers", Mode: 0o711, Origin: org("spec.config.storage.directories[1]")},
		},
		Links: []model.Link{
			{Path: "/etc/localtime", Target: "../usr/share/zoneinfo/UTC", Origin: org("spec.config.storage.links[0]")},
			{Path: "/usr/libexec/helper2", Target: "/usr/libexec/helper", Hard: true, Origin: org("spec.config.storage.links[1]")},
		},
		Units: []model.Unit{
			{Name: "kubelet.service", Contents: ptr("[Unit]\nDescription=kubelet\n[Service]\nExecStart=/usr/bin/kubelet\n[Install]\nWantedBy=multi-user.target\n"),
				Enabled: ptr(true), Origin: org("spec.config.systemd.units[0]"),
				DropIns: []model.DropIn{{Name: "10-env.conf", Contents: "[Service]\nEnvironment=A=1\n", Origin: org("spec.config.systemd.units[0].dropins[0]")}}},
			{Name: "containerd.service", Enabled: ptr(true), Origin: org("spec.config.systemd.units[1]"),
				DropIns: []model.DropIn{{Name: "11-exec.conf", Contents: "[Service]\nExecStart=\n", Origin: org("spec.config.systemd.units[1].dropins[0]")}}},
			{Name: "rpm-ostreed-automatic.timer", Mask: true, Origin: org("spec.config.systemd.units[2]")},
			{Name: "stopped.service", Contents: ptr("[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n"), Enabled: ptr(false), Origin: org("spec.config.systemd.units[3]")},
		},
		KernelArgs: []string{"systemd.unified_cgroup_hierarchy=1", `quote"back\slash`},
		Extensions: []string{"usbguard"},
		KernelType: "realtime",
		Runtime:    []model.Runtime{{Item: "passwd.users[0].sshAuthorizedKeys", Reason: "ssh keys live under /var/home", Origin: org("spec.config.passwd.users[0]")}},
		Inputs:     []model.Input{{Path: "in/pool.yaml", Kind: "MachineConfig", Name: "99-test", SHA256: "abc"}},
	}
}

func TestRenderConfigHand(t *testing.T) {
	res, err := RenderConfig(context.Background(), Request{}, handConfig())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range res.Layers {
		names = append(names, l.Name)
	}
	if s := strings.Join(names, ","); s != "payload,config,metadata" {
		t.Fatalf("layers = %s", s)
	}
	golden(t, "hand.txt", listing(res.tree))

	get := func(p string) *tree.Entry {
		t.Helper()
		e, ok := res.tree.Get(p)
		if !ok {
			t.Fatalf("%s missing; tree:\n%s", p, listing(res.tree))
		}
		return e
	}
	// /etc and /usr as they are, never usr/etc.
	if e := get("/etc/sysctl.d/99-k8s.conf"); e.Mode != 0o644 || e.Layer != LayerConfig {
		t.Errorf("sysctl: %+v", e)
	}
	if e := get("/usr/libexec/helper"); e.Mode != 0o4755 || e.GID != 10 {
		t.Errorf("setuid helper: %+v", e)
	}
	if e := get("/usr/libexec/helper2"); e.Kind != tree.Hardlink || e.Target != "/usr/libexec/helper" {
		t.Errorf("hard link: %+v", e)
	}
	if e := get("/usr/share/big.bin"); e.Layer != LayerPayload {
		t.Errorf("1 MiB file not in payload: %s", e.Layer)
	}
	for _, e := range res.tree.Entries() {
		if strings.HasPrefix(e.Path, "/usr/etc") || e.Path == "/var" || strings.HasPrefix(e.Path, "/var/") || strings.HasPrefix(e.Path, "/opt") || strings.HasPrefix(e.Path, "/usr/local") {
			t.Errorf("entry at a path ostree does not keep: %s", e.Path)
		}
	}
	// /var, /opt, /usr/local through the mechanism.
	if e := get(varmech.StoreDir + "/var/opt/bin/kubelet"); e.Layer != LayerPayload || e.Mode != 0o755 {
		t.Errorf("imageRef kubelet: %+v", e)
	}
	if e := get(varmech.StoreDir + "/var/usrlocal/bin/configure-ovs.sh"); e.Layer != LayerConfig {
		t.Errorf("usr/local script: %+v", e)
	}
	tmpfiles := string(get(varmech.TmpfilesPath).Data)
	for _, want := range []string{"/var/lib/kubelet/config.yaml", "/var/opt/bin/kubelet", "/var/lib/containers"} {
		if !strings.Contains(tmpfiles, want) {
			t.Errorf("tmpfiles.d lacks %s:\n%s", want, tmpfiles)
		}
	}
	// Units.
	if e := get(UnitDir + "/kubelet.service"); e.Mode != 0o644 {
		t.Errorf("unit mode %o", e.Mode)
	}
	get(UnitDir + "/kubelet.service.d/10-env.conf")
	get(UnitDir + "/containerd.service.d/11-exec.conf")
	if e := get(UnitDir + "/multi-user.target.wants/kubelet.service"); e.Target != UnitDir+"/kubelet.service" {
		t.Errorf("kubelet link -> %s", e.Target)
	}
	if e := get(UnitDir + "/multi-user.target.wants/containerd.service"); e.Target != "/usr/lib/systemd/system/containerd.service" {
		t.Errorf("containerd fallback link -> %s", e.Target)
	}
	if e := get(UnitDir + "/rpm-ostreed-automatic.timer"); e.Kind != tree.Symlink || e.Target != "/dev/null" {
		t.Errorf("mask: %+v", e)
	}
	if _, ok := res.tree.Get(UnitDir + "/multi-user.target.wants/stopped.service"); ok {
		t.Error("disabled unit was enabled")
	}
	// Kernel arguments, packages.
	if got := string(get(KargsPath).Data); !strings.Contains(got, `kargs = ["systemd.unified_cgroup_hierarchy=1", "quote\"back\\slash"]`) {
		t.Errorf("kargs file:\n%s", got)
	}
	if s := strings.Join(res.Packages, ","); s != "extension:usbguard,kernelType:realtime" {
		t.Errorf("packages = %s", s)
	}
	if len(res.KernelArgs) != 2 {
		t.Errorf("kernel args = %q", res.KernelArgs)
	}
	// Report: fallback warning, runtime item, every input accounted for.
	if !slices.ContainsFunc(res.Report.Warnings, func(w string) bool {
		return strings.Contains(w, "containerd.service") && strings.Contains(w, "WantedBy=multi-user.target")
	}) {
		t.Errorf("no fallback warning: %q", res.Report.Warnings)
	}
	if len(res.Report.Runtime) != 1 {
		t.Errorf("runtime = %+v", res.Report.Runtime)
	}
	checkAccounted(t, handConfig(), res)
	// The manifest is in the metadata layer and lists the stored path.
	man := get(ManifestPath)
	if man.Layer != LayerMetadata {
		t.Errorf("manifest layer %s", man.Layer)
	}
	var m Manifest
	if err := json.Unmarshal(man.Data, &m); err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, it := range m.Items {
		if it.Path == "/opt/bin/kubelet" {
			found = it.StoredAt == varmech.StoreDir+"/var/opt/bin/kubelet" && it.Layer == LayerPayload && it.Source.Document == "" && it.Source.Kind != "" && it.Source.Field == "spec.files[4]"
		}
	}
	if !found {
		t.Errorf("manifest lacks /opt/bin/kubelet with its store path and source:\n%s", man.Data)
	}
	// The image names objects, not the files they came from.
	if cb := res.Layers[1].CreatedBy; !strings.Contains(cb, "config from MachineConfig 99-test") || strings.Contains(cb, "pool.yaml") || strings.Contains(string(man.Data), "pool.yaml") {
		t.Errorf("createdBy = %q", res.Layers[1].CreatedBy)
	}
}

// checkAccounted asserts that every item of cfg is baked or reported.
func checkAccounted(t *testing.T, cfg *model.Config, res *Result) {
	t.Helper()
	baked := map[string]bool{}
	for _, b := range res.Report.Baked {
		baked[b.Path] = true
	}
	for _, f := range cfg.Files {
		if !baked[f.Path] {
			t.Errorf("file %s (%s) neither baked nor reported", f.Path, f.Origin)
		}
	}
	for _, d := range cfg.Dirs {
		if !baked[d.Path] {
			t.Errorf("dir %s (%s) not baked", d.Path, d.Origin)
		}
	}
	for _, l := range cfg.Links {
		if !baked[l.Path] {
			t.Errorf("link %s (%s) not baked", l.Path, l.Origin)
		}
	}
	units := map[string]bool{}
	for _, u := range res.Report.Units {
		units[u.Name] = true
	}
	for _, u := range cfg.Units {
		if !units[u.Name] {
			t.Errorf("unit %s not in the report", u.Name)
		}
		for _, d := range u.DropIns {
			if p := UnitDir + "/" + u.Name + ".d/" + d.Name; !baked[p] {
				t.Errorf("drop-in %s not baked", p)
			}
		}
	}
	if len(res.Report.Runtime) != len(cfg.Runtime) {
		t.Errorf("runtime items: report %d, config %d", len(res.Report.Runtime), len(cfg.Runtime))
	}
}

func TestUnitInstallFromBase(t *testing.T) {
	base := fstest.MapFS{
		"usr/lib/systemd/system/containerd.service": {Data: []byte("[Service]\nExecStart=/usr/bin/containerd\n[Install]\nWantedBy=sockets.target\nAlias=cri.service\n")},
		"usr/lib/systemd/system/sockets.target":     {Data: []byte("[Unit]\nDescription=Sockets\n")},
	}
	cfg := &model.Config{Units: []model.Unit{{Name: "containerd.service", Enabled: ptr(true), Origin: org("spec.units[0]")}}}
	res, err := RenderConfig(context.Background(), Request{Base: base}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for p, target := range map[string]string{
		UnitDir + "/sockets.target.wants/containerd.service": "/usr/lib/systemd/system/containerd.service",
		UnitDir + "/cri.service":                             "/usr/lib/systemd/system/containerd.service",
	} {
		if e, ok := res.tree.Get(p); !ok || e.Target != target {
			t.Errorf("%s: %+v, want -> %s", p, e, target)
		}
	}
	if len(res.Report.Warnings) != 0 || res.Report.Units[0].InstallFrom != "base" {
		t.Errorf("warnings %q installFrom %q", res.Report.Warnings, res.Report.Units[0].InstallFrom)
	}
}

// TestHostilePlacement: each input is a clear error naming the source and
// the path, and no output directory is written.
func TestHostilePlacement(t *testing.T) {
	cases := []struct {
		path string
		want string
	}{
		{"/usr/etc/x", "/usr/etc is ostree's copy"},
		{"/run/x", "children of /run"},
		{"/tmp/x", "children of /tmp"},
		{"/dev/x", "children of /dev"},
		{"/proc/sys/x", "children of /proc"},
		{"/boot/x", "/boot"},
		{"/sysroot/x", "/sysroot must never appear"},
		{"/data/x", "(allowTopLevel data)"},
		{"/home", "top-level directory itself"},
		{"/etc/a\x00b", "NUL"},
		{"/etc/\xff", "not valid UTF-8"},
		{"etc/x", "not absolute"},
		{"/etc/../x", `".."`},
		{"/var/lib/../../etc/shadow", `".."`},
		{"/etc", "top-level directory itself"},
	}
	for _, c := range cases {
		t.Run(strings.ReplaceAll(c.path, "/", "_"), func(t *testing.T) {
			cfg := &model.Config{Files: []model.File{
				{Path: "/etc/ok", Mode: 0o644, Origin: org("spec.config.storage.files[0]")},
				{Path: c.path, Mode: 0o644, Data: []byte("x"), Origin: org("spec.config.storage.files[7]")},
			}}
			out := filepath.Join(t.TempDir(), "out")
			err := renderToDir(Request{}, cfg, out)
			if err == nil {
				t.Fatalf("%q rendered", c.path)
			}
			for _, w := range []string{c.want, "in/pool.yaml", "spec.config.storage.files[7]"} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("output written: %v", err)
			}
			if ents, _ := os.ReadDir(filepath.Dir(out)); len(ents) != 0 {
				t.Errorf("leftovers next to the output: %v", ents)
			}
		})
	}
}

func renderToDir(req Request, cfg *model.Config, dir string) error {
	res, err := RenderConfig(context.Background(), req, cfg)
	if err != nil {
		return err
	}
	return res.WriteDir(context.Background(), dir)
}

func TestAllowTopLevel(t *testing.T) {
	cfg := &model.Config{Files: []model.File{{Path: "/data/x/y", Mode: 0o644, Origin: org("f")}}}
	res, err := RenderConfig(context.Background(), Request{AllowTopLevel: []string{"/data"}}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := res.tree.Get("/data/x/y"); !ok {
		t.Fatal("/data/x/y missing")
	}
}

// TestVarAliases: /root, /home, /srv and /mnt are symlinks into /var on
// FCOS and RHCOS like /opt: their content is stored under /usr and linked
// into /var by tmpfiles.d rules, as /opt content is.
func TestVarAliases(t *testing.T) {
	cfg := &model.Config{
		Files: []model.File{
			{Path: "/root/.ssh/config", Mode: 0o600, Data: []byte("Host *\n"), Origin: org("spec.config.storage.files[0]")},
			{Path: "/home/core/notes", Mode: 0o644, UID: 1000, GID: 1000, Data: []byte("n"), Origin: org("spec.config.storage.files[1]")},
			{Path: "/srv/www/index.html", Mode: 0o644, Data: []byte("<p>"), Origin: org("spec.config.storage.files[2]")},
			{Path: "/opt/bin/tool", Mode: 0o755, Data: []byte("#!/bin/sh\n"), Origin: org("spec.config.storage.files[3]")},
		},
		Dirs:  []model.Dir{{Path: "/mnt/data", Mode: 0o750, Origin: org("spec.config.storage.directories[0]")}},
		Links: []model.Link{{Path: "/home/core/bin", Target: "/opt/bin", Origin: org("spec.config.storage.links[0]")}},
	}
	res, err := RenderConfig(context.Background(), Request{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/var/roothome/.ssh/config", "/var/home/core/notes", "/var/srv/www/index.html", "/var/opt/bin/tool"} {
		e, ok := res.tree.Get("/usr/lib/oslayer/var" + p)
		if !ok {
			t.Errorf("%s not stored under /usr/lib/oslayer/var", p)
			continue
		}
		if p == "/var/home/core/notes" && (e.UID != 1000 || e.GID != 1000) {
			t.Errorf("%s owner %d:%d", p, e.UID, e.GID)
		}
	}
	rules, ok := res.tree.Get("/usr/lib/tmpfiles.d/oslayer-var.conf")
	if !ok {
		t.Fatal("no tmpfiles.d rules")
	}
	for _, l := range []string{
		"L+ /var/roothome/.ssh/config - - - - /usr/lib/oslayer/var/var/roothome/.ssh/config",
		"L+ /var/home/core/notes - - - - /usr/lib/oslayer/var/var/home/core/notes",
		"d /var/mnt/data 0750 0 0 -",
		"L+ /var/home/core/bin - - - - /opt/bin",
	} {
		if !strings.Contains(string(rules.Data), l+"\n") {
			t.Errorf("tmpfiles.d rules lack %q:\n%s", l, rules.Data)
		}
	}
	for _, b := range res.Report.Baked {
		if b.Path == "/root/.ssh/config" && b.StoredAt != "/usr/lib/oslayer/var/var/roothome/.ssh/config" {
			t.Errorf("report: %+v", b)
		}
	}
}

func TestPlacementConflicts(t *testing.T) {
	cases := map[string]*model.Config{
		"opt vs var/opt": {Files: []model.File{
			{Path: "/opt/bin/x", Mode: 0o755, Data: []byte("a"), Origin: org("spec.files[0]")},
			{Path: "/var/opt/bin/x", Mode: 0o755, Data: []byte("b"), Origin: org("spec.files[1]")},
		}},
		"unit file vs storage file": {
			Files: []model.File{{Path: "/etc/systemd/system/a.service", Mode: 0o644, Data: []byte("x"), Origin: org("spec.files[0]")}},
			Units: []model.Unit{{Name: "a.service", Contents: ptr("y"), Origin: org("spec.units[0]")}},
		},
		"hard link into /var": {
			Files: []model.File{{Path: "/var/x", Mode: 0o644, Origin: org("spec.files[0]")}},
			Links: []model.Link{{Path: "/etc/x", Target: "/var/x", Hard: true, Origin: org("spec.links[0]")}},
		},
		"hard link to nothing": {
			Links: []model.Link{{Path: "/etc/x", Target: "/etc/none", Hard: true, Origin: org("spec.links[0]")}},
		},
		"invalid unit name": {Units: []model.Unit{{Name: "../x.service", Contents: ptr(""), Origin: org("spec.units[0]")}}},
		"invalid drop-in":   {Units: []model.Unit{{Name: "a.service", DropIns: []model.DropIn{{Name: "../x", Origin: org("spec.units[0].dropIns[0]")}}, Origin: org("spec.units[0]")}}},
	}
	for name, cfg := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := RenderConfig(context.Background(), Request{}, cfg)
			if err == nil || !strings.Contains(err.Error(), "in/pool.yaml") {
				t.Fatalf("err = %v", err)
			}
			t.Log(err)
		})
	}
}

func TestKargsTOML(t *testing.T) {
	got := string(KargsTOML([]string{"a=b", "c\"d", `e\f`, "tab\there", "\x01"}))
	want := "# Kernel arguments of this pool, written by oslayer.\nkargs = [\"a=b\", \"c\\\"d\", \"e\\\\f\", \"tab\\there\", \"\\u0001\"]\n"
	if got != want {
		t.Fatalf("got %q\nwant %q", got, want)
	}
}

// TestLayerSplit: a change to small config leaves the payload layer
// untouched, and a change to payload leaves the config layer untouched.
func TestLayerSplit(t *testing.T) {
	render := func(mut func(*model.Config)) map[string]string {
		t.Helper()
		cfg := handConfig()
		mut(cfg)
		res, err := RenderConfig(context.Background(), Request{}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, l := range res.Layers {
			m[l.Name] = l.Digest.String()
		}
		return m
	}
	base := render(func(*model.Config) {})
	cfgChange := render(func(c *model.Config) { c.Files[0].Data = []byte("net.ipv4.ip_forward = 0\n") })
	if cfgChange[LayerPayload] != base[LayerPayload] {
		t.Error("a sysctl change changed the payload layer")
	}
	if cfgChange[LayerConfig] == base[LayerConfig] || cfgChange[LayerMetadata] == base[LayerMetadata] {
		t.Error("a sysctl change did not change the config and metadata layers")
	}
	payloadChange := render(func(c *model.Config) { c.Files[4].Data = []byte("ELF v2") })
	if payloadChange[LayerConfig] != base[LayerConfig] {
		t.Error("an imageRef binary change changed the config layer")
	}
	if payloadChange[LayerPayload] == base[LayerPayload] {
		t.Error("an imageRef binary change did not change the payload layer")
	}
}

// TestLayersHoldTheTree: the union of the layer tars is exactly the tree,
// each entry in its own layer, parents present in every layer.
func TestLayersHoldTheTree(t *testing.T) {
	res, err := RenderConfig(context.Background(), Request{}, handConfig())
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for _, l := range res.Layers {
		zr, err := gzip.NewReader(bytes.NewReader(l.Gzip))
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(zr)
		names := map[string]bool{}
		for i := 0; ; i++ {
			if i > 10000 {
				t.Fatal("too many entries")
			}
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			p := "/" + strings.TrimSuffix(h.Name, "/")
			if dir := path.Dir(p); dir != "/" && !names[dir] {
				t.Errorf("layer %s: %s before its parent", l.Name, p)
			}
			names[p] = true
			if h.Typeflag == tar.TypeDir {
				continue
			}
			if prev, dup := seen[p]; dup {
				t.Errorf("%s in layers %s and %s", p, prev, l.Name)
			}
			seen[p] = l.Name
			e, ok := res.tree.Get(p)
			if !ok || e.Layer != l.Name || int64(e.Mode) != h.Mode {
				t.Errorf("layer %s: %s (mode %o) does not match the tree: %+v", l.Name, p, h.Mode, e)
			}
		}
	}
	for _, e := range res.tree.Entries() {
		if e.Kind != tree.Dir && seen[e.Path] == "" {
			t.Errorf("%s is in no layer", e.Path)
		}
	}
}

func TestUnitTemplateInstanceAndBaseMiss(t *testing.T) {
	base := fstest.MapFS{"usr/lib/systemd/system/other.service": {Data: []byte("[Install]\nWantedBy=multi-user.target\n")}}
	cfg := &model.Config{Units: []model.Unit{
		{Name: "getty@.service", Contents: ptr("[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=getty.target\n"), Origin: org("spec.units[0]")},
		{Name: "getty@tty2.service", Enabled: ptr(true), Origin: org("spec.units[1]")},
		{Name: "missing.service", Enabled: ptr(true), Origin: org("spec.units[2]")},
	}}
	res, err := RenderConfig(context.Background(), Request{Base: base}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := res.tree.Get(UnitDir + "/getty.target.wants/getty@tty2.service"); !ok || e.Target != UnitDir+"/getty@.service" {
		t.Errorf("instance link: %+v\n%s", e, listing(res.tree))
	}
	if got := res.Report.Units[1].InstallFrom; got != "unit" {
		t.Errorf("instance installFrom %q", got)
	}
	// The base is known: no fallback, no link for a unit nobody ships.
	if got := res.Report.Units[2].InstallFrom; got != "missing" {
		t.Errorf("missing installFrom %q", got)
	}
	if res.Report.Units[2].Links != nil || strings.Contains(listing(res.tree), "missing.service") {
		t.Errorf("links for a unit nobody ships:\n%s", listing(res.tree))
	}
	w := res.Report.Warnings
	if len(w) != 2 ||
		!strings.Contains(w[0], "spec.units[1]: enabling getty@tty2.service links it into getty.target, which neither the configuration nor the base image ships") ||
		!strings.Contains(w[1], "spec.units[2]: unit missing.service is enabled, but neither the configuration nor the base image ships it") {
		t.Errorf("warnings %q", w)
	}
}

func TestInputsDigest(t *testing.T) {
	digest := func(req Request, mut func(*model.Config)) string {
		t.Helper()
		cfg := handConfig()
		mut(cfg)
		res, err := RenderConfig(context.Background(), req, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return res.InputsDigest
	}
	base := digest(Request{}, func(*model.Config) {})
	if !strings.HasPrefix(base, "sha256:") || len(base) != 71 {
		t.Fatalf("digest %q", base)
	}
	for name, d := range map[string]string{
		"input content": digest(Request{}, func(c *model.Config) { c.Inputs[0].SHA256 = "def" }),
		"image pin":     digest(Request{}, func(c *model.Config) { c.Files[4].FromImage = "registry.example/hyperkube@sha256:01" }),
		"pool":          digest(Request{Pool: "infra"}, func(*model.Config) {}),
		"bake-secrets":  digest(Request{BakeSecrets: true}, func(*model.Config) {}),
		"allow":         digest(Request{AllowTopLevel: []string{"srv"}}, func(*model.Config) {}),
		"epoch":         digest(Request{Epoch: DefaultEpoch.AddDate(1, 0, 0)}, func(*model.Config) {}),
	} {
		if d == base {
			t.Errorf("%s does not change the inputs digest", name)
		}
	}
	if d := digest(Request{}, func(c *model.Config) { c.Inputs[0].Path = "/elsewhere/pool.yaml" }); d != base {
		t.Error("the document's path changes the inputs digest")
	}
}

// TestUnitEnableError: a template without DefaultInstance= enabled into a
// plain target fails `systemctl enable` too: a render error that names the
// document, the field and the unit, and no result.
func TestUnitEnableError(t *testing.T) {
	cfg := &model.Config{Units: []model.Unit{
		{Name: "ok.service", Contents: ptr("[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n"), Enabled: ptr(true), Origin: org("spec.config.systemd.units[0]")},
		{Name: "agent@.service", Contents: ptr("[Service]\nExecStart=/bin/agent %i\n[Install]\nWantedBy=multi-user.target\n"), Enabled: ptr(true), Origin: org("spec.config.systemd.units[1]")},
	}}
	res, err := RenderConfig(context.Background(), Request{}, cfg)
	if err == nil {
		t.Fatalf("no error; tree:\n%s", listing(res.tree))
	}
	var me *model.Error
	if !errors.As(err, &me) {
		t.Fatalf("error %v (%T) is not a *model.Error", err, err)
	}
	if me.Origin.Document != "in/pool.yaml" || me.Origin.Field != "spec.config.systemd.units[1]" || me.Path != UnitDir+"/agent@.service" {
		t.Errorf("error names %+v at %q", me.Origin, me.Path)
	}
	want := "in/pool.yaml (MachineConfig 99-test) spec.config.systemd.units[1]: /etc/systemd/system/agent@.service: enable agent@.service: WantedBy=multi-user.target: "
	if !strings.HasPrefix(err.Error(), want) || strings.Count(err.Error(), "enable ") != 1 {
		t.Errorf("error %q, want it to start with %q and name the unit once", err, want)
	}
	for _, want := range []string{"in/pool.yaml", "spec.config.systemd.units[1]", "enable agent@.service:", "multi-user.target"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "ok.service") {
		t.Errorf("error blames the valid unit: %v", err)
	}
	if res != nil {
		t.Error("a result was returned with the error")
	}
}

// TestUnitEnableMaskedInBase: the base masks the unit the configuration
// enables; systemctl refuses ("Unit file ... is masked"), so does render.
func TestUnitEnableMaskedInBase(t *testing.T) {
	base := fstest.MapFS{
		"usr/lib/systemd/system/chronyd.service": {Data: []byte("[Install]\nWantedBy=multi-user.target\n")},
		"etc/systemd/system/chronyd.service":     {Data: []byte("/dev/null"), Mode: fs.ModeSymlink | 0o777},
	}
	cfg := &model.Config{Units: []model.Unit{{Name: "chronyd.service", Enabled: ptr(true), Origin: org("spec.units[0]")}}}
	_, err := RenderConfig(context.Background(), Request{Base: base}, cfg)
	if err == nil || !strings.Contains(err.Error(), "spec.units[0]") || !strings.Contains(err.Error(), "cannot enable: chronyd.service: "+systemd.ErrMasked.Error()) {
		t.Fatalf("err = %v, want a masked-unit error naming spec.units[0]", err)
	}
}

// TestUnitInstallFromDropIns: [Install] in a configured drop-in, in a base
// drop-in, of a configured template for an instance, and Also= of an
// instance: each resolves the way systemctl does.
func TestUnitInstallFromDropIns(t *testing.T) {
	base := fstest.MapFS{
		"usr/lib/systemd/system/kubelet.service":             {Data: []byte("[Service]\nExecStart=/usr/bin/kubelet\n")},
		"usr/lib/systemd/system/kubelet.service.d/10-i.conf": {Data: []byte("[Install]\nWantedBy=multi-user.target\n")},
		"usr/lib/systemd/system/crio.service":                {Data: []byte("[Service]\nExecStart=/usr/bin/crio\n[Install]\nWantedBy=multi-user.target\n")},
		"usr/lib/systemd/system/multi-user.target":           {Data: []byte("[Unit]\n")},
		"usr/lib/systemd/system/basic.target":                {Data: []byte("[Unit]\n")},
		"usr/lib/systemd/system/network.target":              {Data: []byte("[Unit]\n")},
	}
	cfg := &model.Config{Units: []model.Unit{
		// Configured unit without [Install]; a configured drop-in adds it.
		{Name: "node-setup.service", Contents: ptr("[Service]\nType=oneshot\nExecStart=/bin/true\n"), Enabled: ptr(true), Origin: org("spec.units[0]"),
			DropIns: []model.DropIn{
				{Name: "20-install.conf", Contents: "[Install]\nWantedBy=basic.target\nAlso=agent@eth0.service\n", Origin: org("spec.units[0].dropins[0]")},
				{Name: "10-install.conf", Contents: "[Install]\nWantedBy=network.target\n", Origin: org("spec.units[0].dropins[1]")},
			}},
		// A template and one of its instances enabled.
		{Name: "agent@.service", Contents: ptr("[Service]\nExecStart=/bin/agent %i\n[Install]\nWantedBy=agents.target\nAlias=helper@.service\n"), Origin: org("spec.units[1]")},
		{Name: "agent@lo.service", Enabled: ptr(true), Origin: org("spec.units[2]")},
		// Base unit whose [Install] is in the base's drop-in.
		{Name: "kubelet.service", Enabled: ptr(true), Origin: org("spec.units[3]")},
		// Base unit; a configured drop-in adds a WantedBy=.
		{Name: "crio.service", Enabled: ptr(true), Origin: org("spec.units[4]"),
			DropIns: []model.DropIn{{Name: "50-install.conf", Contents: "[Install]\nRequiredBy=kubelet.service\n", Origin: org("spec.units[4].dropins[0]")}}},
	}}
	res, err := RenderConfig(context.Background(), Request{Base: base}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	const etc, usr = UnitDir + "/", "/usr/lib/systemd/system/"
	want := map[string][]string{
		"node-setup.service": {
			etc + "agents.target.wants/agent@eth0.service -> " + etc + "agent@.service",
			etc + "basic.target.wants/node-setup.service -> " + etc + "node-setup.service",
			etc + "helper@eth0.service -> " + etc + "agent@.service",
			etc + "network.target.wants/node-setup.service -> " + etc + "node-setup.service",
		},
		"agent@.service": nil,
		"agent@lo.service": {
			etc + "agents.target.wants/agent@lo.service -> " + etc + "agent@.service",
			etc + "helper@lo.service -> " + etc + "agent@.service",
		},
		"kubelet.service": {etc + "multi-user.target.wants/kubelet.service -> " + usr + "kubelet.service"},
		"crio.service": {
			etc + "kubelet.service.requires/crio.service -> " + usr + "crio.service",
			etc + "multi-user.target.wants/crio.service -> " + usr + "crio.service",
		},
	}
	wantFrom := map[string]string{"node-setup.service": "unit", "agent@lo.service": "unit", "kubelet.service": "base", "crio.service": "base"}
	for _, u := range res.Report.Units {
		if !slices.Equal(u.Links, want[u.Name]) {
			t.Errorf("%s links:\n got %q\nwant %q", u.Name, u.Links, want[u.Name])
		}
		if u.InstallFrom != wantFrom[u.Name] {
			t.Errorf("%s installFrom %q, want %q", u.Name, u.InstallFrom, wantFrom[u.Name])
		}
		for _, l := range u.Links {
			p, target, _ := strings.Cut(l, " -> ")
			if e, ok := res.tree.Get(p); !ok || e.Kind != tree.Symlink || e.Target != target {
				t.Errorf("tree lacks %s: %+v", l, e)
			}
		}
	}
	if len(res.Report.Units) != len(want) {
		t.Errorf("%d units reported", len(res.Report.Units))
	}
	// agents.target is shipped by nobody: one warning per link into it.
	if w := res.Report.Warnings; len(w) != 2 ||
		!strings.Contains(w[0], "spec.units[0]: enabling agent@eth0.service (through node-setup.service) links it into agents.target, which neither the configuration nor the base image ships: nothing pulls it in through /etc/systemd/system/agents.target.wants/agent@eth0.service") ||
		!strings.Contains(w[1], "spec.units[2]: enabling agent@lo.service links it into agents.target") {
		t.Errorf("warnings %q", w)
	}
}

// TestUnitFallbackWithDropIn: no base tree, a unit without contents whose
// configured drop-in has [Install]: the documented fallback plus the
// drop-in's lines, and the warning says so.
func TestUnitFallbackWithDropIn(t *testing.T) {
	cfg := &model.Config{Units: []model.Unit{
		{Name: "containerd.service", Enabled: ptr(true), Origin: org("spec.units[0]"),
			DropIns: []model.DropIn{{Name: "10-install.conf", Contents: "[Install]\nWantedBy=kubelet.service\n", Origin: org("spec.units[0].dropins[0]")}}},
		{Name: "chronyd.service", Enabled: ptr(true), Origin: org("spec.units[1]"),
			DropIns: []model.DropIn{{Name: "10-env.conf", Contents: "[Service]\nEnvironment=A=1\n", Origin: org("spec.units[1].dropins[0]")}}},
	}}
	res, err := RenderConfig(context.Background(), Request{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	const etc, usr = UnitDir + "/", "/usr/lib/systemd/system/"
	if got, want := res.Report.Units[0].Links, []string{
		etc + "kubelet.service.wants/containerd.service -> " + usr + "containerd.service",
		etc + "multi-user.target.wants/containerd.service -> " + usr + "containerd.service",
	}; !slices.Equal(got, want) {
		t.Errorf("containerd links %q, want %q", got, want)
	}
	if got, want := res.Report.Units[1].Links, []string{etc + "multi-user.target.wants/chronyd.service -> " + usr + "chronyd.service"}; !slices.Equal(got, want) {
		t.Errorf("chronyd links %q, want %q", got, want)
	}
	want := []string{
		"in/pool.yaml (MachineConfig 99-test) spec.units[0]: unit containerd.service has no contents and the base image tree is not available: enabled with WantedBy=multi-user.target and the [Install] lines of its drop-ins",
		"in/pool.yaml (MachineConfig 99-test) spec.units[1]: unit chronyd.service has no contents and the base image tree is not available: enabled with WantedBy=multi-user.target",
	}
	if !slices.Equal(res.Report.Warnings, want) {
		t.Errorf("warnings:\n%s", strings.Join(res.Report.Warnings, "\n"))
	}
	for _, u := range res.Report.Units {
		if u.InstallFrom != "fallback" {
			t.Errorf("%s installFrom %q", u.Name, u.InstallFrom)
		}
	}
}

// TestUnitInstallParseError: an [Install] section that does not parse is
// one error naming the unit's source (not a second one from enabling it).
func TestUnitInstallParseError(t *testing.T) {
	cfg := &model.Config{Units: []model.Unit{
		{Name: "bad.service", Contents: ptr("[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=\"multi-user.target\n"), Enabled: ptr(true), Origin: org("spec.units[0]")},
	}}
	res, err := RenderConfig(context.Background(), Request{}, cfg)
	if err == nil || res != nil {
		t.Fatalf("err = %v", err)
	}
	want := "in/pool.yaml (MachineConfig 99-test) spec.units[0]: /etc/systemd/system/bad.service: unit bad.service: "
	if !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "\n") {
		t.Errorf("err = %q, want one error starting with %q", err, want)
	}
}

// TestUnitDropInInstallParseError: a drop-in whose [Install] does not parse
// is one error naming the drop-in's source.
func TestUnitDropInInstallParseError(t *testing.T) {
	cfg := &model.Config{Units: []model.Unit{
		{Name: "crio.service", Enabled: ptr(true), Origin: org("spec.units[0]"),
			DropIns: []model.DropIn{{Name: "10-i.conf", Contents: "[Install]\nWantedBy='kubelet.service\n", Origin: org("spec.units[0].dropins[0]")}}},
	}}
	res, err := RenderConfig(context.Background(), Request{}, cfg)
	if err == nil || res != nil {
		t.Fatalf("err = %v", err)
	}
	want := "in/pool.yaml (MachineConfig 99-test) spec.units[0].dropins[0]: /etc/systemd/system/crio.service.d/10-i.conf: unit crio.service: "
	if !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "\n") {
		t.Errorf("err = %q, want one error starting with %q", err, want)
	}
}

// TestUnitDisableRemovesBaseLinks: disabling OS units removes the base's
// enablement links (and a wants directory left empty) with whiteouts, and
// drops links of this layer that the disable removes (an Also= of an
// enabled unit); the report names what each disable removed.
func TestUnitDisableRemovesBaseLinks(t *testing.T) {
	const usr, etc = "usr/lib/systemd/system/", "etc/systemd/system/"
	base := fstest.MapFS{
		usr + "sshd.service":                              {Data: []byte("[Service]\nExecStart=/usr/sbin/sshd\n[Install]\nWantedBy=multi-user.target\nAlso=sshd.socket\n")},
		usr + "sshd.socket":                               {Data: []byte("[Socket]\nListenStream=22\n[Install]\nWantedBy=sockets.target\n")},
		usr + "chronyd.service":                           {Data: []byte("[Service]\nExecStart=/usr/sbin/chronyd\n[Install]\nWantedBy=multi-user.target\n")},
		usr + "multi-user.target":                         {Data: []byte("[Unit]\n")},
		etc + "multi-user.target.wants/sshd.service":      {Data: []byte("/usr/lib/systemd/system/sshd.service"), Mode: fs.ModeSymlink | 0o777},
		etc + "multi-user.target.wants/chronyd.service":   {Data: []byte("/usr/lib/systemd/system/chronyd.service"), Mode: fs.ModeSymlink | 0o777},
		etc + "sockets.target.wants/sshd.socket":          {Data: []byte("/usr/lib/systemd/system/sshd.socket"), Mode: fs.ModeSymlink | 0o777},
		"usr/lib/systemd/system-preset/90-default.preset": {Data: []byte("enable sshd.*\nenable chronyd.service\ndisable *\n")},
	}
	cfg := &model.Config{Units: []model.Unit{
		{Name: "sshd.service", Enabled: ptr(false), Origin: org("spec.units[0]")},
		{Name: "time-sync.service", Contents: ptr("[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\nAlso=chronyd.service\n"), Enabled: ptr(true), Origin: org("spec.units[1]")},
		{Name: "chronyd.service", Enabled: ptr(false), Origin: org("spec.units[2]")},
	}}
	res, err := RenderConfig(context.Background(), Request{Base: base}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"/etc/systemd/system/multi-user.target.wants/chronyd.service whiteout",
		"/etc/systemd/system/multi-user.target.wants/sshd.service whiteout",
		"/etc/systemd/system/multi-user.target.wants/time-sync.service symlink /etc/systemd/system/time-sync.service",
		"/etc/systemd/system/sockets.target.wants whiteout",
	}
	var got []string
	for _, e := range res.tree.Entries() {
		if strings.HasPrefix(e.Path, UnitDir+"/") && strings.Contains(e.Path, ".wants") && e.Kind != tree.Dir {
			got = append(got, strings.TrimSpace(e.Path+" "+e.Kind.String()+" "+e.Target))
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("entries:\n got %q\nwant %q", got, want)
	}
	byName := map[string]UnitReport{}
	for _, u := range res.Report.Units {
		byName[u.Name] = u
	}
	if r := byName["sshd.service"].Removed; !slices.Equal(r, []string{UnitDir + "/multi-user.target.wants/sshd.service", UnitDir + "/sockets.target.wants/sshd.socket", UnitDir + "/sockets.target.wants"}) {
		t.Errorf("sshd.service removed %q", r)
	}
	if l := byName["time-sync.service"].Links; !slices.Equal(l, []string{UnitDir + "/multi-user.target.wants/time-sync.service -> " + UnitDir + "/time-sync.service"}) {
		t.Errorf("time-sync.service links %q (the Also= link chronyd's disable removes must go)", l)
	}
	// A first boot's presets keep sshd.service disabled (oslayer's preset
	// file), but the vendor's "enable sshd.*" enables sshd.socket (its
	// Also=, which the disable removed), and enabling time-sync.service
	// pulls in its Also=chronyd.service: the report says so.
	if w := res.Report.Warnings; len(w) != 2 ||
		!strings.Contains(w[0], "spec.units[2]: a first boot's presets (systemctl preset-all, enable-only) create /etc/systemd/system/multi-user.target.wants/chronyd.service -> /usr/lib/systemd/system/chronyd.service again") ||
		!strings.Contains(w[1], "spec.units[0]: a first boot's presets (systemctl preset-all, enable-only) create /etc/systemd/system/sockets.target.wants/sshd.socket -> /usr/lib/systemd/system/sshd.socket again") {
		t.Errorf("warnings %q", w)
	}
	if fb := res.Report.FirstBoot; !slices.Equal(fb, []string{
		UnitDir + "/multi-user.target.wants/chronyd.service -> /usr/lib/systemd/system/chronyd.service",
		UnitDir + "/sockets.target.wants/sshd.socket -> /usr/lib/systemd/system/sshd.socket",
	}) {
		t.Errorf("first boot links %q", fb)
	}
	// The layer holds the whiteouts as OCI ".wh." files.
	var names []string
	for _, l := range res.Layers {
		zr, err := gzip.NewReader(bytes.NewReader(l.Gzip))
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(zr)
		for {
			h, err := tr.Next()
			if err != nil {
				break
			}
			if strings.Contains(h.Name, ".wh.") {
				names = append(names, h.Name)
			}
		}
	}
	if !slices.Equal(names, []string{"etc/systemd/system/multi-user.target.wants/.wh.chronyd.service", "etc/systemd/system/multi-user.target.wants/.wh.sshd.service", "etc/systemd/system/.wh.sockets.target.wants"}) {
		t.Errorf("whiteouts in the layers: %q", names)
	}

	// Without a base tree the base's links cannot be removed: the report
	// says so, and only this layer's links go.
	res, err = RenderConfig(context.Background(), Request{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if w := res.Report.Warnings; len(w) < 2 || !strings.Contains(strings.Join(w, "\n"), "spec.units[0]: unit sshd.service is disabled, but the base image tree is not available") {
		t.Errorf("warnings %q", w)
	}
	if _, ok := res.tree.Get(UnitDir + "/multi-user.target.wants/chronyd.service"); ok {
		t.Error("the Also= link of a disabled unit is in the layer")
	}
}

// TestUnitPresetFile: the preset file has a sorted rule per enabled or
// disabled unit, enabled instances of a template on one line; masked units
// and units left alone get none; and systemd's preset query of the
// rendered tree says what the configuration says.
func TestUnitPresetFile(t *testing.T) {
	cfg := &model.Config{Units: []model.Unit{
		{Name: "sshd.service", Enabled: ptr(false), Origin: org("spec.units[0]")},
		{Name: "kubelet.service", Contents: ptr("[Service]\nExecStart=/bin/true\n"), Enabled: ptr(true), Origin: org("spec.units[1]")},
		{Name: "getty@.service", Contents: ptr("[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=getty.target\n"), Origin: org("spec.units[2]")},
		{Name: "getty@tty2.service", Enabled: ptr(true), Origin: org("spec.units[3]")},
		{Name: "getty@tty1.service", Enabled: ptr(true), Origin: org("spec.units[4]")},
		{Name: "zincati.service", Mask: true, Origin: org("spec.units[5]")},
		{Name: "left-alone.service", Contents: ptr("[Service]\nExecStart=/bin/true\n"), Origin: org("spec.units[6]")},
	}}
	res, err := RenderConfig(context.Background(), Request{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	e, ok := res.tree.Get(PresetPath)
	if !ok {
		t.Fatalf("no %s:\n%s", PresetPath, listing(res.tree))
	}
	want := "disable sshd.service\nenable getty@.service tty1 tty2\nenable kubelet.service\n"
	if got := string(e.Data); !strings.HasSuffix(got, "\n"+want) || e.Mode != 0o644 {
		t.Errorf("%s (mode %o):\n%s\nwant the rules\n%s", PresetPath, e.Mode, got, want)
	}
	ps, err := systemd.LoadPresets(fstest.MapFS{strings.TrimPrefix(PresetPath, "/"): {Data: e.Data}})
	if err != nil {
		t.Fatal(err)
	}
	for name, enable := range map[string]bool{"sshd.service": false, "kubelet.service": true, "getty@tty1.service": true} {
		if got, _ := ps.Query(name); got != enable {
			t.Errorf("preset of %s: enable=%v, want %v", name, got, enable)
		}
	}
	if _, in := ps.Query("getty@.service"); !slices.Equal(in, []string{"getty@tty1.service", "getty@tty2.service"}) {
		t.Errorf("preset instances of getty@.service: %q", in)
	}
}

// TestUsrReplacementWarning: a configuration file under /usr at a path the
// base has is a warning naming the item and the base's file; one at a new
// path, and oslayer's own files, are not.
func TestUsrReplacementWarning(t *testing.T) {
	base := fstest.MapFS{
		"usr/lib/sysctl.d/50-default.conf": {Data: []byte("kernel.x = 1\n")},
		"usr/bin/crio":                     {Data: []byte("binary"), Mode: 0o755},
		"usr/lib/oslayer/manifest.json":    {Data: []byte("{}")},
	}
	cfg := &model.Config{Files: []model.File{
		{Path: "/usr/lib/sysctl.d/50-default.conf", Mode: 0o644, Data: []byte("kernel.x = 2\n"), Origin: org("spec.files[0]")},
		{Path: "/usr/lib/sysctl.d/99-new.conf", Mode: 0o644, Data: []byte("kernel.y = 2\n"), Origin: org("spec.files[1]")},
		{Path: "/etc/sysctl.d/99-k8s.conf", Mode: 0o644, Data: []byte("kernel.z = 2\n"), Origin: org("spec.files[2]")},
	}}
	res, err := RenderConfig(context.Background(), Request{Base: base}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	w := res.Report.Warnings
	if len(w) != 1 || !strings.Contains(w[0], "spec.files[0]: writes /usr/lib/sysctl.d/50-default.conf, which replaces the base image's file (13 bytes) /usr/lib/sysctl.d/50-default.conf") {
		t.Errorf("warnings %q", w)
	}
	if res, err = RenderConfig(context.Background(), Request{}, cfg); err != nil || len(res.Report.Warnings) != 0 {
		t.Errorf("without a base: %v, warnings %q", err, res.Report.Warnings)
	}
}

// TestUnitPresetDisableOnlyIfEnabled: with a base tree, a disabled unit
// gets a "disable" rule only when systemctl is-enabled succeeds for it
// before the disable (enabled, static), as Ignition writes its file.
func TestUnitPresetDisableOnlyIfEnabled(t *testing.T) {
	const usr = "usr/lib/systemd/system/"
	base := fstest.MapFS{
		usr + "sshd.service":    {Data: []byte("[Service]\nExecStart=/usr/sbin/sshd\n[Install]\nWantedBy=multi-user.target\n")},
		usr + "rpcbind.service": {Data: []byte("[Service]\nExecStart=/usr/bin/rpcbind\n[Install]\nWantedBy=multi-user.target\n")},
		usr + "static.service":  {Data: []byte("[Service]\nExecStart=/bin/true\n")},
		"etc/systemd/system/multi-user.target.wants/sshd.service": {Data: []byte("/usr/lib/systemd/system/sshd.service"), Mode: fs.ModeSymlink | 0o777},
	}
	cfg := &model.Config{Units: []model.Unit{
		{Name: "sshd.service", Enabled: ptr(false), Origin: org("spec.units[0]")},
		{Name: "rpcbind.service", Enabled: ptr(false), Origin: org("spec.units[1]")},
		{Name: "static.service", Enabled: ptr(false), Origin: org("spec.units[2]")},
		{Name: "absent.service", Enabled: ptr(false), Origin: org("spec.units[3]")},
	}}
	res, err := RenderConfig(context.Background(), Request{Base: base}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	e, ok := res.tree.Get(PresetPath)
	if want := "disable sshd.service\ndisable static.service\n"; !ok || !strings.HasSuffix(string(e.Data), "\n"+want) {
		t.Errorf("%s: %q, want the rules %q", PresetPath, e.Data, want)
	}
}
