package layers

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/oslayer/oslayer/layers/tree"
	"github.com/oslayer/oslayer/test/fixtures"
	"github.com/oslayer/oslayer/test/regtest"
)

// TestEnablementMatchesSystemctl renders real inputs, unpacks the rootfs
// without the enablement links, runs the real `systemctl --root=DIR enable`
// for every unit the configuration enables and writes, and compares the
// links systemctl creates with the rendered ones.
func TestEnablementMatchesSystemctl(t *testing.T) {
	bin := regtest.Require(t, "systemctl")
	dir := fixtures.Dir(t)
	for _, c := range []fixtureCase{
		{name: "gardener", oscs: []string{"gardener/generated/osc-worker-a-reconcile-full.yaml"}},
		{name: "mco-aws-worker", mcs: []string{"mco/aws/worker"}, pool: "worker"},
		{name: "mco-baremetal-master", mcs: []string{"mco/baremetal/master"}, pool: "master"},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, err := Render(context.Background(), c.request(t, dir, &fakeImages{}))
			if err != nil {
				t.Fatal(err)
			}
			var units []string
			for _, u := range res.Report.Units {
				if u.Enablement == "enabled" && u.InstallFrom == "unit" && u.Written {
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
			if err := writeTree(root, bare); err != nil {
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
				if tg != "/dev/null" {
					want["/"+strings.TrimPrefix(p, root+"/")] = tg
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			// Rendered links of these units only (fallback-enabled OS
			// units cannot be enabled by systemctl without their file).
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
