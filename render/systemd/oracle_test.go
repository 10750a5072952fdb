package systemd

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/oslayer/oslayer/test/fixtures"
	"github.com/oslayer/oslayer/test/regtest"
)

// systemctlEnable runs the real `systemctl --root=dir enable name` and
// returns the symlinks it created (node paths), its output and whether it
// reported a failure.
func systemctlEnable(t *testing.T, bin, dir, name string) (links []Link, out string, failed bool) {
	t.Helper()
	before := treeLinks(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--root="+dir, "--no-reload", "enable", name)
	cmd.Env = append(os.Environ(), "SYSTEMD_LOG_COLOR=0", "LC_ALL=C")
	b, err := cmd.CombinedOutput()
	out = string(b)
	if ctx.Err() != nil {
		t.Fatalf("systemctl enable %s: timed out", name)
	}
	if err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatalf("systemctl enable %s: %v", name, err)
		}
		failed = true
	}
	// systemctl 252 does not always exit non-zero when one link fails.
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "Failed to enable") && !strings.Contains(line, "auxiliary unit") {
			failed = true
		}
	}
	for _, lk := range treeLinks(t, dir) {
		if !containsLink(before, lk) {
			links = append(links, lk)
		}
	}
	return links, out, failed
}

// treeLinks lists every symlink under dir as node paths, sorted.
func treeLinks(t *testing.T, dir string) []Link {
	t.Helper()
	var links []Link
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink == 0 {
			return nil
		}
		target, err := os.Readlink(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		links = append(links, Link{Path: "/" + filepath.ToSlash(rel), Target: target})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(links, func(i, j int) bool { return links[i].Path < links[j].Path })
	return links
}

func containsLink(ls []Link, l Link) bool {
	for _, x := range ls {
		if x == l {
			return true
		}
	}
	return false
}

func withoutLinks(ls, drop []Link) []Link {
	var out []Link
	for _, x := range ls {
		if !containsLink(drop, x) {
			out = append(out, x)
		}
	}
	return out
}

// TestOracleCases compares the hand-written cases with real systemctl.
func TestOracleCases(t *testing.T) {
	bin := regtest.Require(t, "systemctl")
	for _, c := range enableCases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, c.files)
			got, err := ours(t, dir, c.enable)
			// systemctl reports only what it had to create.
			got = withoutLinks(got, treeLinks(t, dir))
			want, out, failed := systemctlEnable(t, bin, dir, c.enable)
			if failed != (err != nil) {
				t.Errorf("systemctl failed=%v, EnableLinks err=%v\nsystemctl output:\n%s", failed, err, out)
			}
			got = withoutLinks(got, c.upholds)
			if !equalLinks(got, want) {
				t.Errorf("links differ from systemctl:\n ours      %v\n systemctl %v\nsystemctl output:\n%s", got, want, out)
			}
		})
	}
}

// fixtureUnit is a unit with content found in a fixture.
type fixtureUnit struct {
	name, content, source string
	// stub: the unit has no content in the fixture (it ships with the OS);
	// the test writes a stub unit under its drop-ins.
	stub    bool
	dropins []DropIn
}

// collectUnits walks decoded YAML/JSON and records every object that looks
// like a unit with content: Gardener {name, content} and Ignition {name,
// contents}. A Secret's data["osc.yaml"] is decoded and walked too.
func collectUnits(v any, source, field string, add func(fixtureUnit)) {
	switch x := v.(type) {
	case map[string]any:
		if name, ok := x["name"].(string); ok && Classify(name) != Invalid {
			u := fixtureUnit{name: name, source: source + " " + field, stub: true, content: "[Service]\nExecStart=/bin/true\n"}
			for _, k := range []string{"content", "contents"} {
				if c, ok := x[k].(string); ok {
					u.content, u.stub = c, false
				}
			}
			for _, k := range []string{"dropIns", "dropins"} {
				list, _ := x[k].([]any)
				for _, d := range list {
					dm, _ := d.(map[string]any)
					dn, _ := dm["name"].(string)
					dc, ok := dm["content"].(string)
					if !ok {
						dc, ok = dm["contents"].(string)
					}
					if dn != "" && ok && !strings.Contains(dn, "/") {
						u.dropins = append(u.dropins, DropIn{Name: dn, Text: dc})
					}
				}
			}
			if !u.stub || len(u.dropins) > 0 {
				add(u)
			}
		}
		if data, ok := x["data"].(map[string]any); ok {
			if s, ok := data["osc.yaml"].(string); ok {
				if b, err := base64.StdEncoding.DecodeString(s); err == nil {
					walkDocs(b, source+" data[osc.yaml]", add)
				}
			}
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			collectUnits(x[k], source, field+"."+k, add)
		}
	case []any:
		for i, e := range x {
			collectUnits(e, source, fmt.Sprintf("%s[%d]", field, i), add)
		}
	}
}

