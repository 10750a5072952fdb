package systemd

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"testing/fstest"
)

func TestClassify(t *testing.T) {
	for name, want := range map[string]NameKind{
		"a.service":                           Plain,
		"a-b_c:d.e\\x2d.mount":                Plain,
		"a@.service":                          Template,
		"a@b.service":                         Instance,
		"a@b@c.timer":                         Instance,
		"@a.service":                          Invalid,
		"a.conf":                              Invalid,
		"a":                                   Invalid,
		".service":                            Invalid,
		"a b.service":                         Invalid,
		"a/b.service":                         Invalid,
		"ä.service":                           Invalid,
		"":                                    Invalid,
		strings.Repeat("a", 248) + ".service": Invalid, // 256 bytes
		strings.Repeat("a", 247) + ".service": Plain,   // 255 bytes
	} {
		if got := Classify(name); got != want {
			t.Errorf("Classify(%q) = %v, want %v", name, got, want)
		}
	}
	if err := ValidName("x y.service"); err == nil || !strings.Contains(err.Error(), `"x y.service"`) {
		t.Errorf("ValidName: %v", err)
	}
	if tn, ok := TemplateOf("foo@bar.socket"); !ok || tn != "foo@.socket" {
		t.Errorf("TemplateOf = %q, %v", tn, ok)
	}
	if _, ok := TemplateOf("foo@.socket"); ok {
		t.Error("TemplateOf(template) ok")
	}
}

func TestParseInstall(t *testing.T) {
	in, err := ParseInstall("[Install]\nWantedBy=a.target b.target\nWantedBy=c.target\nRequiredBy=r.target\nUpheldBy=u.target\n" +
		"Alias=x.service\nAlso=y.service\nAlso=z.socket\nAlso=\nDefaultInstance=one\nDefaultInstance=two\nUnknown=1\n[Service]\nWantedBy=no.target\n")
	if err != nil {
		t.Fatal(err)
	}
	want := Install{WantedBy: []string{"a.target", "b.target", "c.target"}, RequiredBy: []string{"r.target"}, UpheldBy: []string{"u.target"},
		Alias: []string{"x.service"}, Also: []string{"y.service", "z.socket"}, DefaultInstance: "two", defaults: []string{"one", "two"}, alsoAt: []int{0, 0}}
	if !reflect.DeepEqual(in, want) {
		t.Errorf("got %+v\nwant %+v", in, want)
	}
	if in.Empty() {
		t.Error("Empty() on a full section")
	}
	if in, _ := ParseInstall("[Install]\nDefaultInstance=x\n"); !in.Empty() {
		t.Error("DefaultInstance alone is installation config")
	}
	for _, c := range []struct{ text, want string }{
		{"[Install]\nWantedBy=a.target\n[Install\n", `line 3: invalid section header "[Install"`},
		{"[Install]\nWantedBy=\"a.target\n", "line 2: WantedBy=: unterminated quote"},
		{"[Install]\nWantedBy=a\xff.target\n", "line 2: invalid UTF-8"},
		{"[Install]\nWantedBy=a\x00.target\n", "NUL"},
		{"[Install]\nWantedBy=" + strings.Repeat("a", maxLine+1) + "\n", "line 2: line too long"},
		{"[Install]\nWantedBy=a \\\n" + strings.Repeat("b", maxLine) + "\n", "line 2: line too long"},
	} {
		_, err := ParseInstall(c.text)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseInstall(%.40q) = %v, want error containing %q", c.text, err, c.want)
		}
	}
}

