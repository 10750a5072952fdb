package render

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/oslayer/oslayer/render/tree"
	"github.com/oslayer/oslayer/sources/model"
	"github.com/oslayer/oslayer/test/fixtures"
	"github.com/oslayer/oslayer/test/regtest"
)

// enableCase is one oracle case: real inputs (fixture) or a hand-built
// configuration over an optional base tree.
type enableCase struct {
	name    string
	fixture *fixtureCase
	cfg     *model.Config
	base    fstest.MapFS
}

// enableCases are the oracle's inputs: the real fixtures, and hand-built
// configurations for what the fixtures do not have: [Install] only in
// drop-ins (configured and the base's), instances of configured templates
// (with Alias=, DefaultInstance=, an instance drop-in) and Also= of an
// instance.
func enableCases() []enableCase {
	in := func(i int) model.Origin { return org(fmt.Sprintf("spec.config.systemd.units[%d]", i)) }
	return []enableCase{
		{name: "gardener", fixture: &fixtureCase{oscs: []string{"gardener/generated/osc-worker-a-reconcile-full.yaml"}}},
		{name: "mco-aws-worker", fixture: &fixtureCase{mcs: []string{"mco/aws/worker"}, pool: "worker"}},
		{name: "mco-baremetal-master", fixture: &fixtureCase{mcs: []string{"mco/baremetal/master"}, pool: "master"}},
		{name: "install-in-dropin", cfg: &model.Config{Units: []model.Unit{
			{Name: "node-setup.service", Contents: ptr("[Unit]\nDescription=no Install section here\n[Service]\nType=oneshot\nExecStart=/bin/true\n"), Enabled: ptr(true), Origin: in(0),
				DropIns: []model.DropIn{
					{Name: "20-install.conf", Contents: "[Install]\nWantedBy=basic.target\nAlias=setup.service\n", Origin: in(0)},
					{Name: "10-install.conf", Contents: "[Install]\nWantedBy=network.target\nRequiredBy=kubelet.service\n", Origin: in(0)},
					{Name: "30-reset.conf", Contents: "[Install]\nRequiredBy=\nRequiredBy=crio.service\n", Origin: in(0)},
				}},
			{Name: "late.timer", Contents: ptr("[Timer]\nOnBootSec=1h\n[Install]\nWantedBy=\n"), Enabled: ptr(true), Origin: in(1),
				DropIns: []model.DropIn{{Name: "10-install.conf", Contents: "[Install]\nWantedBy=timers.target\n", Origin: in(1)}}},
		}}},
		{name: "template-instance", cfg: &model.Config{Units: []model.Unit{
			{Name: "agent@.service", Contents: ptr("[Service]\nExecStart=/bin/agent %i\n[Install]\nWantedBy=agents.target\nAlias=helper@.service\n"), Origin: in(0)},
			{Name: "agent@lo.service", Enabled: ptr(true), Origin: in(1),
				DropIns: []model.DropIn{{Name: "10-install.conf", Contents: "[Install]\nRequiredBy=network-online.target\n", Origin: in(1)}}},
			{Name: "agent@eth0.service", Enabled: ptr(true), Origin: in(2)},
			{Name: "dflt@.service", Contents: ptr("[Service]\nExecStart=/bin/dflt %i\n[Install]\nWantedBy=multi-user.target\nDefaultInstance=main\nAlso=agent@eth1.service\n"), Enabled: ptr(true), Origin: in(3)},
		}}},
		{name: "base-dropins", base: fstest.MapFS{
			"usr/lib/systemd/system/kubelet.service":             {Data: []byte("[Service]\nExecStart=/usr/bin/kubelet\n")},
			"usr/lib/systemd/system/kubelet.service.d/10-i.conf": {Data: []byte("[Install]\nWantedBy=multi-user.target\n")},
			"usr/lib/systemd/system/crio.service":                {Data: []byte("[Service]\nExecStart=/usr/bin/crio\n[Install]\nWantedBy=multi-user.target\n")},
			"usr/lib/systemd/system/getty@.service":              {Data: []byte("[Service]\nExecStart=/sbin/agetty %I\n[Install]\nWantedBy=getty.target\nDefaultInstance=tty1\n")},
		}, cfg: &model.Config{Units: []model.Unit{
			{Name: "kubelet.service", Enabled: ptr(true), Origin: in(0)},
			{Name: "crio.service", Enabled: ptr(true), Origin: in(1),
				DropIns: []model.DropIn{{Name: "50-install.conf", Contents: "[Install]\nRequiredBy=kubelet.service\nAlso=getty@ttyS0.service\n", Origin: in(1)}}},
		}}},
	}
}