// walkDocs decodes each YAML document of b (JSON is YAML) and collects units.
func walkDocs(b []byte, source string, add func(fixtureUnit)) {
	for i, doc := range bytes.Split(b, []byte("\n---")) {
		var v any
		if err := yaml.Unmarshal(doc, &v); err != nil {
			continue // not YAML (e.g. gzip) or a fragment
		}
		collectUnits(v, fmt.Sprintf("%s#%d", source, i), "", add)
	}
}

func fixtureUnits(t *testing.T) []fixtureUnit {
	t.Helper()
	var units []fixtureUnit
	seen := map[[32]byte]bool{}
	add := func(u fixtureUnit) {
		key := u.name + "\x00" + u.content
		for _, d := range u.dropins {
			key += "\x00" + d.Name + "\x00" + d.Text
		}
		k := sha256.Sum256([]byte(key))
		if seen[k] {
			return
		}
		seen[k] = true
		units = append(units, u)
	}
	root := fixtures.Dir(t)
	for _, sub := range []string{"gardener", "mco"} {
		err := filepath.WalkDir(filepath.Join(root, sub), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			walkDocs(b, rel, add)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return units
}

// TestOracleFixtures enables every unit found in the Gardener and
// MachineConfig fixtures (with its drop-ins; a stub unit file when the
// fixture only has drop-ins) with the real systemctl and with
// ParseInstallDropIns + EnableLinks, and requires the same links.
func TestOracleFixtures(t *testing.T) {
	bin := regtest.Require(t, "systemctl")
	units := fixtureUnits(t)
	// The fixtures hold 81 distinct units (name, content, drop-ins); fewer
	// means the extraction broke.
	if len(units) < 75 {
		t.Fatalf("found only %d units in the fixtures", len(units))
	}
	var withInstall, links, dropins int
	for _, u := range units {
		in, perr := ParseInstallDropIns(u.content, u.dropins)
		dir := t.TempDir()
		unitPath := SystemDir + "/" + u.name
		files := map[string]string{strings.TrimPrefix(unitPath, "/"): u.content}
		for _, d := range u.dropins {
			files[strings.TrimPrefix(unitPath, "/")+".d/"+d.Name] = d.Text
		}
		if len(u.dropins) > 0 {
			dropins++
		}
		for _, a := range in.Also {
			if Classify(a) != Invalid && a != u.name {
				files["etc/systemd/system/"+a] = "[Unit]\nDescription=stub\n"
			}
		}
		writeTree(t, dir, files)
		want, out, failed := systemctlEnable(t, bin, dir, u.name)
		if perr != nil {
			if !failed {
				t.Errorf("%s (%s): ParseInstall: %v, but systemctl enabled it:\n%s", u.name, u.source, perr, out)
			}
			continue
		}
		got, err := EnableLinks(UnitFile{Name: u.name, Path: unitPath, Install: in}, FSLookup(os.DirFS(dir)))
		if failed != (err != nil) {
			t.Errorf("%s (%s): systemctl failed=%v, EnableLinks err=%v\n%s", u.name, u.source, failed, err, out)
		}
		if !equalLinks(got, want) {
			t.Errorf("%s (%s): links differ:\n ours      %v\n systemctl %v\n%s", u.name, u.source, got, want, out)
		}
		if !in.Empty() {
			withInstall++
		}
		links += len(got)
	}
	t.Logf("%d distinct units from the fixtures (%d with drop-ins), %d with [Install], %d links, all equal to systemctl's", len(units), dropins, withInstall, links)
}

// TestFixtureUnitsDecode makes sure the oracle above has material: the
// extraction finds units of both sources.
func TestFixtureUnitsDecode(t *testing.T) {
	units := fixtureUnits(t)
	var g, m int
	for _, u := range units {
		if strings.HasPrefix(u.source, "gardener") {
			g++
		}
		if strings.HasPrefix(u.source, "mco") {
			m++
		}
	}
	if g == 0 || m == 0 {
		t.Fatalf("units: %d from gardener, %d from mco", g, m)
	}
	t.Logf("distinct units (name, content): %d first seen in gardener fixtures, %d in mco fixtures", g, m)
	var ext int
	for _, u := range units {
		if strings.Contains(u.source, "extensionUnits") {
			ext++
		}
	}
	if ext == 0 {
		t.Error("no unit from status.extensionUnits")
	}
}

// TestOracleMask compares MaskLink with `systemctl --root mask`.
func TestOracleMask(t *testing.T) {
	bin := regtest.Require(t, "systemctl")
	for _, name := range []string{"rpm-ostreed-automatic.timer", "getty@tty1.service", "absent.service"} {
		dir := t.TempDir()
		writeTree(t, dir, map[string]string{"usr/lib/systemd/system/rpm-ostreed-automatic.timer": "[Timer]\nOnCalendar=daily\n"})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		out, err := exec.CommandContext(ctx, bin, "--root="+dir, "mask", name).CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("systemctl mask %s: %v\n%s", name, err, out)
		}
		got := treeLinks(t, dir)
		if want := []Link{MaskLink(name)}; !equalLinks(got, want) {
			t.Errorf("mask %s: systemctl %v, MaskLink %v", name, got, want)
		}
	}
}
