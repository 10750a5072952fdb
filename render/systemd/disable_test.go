package systemd

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/oslayer/oslayer/test/regtest"
)

// disableCase is a tree (as in enableCase) and the units to disable.
// Names start with "zz" so that no path resolves on the host: systemctl
// 252 chases the links it checks without the --root prefix.
type disableCase struct {
	name    string
	files   map[string]string
	disable []string
	want    Removal
}

const (
	usrUnits = "usr/lib/systemd/system/"
	etcUnits = "etc/systemd/system/"
)

var disableCases = []disableCase{
	{
		name: "base-wantedby-alias",
		files: map[string]string{
			usrUnits + "zzsshd.service":                          svc + "[Install]\nWantedBy=multi-user.target\nAlias=zzssh.service\n",
			usrUnits + "zzother.service":                         svc + "[Install]\nWantedBy=multi-user.target\n",
			etcUnits + "multi-user.target.wants/zzsshd.service":  "->/usr/lib/systemd/system/zzsshd.service",
			etcUnits + "multi-user.target.wants/zzother.service": "->/usr/lib/systemd/system/zzother.service",
			etcUnits + "zzssh.service":                           "->/usr/lib/systemd/system/zzsshd.service",
		},
		disable: []string{"zzsshd.service"},
		want: Removal{Links: []string{
			"/etc/systemd/system/multi-user.target.wants/zzsshd.service",
			"/etc/systemd/system/zzssh.service",
		}},
	},
	{
		name: "empty-dirs-go",
		files: map[string]string{
			usrUnits + "zzchronyd.service":                        svc + "[Install]\nWantedBy=zz.target\nRequiredBy=zz2.target\n",
			etcUnits + "zz.target.wants/zzchronyd.service":        "->/usr/lib/systemd/system/zzchronyd.service",
			etcUnits + "zz2.target.requires/zzchronyd.service":    "->../../../../usr/lib/systemd/system/zzchronyd.service",
			etcUnits + "zz2.target.requires/zznot-a-link.service": svc,
		},
		disable: []string{"zzchronyd.service"},
		want: Removal{
			Links: []string{"/etc/systemd/system/zz.target.wants/zzchronyd.service", "/etc/systemd/system/zz2.target.requires/zzchronyd.service"},
			Dirs:  []string{"/etc/systemd/system/zz.target.wants"},
		},
	},
	{
		name: "also-and-missing-aux",
		files: map[string]string{
			usrUnits + "zzd.socket":                             "[Socket]\nListenStream=/run/zz\n[Install]\nWantedBy=sockets.target\nAlso=zzd.service zzgone.service\n",
			usrUnits + "zzd.service":                            svc + "[Install]\nWantedBy=multi-user.target\n",
			etcUnits + "sockets.target.wants/zzd.socket":        "->/usr/lib/systemd/system/zzd.socket",
			etcUnits + "multi-user.target.wants/zzd.service":    "->/usr/lib/systemd/system/zzd.service",
			etcUnits + "multi-user.target.wants/zzgone.service": "->/usr/lib/systemd/system/zzgone.service",
			etcUnits + "multi-user.target.wants/zzkeep.service": "->/usr/lib/systemd/system/zzkeep.service",
		},
		disable: []string{"zzd.socket"},
		want: Removal{Links: []string{
			"/etc/systemd/system/multi-user.target.wants/zzd.service",
			"/etc/systemd/system/multi-user.target.wants/zzgone.service",
			"/etc/systemd/system/sockets.target.wants/zzd.socket",
		}, Dirs: []string{"/etc/systemd/system/sockets.target.wants"}},
	},
	{
		name: "not-found-by-name",
		files: map[string]string{
			etcUnits + "multi-user.target.wants/zzabsent.service": "->/usr/lib/systemd/system/zzabsent.service",
			etcUnits + "multi-user.target.wants/zzother.service":  "->/usr/lib/systemd/system/zzother.service",
		},
		disable: []string{"zzabsent.service"},
		want:    Removal{Links: []string{"/etc/systemd/system/multi-user.target.wants/zzabsent.service"}},
	},
	{
		name: "masked-is-ignored",
		files: map[string]string{
			usrUnits + "zzm.service":                         svc + "[Install]\nWantedBy=multi-user.target\n",
			etcUnits + "zzm.service":                         "->/dev/null",
			etcUnits + "multi-user.target.wants/zzm.service": "->/usr/lib/systemd/system/zzm.service",
		},
		disable: []string{"zzm.service"},
	},
	{
		name: "template-and-instances",
		files: map[string]string{
			usrUnits + "zzgetty@.service":                          svc + "[Install]\nWantedBy=zzgetty.target\nDefaultInstance=tty1\n",
			etcUnits + "zzgetty.target.wants/zzgetty@tty1.service": "->/usr/lib/systemd/system/zzgetty@.service",
			etcUnits + "zzgetty.target.wants/zzgetty@tty2.service": "->/usr/lib/systemd/system/zzgetty@.service",
		},
		disable: []string{"zzgetty@tty2.service"},
		want:    Removal{Links: []string{"/etc/systemd/system/zzgetty.target.wants/zzgetty@tty2.service"}},
	},
	{
		name: "template-all-instances",
		files: map[string]string{
			usrUnits + "zzgetty@.service":                          svc + "[Install]\nWantedBy=zzgetty.target\nDefaultInstance=tty1\n",
			etcUnits + "zzgetty.target.wants/zzgetty@tty1.service": "->/usr/lib/systemd/system/zzgetty@.service",
			etcUnits + "zzgetty.target.wants/zzgetty@tty2.service": "->/usr/lib/systemd/system/zzgetty@.service",
		},
		disable: []string{"zzgetty@.service"},
		want: Removal{
			Links: []string{"/etc/systemd/system/zzgetty.target.wants/zzgetty@tty1.service", "/etc/systemd/system/zzgetty.target.wants/zzgetty@tty2.service"},
			Dirs:  []string{"/etc/systemd/system/zzgetty.target.wants"},
		},
	},
	{
		name: "link-to-removed-link",
		files: map[string]string{
			usrUnits + "zza.service":                           svc + "[Install]\nWantedBy=multi-user.target\nAlias=zzalias.service\n",
			etcUnits + "zzalias.service":                       "->/usr/lib/systemd/system/zza.service",
			etcUnits + "multi-user.target.wants/zzvia.service": "->/etc/systemd/system/zzalias.service",
			etcUnits + "deep/x/zzb.service":                    "->/usr/lib/systemd/system/zza.service",
		},
		disable: []string{"zza.service"},
		want: Removal{
			Links: []string{"/etc/systemd/system/deep/x/zzb.service", "/etc/systemd/system/multi-user.target.wants/zzvia.service", "/etc/systemd/system/zzalias.service"},
			Dirs:  []string{"/etc/systemd/system/deep", "/etc/systemd/system/deep/x", "/etc/systemd/system/multi-user.target.wants"},
		},
	},
	{
		name: "configured-unit-in-etc",
		files: map[string]string{
			etcUnits + "zzc.service":                         svc + "[Install]\nWantedBy=multi-user.target\n",
			etcUnits + "multi-user.target.wants/zzc.service": "->/etc/systemd/system/zzc.service",
			etcUnits + "multi-user.target.wants/zzd.service": "->/etc/systemd/system/zzd.service",
			etcUnits + "zzc.service.d/10-x.conf":             "[Service]\nNice=1\n",
		},
		disable: []string{"zzc.service"},
		want:    Removal{Links: []string{"/etc/systemd/system/multi-user.target.wants/zzc.service"}},
	},
	{
		name: "usr-alias-name",
		files: map[string]string{
			usrUnits + "zzbroker.service":                         svc + "[Install]\nWantedBy=multi-user.target\nAlias=zzbus.service\n",
			usrUnits + "zzbus.service":                            "->zzbroker.service",
			etcUnits + "multi-user.target.wants/zzbroker.service": "->/usr/lib/systemd/system/zzbroker.service",
			etcUnits + "zzbus.service":                            "->/usr/lib/systemd/system/zzbroker.service",
		},
		disable: []string{"zzbus.service"},
		want: Removal{Links: []string{
			"/etc/systemd/system/multi-user.target.wants/zzbroker.service",
			"/etc/systemd/system/zzbus.service",
		}, Dirs: []string{"/etc/systemd/system/multi-user.target.wants"}},
	},
}