func TestExpand(t *testing.T) {
	for _, c := range []struct{ s, name, def, want, err string }{
		{"%n|%N|%p|%i|%j|%%", "getty-x@tty1.service", "", "getty-x@tty1.service|getty-x@tty1|getty-x|tty1|x|%", ""},
		{"%i %N", "t@.service", "def", "def t@def", ""},
		{"%P/%I/%J", "a-b@c-d.service", "", "a/b/c/d/b", ""},
		{"%I", "a@x\\x2dy.service", "", "x-y", ""},
		{"%H", "a.service", "", "", "depends on the host"},
		{"%Z", "a.service", "", "", "unknown specifier"},
		{"a%", "a.service", "", "", "trailing"},
	} {
		got, err := expand(c.s, c.name, c.def)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("expand(%q, %q) = %q, %v; want error %q", c.s, c.name, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("expand(%q, %q) = %q, %v; want %q", c.s, c.name, got, err, c.want)
		}
	}
}

func TestEnableLinksInput(t *testing.T) {
	if _, err := EnableLinks(UnitFile{Name: "bad name", Path: "/etc/systemd/system/x"}, nil); err == nil {
		t.Error("invalid name accepted")
	}
	if _, err := EnableLinks(UnitFile{Name: "a.service", Path: "etc/a.service"}, nil); err == nil {
		t.Error("relative path accepted")
	}
	if _, err := EnableLinks(UnitFile{Name: "a.service", Path: "/etc/../a.service"}, nil); err == nil {
		t.Error("unclean path accepted")
	}
	// Alias collision between Also= units: an error, like systemctl's
	// "File exists".
	a := UnitFile{Name: "a.service", Path: "/etc/systemd/system/a.service", Install: Install{Alias: []string{"x.service"}, Also: []string{"b.service"}}}
	b := UnitFile{Name: "b.service", Path: "/etc/systemd/system/b.service", Install: Install{Alias: []string{"x.service"}}}
	if _, err := EnableLinks(a, MapLookup(a, b)); err == nil || !strings.Contains(err.Error(), "already links") {
		t.Errorf("alias collision: %v", err)
	}
	// Also= cycles terminate; MapLookup resolves instances to templates.
	c := UnitFile{Name: "c.service", Path: "/etc/systemd/system/c.service", Install: Install{WantedBy: []string{"m.target"}, Also: []string{"d@i.service", "c.service"}}}
	d := UnitFile{Name: "d@.service", Path: "/usr/lib/systemd/system/d@.service", Install: Install{WantedBy: []string{"m.target"}, Also: []string{"c.service"}}}
	got, err := EnableLinks(c, Chain(nil, MapLookup(c, d)))
	want := []Link{
		{"/etc/systemd/system/m.target.wants/c.service", "/etc/systemd/system/c.service"},
		{"/etc/systemd/system/m.target.wants/d@i.service", "/usr/lib/systemd/system/d@.service"},
	}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, %v\nwant %v", got, err, want)
	}
	if l := MaskLink("x.service"); l != (Link{"/etc/systemd/system/x.service", "/dev/null"}) {
		t.Errorf("MaskLink = %v", l)
	}
}

