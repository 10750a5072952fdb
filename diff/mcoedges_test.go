package diff

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"slices"
	"strings"
	"testing"

	"github.com/oslayer/oslayer/sources/machineconfig"
)

// The changes the MCO decides on from more than a node file's bytes
// (openshift/machine-config-operator @ 7ff337a4ffac): the daemon compares
// whole Ignition file entries (pkg/controller/common/helpers.go
// CalculateConfigFileDiffs, reflect.DeepEqual), so a new encoding,
// compression or overwrite flag of the same content is a changed file
// without a policy (reboot, drain); reconcilable (pkg/daemon/update.go)
// refuses FIPS and directory changes, which oslayer reports as a reboot
// with a drain, the daemon's actions saying the same.

const inotify = "/etc/sysctl.d/inotify.conf"

// editEntry changes the Ignition entry of path in 00-worker.yaml.
func editEntry(path string, f func(entry map[string]any)) map[string]func(map[string]any) {
	return map[string]func(map[string]any){"00-worker.yaml": func(mc map[string]any) {
		for _, e := range field(mc, "spec", "config", "storage", "files").([]any) {
			if em := e.(map[string]any); em["path"] == path {
				f(em)
				return
			}
		}
		panic("no file " + path)
	}}
}

// reencode gives the entry's content a new data URL: base64, gzip-compressed
// when gz.
func reencode(t *testing.T, gz bool) func(map[string]any) {
	return func(e map[string]any) {
		data, err := machineconfig.DecodeDataURL(str(field(e, "contents", "source")), 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		c := map[string]any{}
		if gz {
			var buf bytes.Buffer
			w := gzip.NewWriter(&buf)
			w.Write(data)
			w.Close()
			data, c["compression"] = buf.Bytes(), "gzip"
		}
		c["source"] = "data:;base64," + base64.StdEncoding.EncodeToString(data)
		e["contents"] = c
	}
}

type edgePair struct {
	name    string
	edit    map[string]func(map[string]any)
	files   []string // the daemon's changed files
	refused bool
}

func edgePairs(t *testing.T) []edgePair {
	return []edgePair{
		{name: "base64", edit: editEntry(inotify, reencode(t, false)), files: []string{inotify}},
		{name: "gzip", edit: editEntry(inotify, reencode(t, true)), files: []string{inotify}},
		{name: "overwrite false", edit: editEntry(inotify, func(e map[string]any) { e["overwrite"] = false }), files: []string{inotify}},
		{name: "fips", edit: map[string]func(map[string]any){"00-worker.yaml": func(mc map[string]any) {
			mc["spec"].(map[string]any)["fips"] = true
		}}, refused: true},
		{name: "directory added", edit: map[string]func(map[string]any){"00-worker.yaml": func(mc map[string]any) {
			field(mc, "spec", "config", "storage").(map[string]any)["directories"] = []any{map[string]any{"path": "/etc/oslayer-test.d", "mode": 493}}
		}}, refused: true},
	}
}

// TestMCOEntryAndRefusedPairs: each change to the real AWS worker pool is
// a reboot with a drain, and the action, drain, daemon actions and
// first-boot actions agree.
func TestMCOEntryAndRefusedPairs(t *testing.T) {
	old := renderSide(t, "worker", copyPool(t, nil))
	for _, p := range edgePairs(t) {
		t.Run(p.name, func(t *testing.T) {
			r, err := Compare(old, renderSide(t, "worker", copyPool(t, p.edit)), Options{})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(r.MCO.Files, p.files) || (len(r.MCO.Refused) > 0) != p.refused {
				t.Errorf("files %v refused %v; want files %v refused %v", r.MCO.Files, r.MCO.Refused, p.files, p.refused)
			}
			os := r.Platform(PlatformOpenShift)
			if os.Action != Reboot || !os.Drain || !slices.Equal(os.MCOActions, []string{"Reboot"}) ||
				!slices.Equal(os.LegacyActions, []string{LegacyReboot}) || !os.LegacyDrain || os.Refused != p.refused {
				t.Errorf("action %s drain %v daemon %v first boot %v (drain %v) refused %v; the MCO: reboot, drain, [Reboot], [reboot] (drain true), refused %v",
					os.Action, os.Drain, os.MCOActions, os.LegacyActions, os.LegacyDrain, os.Refused, p.refused)
			}
			var text strings.Builder
			r.WriteText(&text)
			if want := "openshift: reboot, drain"; !strings.Contains(text.String(), want) || strings.Contains(text.String(), "refused by the MCO") != p.refused {
				t.Errorf("text output lacks %q or the refusal (%v):\n%s", want, p.refused, text.String())
			}
		})
	}
}
