package systemd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// enableCase is a hand-written tree and a unit to enable in it. Files are
// relative to the root; content starting with "->" makes a symlink.
type enableCase struct {
	name    string
	files   map[string]string
	enable  string
	want    []Link // exact expectation (checked without systemctl too)
	wantErr bool
	// upholds: systemctl 252 ignores UpheldBy=; these links are ours only.
	upholds []Link
}

const svc = "[Unit]\nDescription=test\n[Service]\nExecStart=/bin/true\n"

func l(p, t string) Link { return Link{Path: p, Target: t} }

var enableCases = []enableCase{
	{
		name:   "wantedby",
		files:  map[string]string{"etc/systemd/system/a.service": svc + "[Install]\nWantedBy=multi-user.target\n"},
		enable: "a.service",
		want:   []Link{l("/etc/systemd/system/multi-user.target.wants/a.service", "/etc/systemd/system/a.service")},
	},
	{
		name: "alias-also-requiredby",
		files: map[string]string{
			"etc/systemd/system/a.service": svc + "[Install]\nWantedBy=multi-user.target\nAlias=b.service\nAlso=c.service\nRequiredBy=d.target\n",
			"etc/systemd/system/c.service": svc + "[Install]\nWantedBy=x.target\nAlso=a.service e.service\n",
			"etc/systemd/system/e.service": svc + "[Install]\nRequiredBy=y.target\n",
		},
		enable: "a.service",
		want: []Link{
			l("/etc/systemd/system/b.service", "/etc/systemd/system/a.service"),
			l("/etc/systemd/system/d.target.requires/a.service", "/etc/systemd/system/a.service"),
			l("/etc/systemd/system/multi-user.target.wants/a.service", "/etc/systemd/system/a.service"),
			l("/etc/systemd/system/x.target.wants/c.service", "/etc/systemd/system/c.service"),
			l("/etc/systemd/system/y.target.requires/e.service", "/etc/systemd/system/e.service"),
		},
	},
	{
		name: "also-missing-and-stub",
		files: map[string]string{
			"etc/systemd/system/a.service":   svc + "[Install]\nWantedBy=multi-user.target\nAlso=missing.service stub.socket\n",
			"etc/systemd/system/stub.socket": "[Socket]\nListenStream=/run/x\n",
		},
		enable: "a.service",
		want:   []Link{l("/etc/systemd/system/multi-user.target.wants/a.service", "/etc/systemd/system/a.service")},
	},
	{
		name:    "upheldby",
		files:   map[string]string{"etc/systemd/system/a.service": svc + "[Install]\nWantedBy=multi-user.target\nUpheldBy=u.target\n"},
		enable:  "a.service",
		want:    []Link{l("/etc/systemd/system/multi-user.target.wants/a.service", "/etc/systemd/system/a.service"), l("/etc/systemd/system/u.target.upholds/a.service", "/etc/systemd/system/a.service")},
		upholds: []Link{l("/etc/systemd/system/u.target.upholds/a.service", "/etc/systemd/system/a.service")},
	},
	{
		name:   "template-default-instance",
		files:  map[string]string{"etc/systemd/system/t@.service": svc + "[Install]\nWantedBy=multi-user.target\nDefaultInstance=foo\nAlias=tt@.service\n"},
		enable: "t@.service",
		want: []Link{
			l("/etc/systemd/system/multi-user.target.wants/t@foo.service", "/etc/systemd/system/t@.service"),
			l("/etc/systemd/system/tt@.service", "/etc/systemd/system/t@.service"),
		},
	},
	{
		name:    "template-no-default-instance",
		files:   map[string]string{"etc/systemd/system/n@.service": svc + "[Install]\nWantedBy=multi-user.target\n"},
		enable:  "n@.service",
		wantErr: true,
	},
	{
		name: "template-no-default-instance-template-targets",
		files: map[string]string{
			"etc/systemd/system/n@.service": svc + "[Install]\nWantedBy=multi-user.target foo@.target\nRequiredBy=bar@x.target\nAlias=nn@.service ni@y.service\n",
		},
		enable: "n@.service",
		want: []Link{
			l("/etc/systemd/system/bar@x.target.requires/n@.service", "/etc/systemd/system/n@.service"),
			l("/etc/systemd/system/foo@.target.wants/n@.service", "/etc/systemd/system/n@.service"),
			l("/etc/systemd/system/ni@y.service", "/etc/systemd/system/n@.service"),
			l("/etc/systemd/system/nn@.service", "/etc/systemd/system/n@.service"),
		},
		wantErr: true,
	},
	{
		name:   "instance-of-template",
		files:  map[string]string{"etc/systemd/system/r@.service": svc + "[Install]\nWantedBy=multi-user.target\nAlias=rt@.service r@.service\n"},
		enable: "r@bar.service",
		want: []Link{
			l("/etc/systemd/system/multi-user.target.wants/r@bar.service", "/etc/systemd/system/r@.service"),
			l("/etc/systemd/system/rt@bar.service", "/etc/systemd/system/r@.service"),
		},
	},
	{
		name:   "instance-of-template-with-default",
		files:  map[string]string{"etc/systemd/system/t@.service": svc + "[Install]\nWantedBy=multi-user.target\nDefaultInstance=foo\n"},
		enable: "t@baz.service",
		want:   []Link{l("/etc/systemd/system/multi-user.target.wants/t@baz.service", "/etc/systemd/system/t@.service")},
	},
	{
		name:   "no-install",
		files:  map[string]string{"etc/systemd/system/s.service": svc},
		enable: "s.service",
	},
	{
		name:   "usr-lib-unit",
		files:  map[string]string{"usr/lib/systemd/system/u.service": svc + "[Install]\nWantedBy=multi-user.target\nAlias=uu.service\n"},
		enable: "u.service",
		want: []Link{
			l("/etc/systemd/system/multi-user.target.wants/u.service", "/usr/lib/systemd/system/u.service"),
			l("/etc/systemd/system/uu.service", "/usr/lib/systemd/system/u.service"),
		},
	},
	{
		name: "etc-overrides-usr-lib",
		files: map[string]string{
			"usr/lib/systemd/system/u.service": svc + "[Install]\nWantedBy=multi-user.target\n",
			"etc/systemd/system/u.service":     svc + "[Install]\nWantedBy=other.target\n",
		},
		enable: "u.service",
		want:   []Link{l("/etc/systemd/system/other.target.wants/u.service", "/etc/systemd/system/u.service")},
	},
	{
		name: "alias-symlink-in-usr-lib",
		files: map[string]string{
			"usr/lib/systemd/system/dbus-broker.service": svc + "[Install]\nWantedBy=multi-user.target\nAlias=dbus.service\n",
			"usr/lib/systemd/system/dbus.service":        "->dbus-broker.service",
		},
		enable: "dbus.service",
		want: []Link{
			l("/etc/systemd/system/dbus.service", "/usr/lib/systemd/system/dbus-broker.service"),
			l("/etc/systemd/system/multi-user.target.wants/dbus-broker.service", "/usr/lib/systemd/system/dbus-broker.service"),
		},
	},
	{
		name: "absolute-alias-symlink",
		files: map[string]string{
			"usr/lib/systemd/system/abs.service":      svc + "[Install]\nWantedBy=multi-user.target\n",
			"usr/lib/systemd/system/absalias.service": "->/usr/lib/systemd/system/abs.service",
		},
		enable: "absalias.service",
		want:   []Link{l("/etc/systemd/system/multi-user.target.wants/abs.service", "/usr/lib/systemd/system/abs.service")},
	},
	{
		name:   "specifiers",
		files:  map[string]string{"etc/systemd/system/spec@.service": svc + "[Install]\nWantedBy=foo-%i.target\nAlias=sp-%i@.service\nDefaultInstance=q\nRequiredBy=%p-x.target\n"},
		enable: "spec@.service",
		want: []Link{
			l("/etc/systemd/system/foo-q.target.wants/spec@q.service", "/etc/systemd/system/spec@.service"),
			l("/etc/systemd/system/sp-q@.service", "/etc/systemd/system/spec@.service"),
			l("/etc/systemd/system/spec-x.target.requires/spec@q.service", "/etc/systemd/system/spec@.service"),
		},
	},
	{
		// Also= is expanded while parsing: %i is the default instance known
		// at that line ("" here, so h@.service with its own default).
		name: "also-specifier-order",
		files: map[string]string{
			"etc/systemd/system/g@.service":     svc + "[Install]\nAlso=h@%i.service\nWantedBy=m.target\nDefaultInstance=one\nAlso=h@%i.service\n",
			"usr/lib/systemd/system/h@.service": svc + "[Install]\nWantedBy=hh.target\nDefaultInstance=k\n",
		},
		enable: "g@.service",
		want: []Link{
			l("/etc/systemd/system/hh.target.wants/h@k.service", "/usr/lib/systemd/system/h@.service"),
			l("/etc/systemd/system/hh.target.wants/h@one.service", "/usr/lib/systemd/system/h@.service"),
			l("/etc/systemd/system/m.target.wants/g@one.service", "/etc/systemd/system/g@.service"),
		},
	},
	{
		name:    "invalid-default-instance-fails-the-unit",
		files:   map[string]string{"etc/systemd/system/g@.service": svc + "[Install]\nWantedBy=m.target\nDefaultInstance=bad/x\nDefaultInstance=ok\n"},
		enable:  "g@.service",
		wantErr: true,
	},
	{
		name:   "default-instance-ignored-for-plain-units",
		files:  map[string]string{"etc/systemd/system/g.service": svc + "[Install]\nWantedBy=x-%i.target\nDefaultInstance=bad/x\n"},
		enable: "g.service",
		want:   []Link{l("/etc/systemd/system/x-.target.wants/g.service", "/etc/systemd/system/g.service")},
	},
	{
		name:    "bad-aliases",
		files:   map[string]string{"etc/systemd/system/p.service": svc + "[Install]\nAlias=pt@.service p.service p.socket good.service\nWantedBy=multi-user.target\n"},
		enable:  "p.service",
		want:    []Link{l("/etc/systemd/system/good.service", "/etc/systemd/system/p.service"), l("/etc/systemd/system/multi-user.target.wants/p.service", "/etc/systemd/system/p.service")},
		wantErr: true,
	},
	{
		name:   "legacy-alias-wants-path",
		files:  map[string]string{"etc/systemd/system/s.service": svc + "[Install]\nAlias=foo.target.wants/s.service\n"},
		enable: "s.service",
		want:   []Link{l("/etc/systemd/system/foo.target.wants/s.service", "/etc/systemd/system/s.service")},
	},
	{
		name:    "invalid-wantedby",
		files:   map[string]string{"etc/systemd/system/s.service": svc + "[Install]\nWantedBy=notaunit multi-user.target\n"},
		enable:  "s.service",
		want:    []Link{l("/etc/systemd/system/multi-user.target.wants/s.service", "/etc/systemd/system/s.service")},
		wantErr: true,
	},
	{
		name: "syntax",
		files: map[string]string{"etc/systemd/system/m.service": "\ufeffX=1\n[Foo]\nbar=1\n[Install]\r\nWantedBy=a.target \\\n#c\n\n  b.target\n" +
			"WantedBy=\nWantedBy=\"c.target\" 'd.target'\nRequiredBy = e.target\n ; x\nnoequals\n[Install]\nWantedBy=f.target\nwantedby=g.target\nAlso=\n"},
		enable: "m.service",
		want: []Link{
			l("/etc/systemd/system/c.target.wants/m.service", "/etc/systemd/system/m.service"),
			l("/etc/systemd/system/d.target.wants/m.service", "/etc/systemd/system/m.service"),
			l("/etc/systemd/system/e.target.requires/m.service", "/etc/systemd/system/m.service"),
			l("/etc/systemd/system/f.target.wants/m.service", "/etc/systemd/system/m.service"),
		},
	},
	{
		name: "continuation",
		files: map[string]string{"etc/systemd/system/m.service": "[Install]\nWantedBy=a.target \\\n# comment\n; other \\\n b.target \\\n\n c.target\nRequiredBy=x.target \\\\\n" +
			"RequiredBy=y.target\n"},
		enable: "m.service",
		want: []Link{
			l("/etc/systemd/system/a.target.wants/m.service", "/etc/systemd/system/m.service"),
			l("/etc/systemd/system/b.target.wants/m.service", "/etc/systemd/system/m.service"),
			l("/etc/systemd/system/x.target.requires/m.service", "/etc/systemd/system/m.service"),
			l("/etc/systemd/system/y.target.requires/m.service", "/etc/systemd/system/m.service"),
		},
		// The empty line ends the continuation (" c.target" has no '=');
		// "\\\\" is an escaped backslash, not a continuation, and not a unit.
		wantErr: true,
	},
	{
		// Drop-ins are read after the unit, by file name across the unit
		// directories (/etc hides /usr/lib for the same name); only
		// ".conf"; no type-level ("service.d") drop-ins for [Install].
		name: "dropins",
		files: map[string]string{
			"etc/systemd/system/a.service":               svc + "[Install]\nWantedBy=x.target\n",
			"etc/systemd/system/a.service.d/10.conf":     "[Install]\nWantedBy=\n",
			"usr/lib/systemd/system/a.service.d/05.conf": "[Install]\nWantedBy=early.target\n",
			"usr/lib/systemd/system/a.service.d/20.conf": "[Install]\nWantedBy=z.target\nAlias=b.service\n",
			"usr/lib/systemd/system/a.service.d/30.conf": "[Install]\nWantedBy=usr30.target\n",
			"etc/systemd/system/a.service.d/30.conf":     "[Install]\nWantedBy=etc30.target\n",
			"etc/systemd/system/a.service.d/40.txt":      "[Install]\nWantedBy=txt.target\n",
			"etc/systemd/system/service.d/50.conf":       "[Install]\nWantedBy=typelevel.target\n",
		},
		enable: "a.service",
		want: []Link{
			l("/etc/systemd/system/b.service", "/etc/systemd/system/a.service"),
			l("/etc/systemd/system/etc30.target.wants/a.service", "/etc/systemd/system/a.service"),
			l("/etc/systemd/system/z.target.wants/a.service", "/etc/systemd/system/a.service"),
		},
	},
	{
		name: "dropins-prefix-not-read",
		files: map[string]string{
			"etc/systemd/system/p-q.service":         svc,
			"etc/systemd/system/p-.service.d/1.conf": "[Install]\nWantedBy=prefix.target\n",
		},
		enable: "p-q.service",
	},
	{
		name: "dropins-template-and-instance",
		files: map[string]string{
			"usr/lib/systemd/system/t@.service":          svc,
			"etc/systemd/system/t@.service.d/1.conf":     "[Install]\nWantedBy=tmpl.target\n",
			"etc/systemd/system/t@i.service.d/2.conf":    "[Install]\nWantedBy=inst.target\n",
			"usr/lib/systemd/system/t@.service.d/2.conf": "[Install]\nWantedBy=hidden.target\n",
		},
		enable: "t@i.service",
		want: []Link{
			l("/etc/systemd/system/inst.target.wants/t@i.service", "/usr/lib/systemd/system/t@.service"),
			l("/etc/systemd/system/tmpl.target.wants/t@i.service", "/usr/lib/systemd/system/t@.service"),
		},
	},
	{
		// The instance's drop-ins hide the template's of the same name, even
		// from a directory of lower precedence.
		name: "dropins-instance-hides-template",
		files: map[string]string{
			"etc/systemd/system/t@.service":                svc + "[Install]\nWantedBy=unit.target\n",
			"etc/systemd/system/t@.service.d/20.conf":      "[Install]\nWantedBy=template.target\n",
			"usr/lib/systemd/system/t@i.service.d/20.conf": "[Install]\nWantedBy=instance.target\n",
		},
		enable: "t@i.service",
		want: []Link{
			l("/etc/systemd/system/instance.target.wants/t@i.service", "/etc/systemd/system/t@.service"),
			l("/etc/systemd/system/unit.target.wants/t@i.service", "/etc/systemd/system/t@.service"),
		},
	},
	{
		name: "also-empty-does-not-reset",
		files: map[string]string{
			"etc/systemd/system/a.service": svc + "[Install]\nWantedBy=m.target\nAlso=h.service\nAlso=\nAlias=y.service\nAlias=\nAlias=x.service\n",
			"etc/systemd/system/h.service": svc + "[Install]\nWantedBy=h.target\n",
		},
		enable: "a.service",
		want: []Link{
			l("/etc/systemd/system/h.target.wants/h.service", "/etc/systemd/system/h.service"),
			l("/etc/systemd/system/m.target.wants/a.service", "/etc/systemd/system/a.service"),
			l("/etc/systemd/system/x.service", "/etc/systemd/system/a.service"),
		},
	},
	{
		name: "also-invalid-fails-the-unit",
		files: map[string]string{
			"etc/systemd/system/a.service": svc + "[Install]\nWantedBy=m.target\nAlso=bad\n",
		},
		enable:  "a.service",
		wantErr: true,
	},
	{
		name: "dropin-malformed",
		files: map[string]string{
			"etc/systemd/system/a.service":          svc + "[Install]\nWantedBy=x.target\n",
			"etc/systemd/system/a.service.d/1.conf": "[Install\n",
		},
		enable:  "a.service",
		wantErr: true,
	},
	{
		// Linked units: files outside the unit directories.
		name: "linked-from-etc",
		files: map[string]string{
			"opt/z.service":                svc + "[Install]\nWantedBy=m.target\n",
			"etc/systemd/system/e.service": "->/opt/z.service",
		},
		enable: "e.service",
		want: []Link{
			l("/etc/systemd/system/e.service", "/opt/z.service"), // exists already
			l("/etc/systemd/system/m.target.wants/e.service", "/opt/z.service"),
		},
	},
	{
		name: "linked-from-usr-lib",
		files: map[string]string{
			"opt/z.service":                    svc + "[Install]\nWantedBy=m.target\nAlias=za.service\n",
			"usr/lib/systemd/system/f.service": "->/opt/z.service",
		},
		enable: "f.service",
		want: []Link{
			l("/etc/systemd/system/f.service", "/opt/z.service"),
			l("/etc/systemd/system/m.target.wants/f.service", "/opt/z.service"),
			l("/etc/systemd/system/za.service", "/opt/z.service"),
		},
	},
	{
		name: "linked-no-install",
		files: map[string]string{
			"opt/n.service":                    svc,
			"usr/lib/systemd/system/n.service": "->/opt/n.service",
		},
		enable: "n.service",
		want:   []Link{l("/etc/systemd/system/n.service", "/opt/n.service")},
	},
	{
		name: "etc-symlink-into-search-path-refused",
		files: map[string]string{
			"etc/systemd/system/k.service": svc + "[Install]\nWantedBy=m.target\n",
			"etc/systemd/system/b.service": "->k.service",
		},
		enable:  "b.service",
		wantErr: true,
	},
	{
		name: "etc-symlink-to-usr-lib-same-name-refused",
		files: map[string]string{
			"usr/lib/systemd/system/w.service": svc + "[Install]\nWantedBy=m.target\n",
			"etc/systemd/system/w.service":     "->/usr/lib/systemd/system/w.service",
		},
		enable:  "w.service",
		wantErr: true,
	},
	{
		name:    "bad-section-header",
		files:   map[string]string{"etc/systemd/system/m.service": "[Install]\nWantedBy=a.target\n[Install\n"},
		enable:  "m.service",
		wantErr: true,
	},
}

// writeTree writes a case's files under dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for rel, content := range files {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if target, ok := strings.CutPrefix(content, "->"); ok {
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// ours enables name in the tree at dir with FindInFS and EnableLinks.
func ours(t *testing.T, dir, name string) ([]Link, error) {
	t.Helper()
	fsys := os.DirFS(dir)
	u, err := LoadFromFS(fsys, name)
	if err != nil {
		return nil, err
	}
	return EnableLinks(u, FSLookup(fsys))
}

func TestEnableLinksCases(t *testing.T) {
	for _, c := range enableCases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, c.files)
			got, err := ours(t, dir, c.enable)
			if (err != nil) != c.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, c.wantErr)
			}
			if !equalLinks(got, c.want) {
				t.Errorf("links:\n got %v\nwant %v", got, c.want)
			}
		})
	}
}

func equalLinks(a, b []Link) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