// TestEnablementMatchesSystemctl renders real inputs and hand-built
// configurations, unpacks the base (if any) and the rootfs without the
// enablement links, runs the real `systemctl --root=DIR enable` for every
// unit the configuration enables and that the configuration or the base
// ships, and compares the links systemctl creates with the rendered ones.
func TestEnablementMatchesSystemctl(t *testing.T) {
	bin := regtest.Require(t, "systemctl")
	for _, c := range enableCases() {
		t.Run(c.name, func(t *testing.T) {
			var res *Result
			var err error
			if c.fixture != nil {
				res, err = Render(context.Background(), c.fixture.request(t, fixtures.Dir(t), &fakeImages{}))
			} else {
				req := Request{}
				if c.base != nil {
					req.Base = c.base
				}
				res, err = RenderConfig(context.Background(), req, c.cfg)
			}
			if err != nil {
				t.Fatal(err)
			}
			var units []string
			for _, u := range res.Report.Units {
				if u.Enablement == "enabled" && (u.InstallFrom == "unit" || u.InstallFrom == "base") {
					units = append(units, u.Name)
				}
			}
			if len(units) == 0 {
				t.Fatal("no enabled units")
			}
			generated := map[string]bool{}
			for _, b := range res.Report.Baked {
				if b.Generated && b.Type == "symlink" && strings.HasPrefix(b.Path, UnitDir+"/") && b.Target != "/dev/null" {
					generated[b.Path] = true
				}
			}
			bare, err := res.tree.Select(func(e *tree.Entry) bool { return !generated[e.Path] })
			if err != nil {
				t.Fatal(err)
			}
			root := filepath.Join(t.TempDir(), "root")
			if err := writeTree(context.Background(), root, bare); err != nil {
				t.Fatal(err)
			}
			if err := writeFS(root, c.base); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(bin, append([]string{"--root=" + root, "--no-reload", "enable"}, units...)...)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Run(); err != nil {
				t.Fatalf("systemctl enable: %v\n%s", err, out.String())
			}
			want := map[string]string{}
			err = filepath.WalkDir(filepath.Join(root, "etc/systemd/system"), func(p string, d fs.DirEntry, err error) error {
				if err != nil || d.Type()&fs.ModeSymlink == 0 {
					return err
				}
				tg, err := os.Readlink(p)
				if err != nil {
					return err
				}
				rel := strings.TrimPrefix(p, root+"/")
				if _, inBase := c.base[rel]; tg != "/dev/null" && !inBase {
					want["/"+rel] = tg
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			// Rendered links of these units only (fallback-enabled OS
			// units cannot be enabled by systemctl without their file).
			if len(want) == 0 {
				t.Fatalf("systemctl created no links:\n%s", out.String())
			}
			enabled := map[string]bool{}
			for _, u := range units {
				enabled[u] = true
			}
			got := map[string]string{}
			for _, u := range res.Report.Units {
				if !enabled[u.Name] {
					continue
				}
				for _, l := range u.Links {
					p, tg, _ := strings.Cut(l, " -> ")
					got[p] = tg
				}
			}
			if d := diffLinks(got, want); d != "" {
				t.Errorf("rendered links differ from systemctl --root enable:\n%s\nsystemctl said:\n%s", d, out.String())
			}
			t.Logf("%d units, %d links agree with systemctl", len(units), len(want))
		})
	}
}

func diffLinks(got, want map[string]string) string {
	var d []string
	for p, tg := range want {
		if got[p] != tg {
			d = append(d, "systemctl: "+p+" -> "+tg+"  rendered: "+got[p])
		}
	}
	for p, tg := range got {
		if _, ok := want[p]; !ok {
			d = append(d, "rendered only: "+p+" -> "+tg)
		}
	}
	sort.Strings(d)
	return strings.Join(d, "\n")
}

// writeFS writes the regular files and symlinks of fsys (a base tree) under
// root.
func writeFS(root string, fsys fs.FS) error {
	if fsys == nil {
		return nil
	}
	return fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		dst := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			tg, err := fs.ReadLink(fsys, p)
			if err != nil {
				return err
			}
			return os.Symlink(tg, dst)
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, data, 0o644)
	})
}