// treePaths lists every path under dir (node paths) with a type letter.
func treePaths(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		kind := "f"
		switch {
		case d.IsDir():
			kind = "d"
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			kind = "l " + target
		}
		m["/"+filepath.ToSlash(rel)] = kind
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// removedPaths is what disappeared between two treePaths snapshots.
func removedPaths(before, after map[string]string) Removal {
	var r Removal
	for p, k := range before {
		if _, ok := after[p]; ok {
			continue
		}
		if k == "d" {
			r.Dirs = append(r.Dirs, p)
		} else {
			r.Links = append(r.Links, p)
		}
	}
	sort.Strings(r.Links)
	sort.Strings(r.Dirs)
	return r
}

// systemctlIn runs the real `systemctl --root=dir ARGS...` and returns its
// output; a failure is fatal unless allowFail.
func systemctlIn(t *testing.T, bin, dir string, allowFail bool, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"--root=" + dir, "--no-reload"}, args...)...)
	cmd.Env = append(os.Environ(), "SYSTEMD_LOG_COLOR=0", "LC_ALL=C")
	out, err := cmd.CombinedOutput()
	if err != nil && (ctx.Err() != nil || !allowFail) {
		t.Fatalf("systemctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestDisableCases checks DisableLinks against the expectations written
// in the cases.
func TestDisableCases(t *testing.T) {
	for _, c := range disableCases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, c.files)
			got, err := DisableLinks(os.DirFS(dir), c.disable...)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("DisableLinks:\n got %+v\nwant %+v", got, c.want)
			}
		})
	}
}