func TestFindInFS(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"usr/lib/systemd/system/t@.service":         "[Install]\nWantedBy=multi-user.target\n",
		"usr/lib/systemd/system/t@special.service":  "[Install]\nWantedBy=special.target\n",
		"etc/systemd/system/masked.service":         "->/dev/null",
		"usr/lib/systemd/system/masked.service":     "[Install]\nWantedBy=multi-user.target\n",
		"usr/lib/systemd/system/loop1.service":      "->loop2.service",
		"usr/lib/systemd/system/loop2.service":      "->loop1.service",
		"usr/lib/systemd/system/bad.service":        "[Install\n",
		"usr/lib/systemd/system/getty@tty9.service": "->getty@.service",
		"usr/lib/systemd/system/getty@.service":     "[Install]\nWantedBy=getty.target\n",
		"lib/systemd/system/old.service":            "[Install]\nWantedBy=multi-user.target\n",
	})
	fsys := os.DirFS(dir)
	for _, c := range []struct {
		name, wantName, wantPath string
		err                      error
		errText                  string
	}{
		{name: "t@x.service", wantName: "t@x.service", wantPath: "/usr/lib/systemd/system/t@.service"},
		{name: "t@special.service", wantName: "t@special.service", wantPath: "/usr/lib/systemd/system/t@special.service"},
		{name: "getty@tty9.service", wantName: "getty@tty9.service", wantPath: "/usr/lib/systemd/system/getty@.service"},
		{name: "old.service", wantName: "old.service", wantPath: "/lib/systemd/system/old.service"},
		{name: "masked.service", err: ErrMasked},
		{name: "none.service", err: ErrNotFound},
		{name: "loop1.service", errText: "too many levels"},
		{name: "bad.service", errText: "/usr/lib/systemd/system/bad.service: line 1: invalid section header"},
		{name: "not a unit", errText: "not a valid unit name"},
	} {
		u, err := LoadFromFS(fsys, c.name)
		switch {
		case c.err != nil:
			if !errors.Is(err, c.err) {
				t.Errorf("%s: err %v, want %v", c.name, err, c.err)
			}
		case c.errText != "":
			if err == nil || !strings.Contains(err.Error(), c.errText) {
				t.Errorf("%s: err %v, want %q", c.name, err, c.errText)
			}
		default:
			if err != nil || u.Name != c.wantName || u.Path != c.wantPath {
				t.Errorf("%s: got %+v, %v; want %s at %s", c.name, u, err, c.wantName, c.wantPath)
			}
		}
		if _, ok := FindInFS(fsys, c.name); ok != (c.err == nil && c.errText == "") {
			t.Errorf("FindInFS(%s) ok=%v", c.name, ok)
		}
	}
	// An fs.FS without symlinks (fstest.MapFS) works too.
	m := fstest.MapFS{"usr/lib/systemd/system/a.service": {Data: []byte("[Install]\nWantedBy=b.target\n")}}
	if u, ok := FindInFS(m, "a.service"); !ok || u.Path != "/usr/lib/systemd/system/a.service" || len(u.Install.WantedBy) != 1 {
		t.Errorf("MapFS: %+v %v", u, ok)
	}
}

func FuzzParseInstall(f *testing.F) {
	for _, c := range enableCases {
		for _, content := range c.files {
			f.Add(content)
		}
	}
	f.Add("[Install]\nWantedBy='a b' \"c\\\"d\" \\\n e\n")
	f.Fuzz(func(t *testing.T, text string) {
		in, err := ParseInstall(text)
		if err != nil {
			return
		}
		// Whatever parses must enable without panicking, deterministically.
		u := UnitFile{Name: "f@.service", Path: "/etc/systemd/system/f@.service", Install: in}
		a, errA := EnableLinks(u, MapLookup(u))
		b, errB := EnableLinks(u, MapLookup(u))
		if !reflect.DeepEqual(a, b) || (errA == nil) != (errB == nil) {
			t.Fatalf("not deterministic: %v %v / %v %v", a, errA, b, errB)
		}
		for i, l := range a {
			if !strings.HasPrefix(l.Path, SystemDir+"/") || l.Target != u.Path || i > 0 && a[i-1].Path >= l.Path {
				t.Fatalf("bad link list %v", a)
			}
		}
	})
}

func BenchmarkEnableLinks(b *testing.B) {
	in, err := ParseInstall("[Install]\nWantedBy=multi-user.target kubelet-dependencies.target\nRequiredBy=x.target\nAlias=y.service\nAlso=z.service\n")
	if err != nil {
		b.Fatal(err)
	}
	u := UnitFile{Name: "a.service", Path: "/etc/systemd/system/a.service", Install: in}
	z := UnitFile{Name: "z.service", Path: "/usr/lib/systemd/system/z.service", Install: Install{WantedBy: []string{"multi-user.target"}}}
	look := MapLookup(u, z)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := EnableLinks(u, look); err != nil {
			b.Fatal(err)
		}
	}
}