// TestOracleDisable compares DisableLinks with what the real
// `systemctl --root disable` removes from the same trees.
func TestOracleDisable(t *testing.T) {
	bin := regtest.Require(t, "systemctl")
	for _, c := range disableCases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, c.files)
			got, err := DisableLinks(os.DirFS(dir), c.disable...)
			if err != nil {
				t.Fatal(err)
			}
			before := treePaths(t, dir)
			out := systemctlIn(t, bin, dir, true, append([]string{"disable"}, c.disable...)...)
			if sys := removedPaths(before, treePaths(t, dir)); !reflect.DeepEqual(got, sys) {
				t.Errorf("differs from systemctl disable:\n ours      %+v\n systemctl %+v\n%s", got, sys, out)
			}
		})
	}
}

// presetTree is an FCOS-shaped tree for the preset oracle: vendor presets
// ending in "disable *", a higher-precedence preset in /etc, a masked
// vendor preset file, units enabled and not yet enabled, a template with
// an instance rule, an alias, a masked unit and a unit written into /etc.
func presetTree() map[string]string {
	return map[string]string{
		"usr/lib/systemd/system-preset/90-default.preset":         "# vendor\nenable zzsshd.service\nenable zzchronyd.service\nenable zzgetty@.service\nenable zzinst@.service a b\nenable zzsock.socket\n;comment\nbogus line\nenable zzplain.service x\n",
		"usr/lib/systemd/system-preset/99-default-disable.preset": "disable *\n",
		"usr/lib/systemd/system-preset/50-masked.preset":          "enable zzoff.service\n",
		"etc/systemd/system-preset/50-masked.preset":              "->/dev/null",
		"etc/systemd/system-preset/20-ignition.preset":            "disable zzchronyd.service\nenable zzcfg.service\nenable zzmasked.service\n",
		usrUnits + "zzsshd.service":                               svc + "[Install]\nWantedBy=multi-user.target\nAlias=zzssh.service\n",
		usrUnits + "zzchronyd.service":                            svc + "[Install]\nWantedBy=multi-user.target\n",
		usrUnits + "zzoff.service":                                svc + "[Install]\nWantedBy=multi-user.target\n",
		usrUnits + "zzgetty@.service":                             svc + "[Install]\nWantedBy=getty.target\nDefaultInstance=tty1\n",
		usrUnits + "zzinst@.service":                              svc + "[Install]\nWantedBy=multi-user.target\n",
		usrUnits + "zzsock.socket":                                "[Socket]\nListenStream=/run/zz\n[Install]\nWantedBy=sockets.target\nAlso=zzsockd.service\n",
		usrUnits + "zzsockd.service":                              svc,
		usrUnits + "zzplain.service":                              svc + "[Install]\nWantedBy=multi-user.target\n",
		usrUnits + "zzmasked.service":                             svc + "[Install]\nWantedBy=multi-user.target\n",
		usrUnits + "zzalias.service":                              "->zzsshd.service",
		usrUnits + "zzstatic.service":                             svc,
		etcUnits + "zzmasked.service":                             "->/dev/null",
		etcUnits + "zzcfg.service":                                svc + "[Install]\nWantedBy=multi-user.target\nRequiredBy=zzcfg.target\n",
		etcUnits + "zzown.service":                                svc + "[Install]\nWantedBy=multi-user.target\n",
		etcUnits + "multi-user.target.wants/zzchronyd.service":    "->/usr/lib/systemd/system/zzchronyd.service",
		etcUnits + "multi-user.target.wants/zzown.service":        "->/etc/systemd/system/zzown.service",
		etcUnits + "multi-user.target.wants/zzsshd.service":       "->/usr/lib/systemd/system/zzsshd.service",
		etcUnits + "zzold.target.wants/zzoff.service":             "->/usr/lib/systemd/system/zzoff.service",
	}
}

// TestOraclePresetAll compares PresetAll with `systemctl --root preset-all`
// in each preset mode.
func TestOraclePresetAll(t *testing.T) {
	bin := regtest.Require(t, "systemctl")
	for _, m := range []struct {
		name string
		mode PresetMode
	}{{"full", PresetFull}, {"enable-only", PresetEnableOnly}, {"disable-only", PresetDisableOnly}} {
		t.Run(m.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, presetTree())
			got, _ := PresetAll(os.DirFS(dir), m.mode)
			before := treePaths(t, dir)
			beforeLinks := treeLinks(t, dir)
			out := systemctlIn(t, bin, dir, true, "preset-all", "--preset-mode="+m.name)
			after := treePaths(t, dir)
			if sys := removedPaths(before, after); !reflect.DeepEqual(got.Removed, sys) {
				t.Errorf("removed differs from systemctl:\n ours      %+v\n systemctl %+v\n%s", got.Removed, sys, out)
			}
			sysLinks := withoutLinks(treeLinks(t, dir), beforeLinks)
			if !equalLinks(got.Links, sysLinks) {
				t.Errorf("created links differ from systemctl:\n ours      %v\n systemctl %v\n%s", got.Links, sysLinks, out)
			}
			if len(got.Links)+len(got.Removed.Links) == 0 {
				t.Error("the case changes nothing")
			}
		})
	}
}

// TestOracleIsEnabled compares IsEnabled with `systemctl --root is-enabled`
// for every unit name of the disable and preset trees (and a few that are
// not there), on the trees as written.
func TestOracleIsEnabled(t *testing.T) {
	bin := regtest.Require(t, "systemctl")
	trees := map[string]map[string]string{"preset": presetTree()}
	for _, c := range disableCases {
		trees["disable-"+c.name] = c.files
	}
	extra := map[string]string{
		usrUnits + "zzonlyalso.service":                    svc + "[Install]\nAlso=zzsshd.service\n",
		usrUnits + "zzindirect.service":                    svc + "[Install]\nWantedBy=multi-user.target\n",
		etcUnits + "zzx.target.wants/zzother-name.service": "->/usr/lib/systemd/system/zzindirect.service",
		usrUnits + "zzlinked-src.service":                  svc,
		etcUnits + "zzlinked.service":                      "->/opt/zzlinked.service",
		"opt/zzlinked.service":                             svc + "[Install]\nWantedBy=multi-user.target\n",
	}
	for k, v := range presetTree() {
		extra[k] = v
	}
	trees["extra"] = extra
	var n int
	for tname, files := range trees {
		dir := t.TempDir()
		writeTree(t, dir, files)
		names := map[string]bool{"zznothere.service": true, "zzgetty@tty9.service": true}
		for p := range files {
			if b := filepath.Base(p); Classify(b) != Invalid {
				names[b] = true
			}
		}
		for name := range names {
			got, err := IsEnabled(os.DirFS(dir), name)
			if err != nil {
				t.Errorf("%s: %s: %v", tname, name, err)
				continue
			}
			out := strings.TrimSpace(systemctlIn(t, bin, dir, true, "is-enabled", name))
			if strings.HasPrefix(out, "Failed to get unit file state for "+name+": No such file or directory") {
				out = string(StateNotFound)
			}
			if lines := strings.Split(out, "\n"); string(got) != lines[len(lines)-1] {
				t.Errorf("%s: is-enabled %s: ours %q, systemctl %q", tname, name, got, out)
			}
			n++
		}
	}
	t.Logf("%d names in %d trees agree with systemctl is-enabled", n, len(trees))
}
