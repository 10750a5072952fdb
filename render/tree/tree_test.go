package tree

import (
	"strings"
	"testing"
)

func TestCheckPath(t *testing.T) {
	good := []string{"/etc/x", "/a/b/c", "/usr/lib/ü", "/a/..b", "/a/b.."}
	for _, p := range good {
		if err := CheckPath(p); err != nil {
			t.Errorf("CheckPath(%q) = %v, want nil", p, err)
		}
	}
	bad := map[string]string{
		"":           "empty",
		"/":          "root",
		"etc/x":      "not absolute",
		"/etc/../x":  `".."`,
		"/etc/./x":   "not clean",
		"/etc//x":    "not clean",
		"/etc/x/":    "not clean",
		"/etc/\x00x": "NUL",
		"/etc/\xffx": "UTF-8",
	}
	for p, want := range bad {
		err := CheckPath(p)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckPath(%q) = %v, want error containing %q", p, err, want)
		}
	}
}

func TestAddParentsAndOrder(t *testing.T) {
	tr := New()
	must := func(e Entry) {
		t.Helper()
		if err := tr.Add(e); err != nil {
			t.Fatal(err)
		}
	}
	must(Entry{Path: "/etc/b-c", Kind: File, Mode: 0o644, Origin: "o1"})
	must(Entry{Path: "/etc/b/c", Kind: File, Mode: 0o4755, UID: 1, GID: 2, Data: []byte("x"), Origin: "o2"})
	must(Entry{Path: "/etc/b", Kind: Dir, Mode: 0o700, Origin: "o3"}) // upgrades the implicit parent
	must(Entry{Path: "/etc/hl", Kind: Hardlink, Target: "/etc/b/c", Origin: "o4"})
	must(Entry{Path: "/etc/a", Kind: Symlink, Target: "../x", Origin: "o5"})
	must(Entry{Path: "/etc/a", Kind: Symlink, Target: "../x", Origin: "o6"}) // identical: no-op

	var got []string
	for _, e := range tr.Entries() {
		got = append(got, e.Path+":"+e.Kind.String())
	}
	want := "/etc:dir /etc/a:symlink /etc/b:dir /etc/b/c:file /etc/b-c:file /etc/hl:hardlink"
	if strings.Join(got, " ") != want {
		t.Fatalf("order:\n got %s\nwant %s", strings.Join(got, " "), want)
	}
	if e, _ := tr.Get("/etc/b"); e.Mode != 0o700 || e.Implicit {
		t.Errorf("/etc/b = %+v, want explicit 0700", e)
	}
	if e, _ := tr.Get("/etc"); e.Mode != 0o755 || !e.Implicit || e.UID != 0 {
		t.Errorf("/etc = %+v, want implicit 0755 root", e)
	}
	if e, _ := tr.Get("/etc/a"); e.Origin != "o5" {
		t.Errorf("identical re-add replaced origin: %q", e.Origin)
	}
}

func TestAddErrors(t *testing.T) {
	base := func() *Tree {
		tr := New()
		if err := tr.Add(Entry{Path: "/etc/f", Kind: File, Mode: 0o644, Data: []byte("a"), Origin: "first.yaml spec.files[0]", Layer: "config"}); err != nil {
			t.Fatal(err)
		}
		return tr
	}
	cases := []struct {
		name string
		e    Entry
		want []string
	}{
		{"conflict", Entry{Path: "/etc/f", Kind: File, Mode: 0o644, Data: []byte("b"), Origin: "second.yaml spec.files[1]", Layer: "config"},
			[]string{"/etc/f", "first.yaml spec.files[0]", "second.yaml spec.files[1]", "content differs"}},
		{"mode conflict", Entry{Path: "/etc/f", Kind: File, Mode: 0o600, Data: []byte("a"), Origin: "second", Layer: "config"},
			[]string{"mode 0644 vs 0600"}},
		{"file over implicit dir", Entry{Path: "/etc", Kind: File, Origin: "second"}, []string{"needs a directory"}},
		{"child of file", Entry{Path: "/etc/f/x", Kind: File, Origin: "second"}, []string{"parent /etc/f is a file from first.yaml"}},
		{"relative", Entry{Path: "etc/g", Kind: File, Origin: "second"}, []string{"second", "not absolute"}},
		{"mode bits", Entry{Path: "/etc/g", Kind: File, Mode: 0o10644, Origin: "second"}, []string{"outside 07777"}},
		{"negative uid", Entry{Path: "/etc/g", Kind: File, UID: -1, Origin: "second"}, []string{"negative"}},
		{"symlink empty", Entry{Path: "/etc/g", Kind: Symlink, Origin: "second"}, []string{"empty symlink target"}},
		{"symlink NUL", Entry{Path: "/etc/g", Kind: Symlink, Target: "a\x00", Origin: "second"}, []string{"NUL"}},
		{"hardlink missing", Entry{Path: "/etc/g", Kind: Hardlink, Target: "/etc/none", Origin: "second", Layer: "config"}, []string{"not an earlier entry"}},
		{"hardlink other layer", Entry{Path: "/etc/g", Kind: Hardlink, Target: "/etc/f", Origin: "second", Layer: "payload"}, []string{"layer \"config\""}},
		{"hardlink to dir", Entry{Path: "/etc/g", Kind: Hardlink, Target: "/etc", Origin: "second"}, []string{"not a regular file"}},
		{"unknown kind", Entry{Path: "/etc/g", Kind: 9, Origin: "second"}, []string{"unsupported"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr := base()
			n := tr.Len()
			err := tr.Add(c.e)
			if err == nil {
				t.Fatalf("Add(%+v) succeeded", c.e)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if tr.Len() != n {
				t.Errorf("failed Add changed the tree: %d entries, want %d", tr.Len(), n)
			}
		})
	}
}

func TestSelect(t *testing.T) {
	tr := New()
	for _, e := range []Entry{
		{Path: "/usr/lib/big", Kind: File, Layer: "payload"},
		{Path: "/usr/lib/x", Kind: Dir, Mode: 0o750, Layer: "config"},
		{Path: "/usr/lib/x/small", Kind: File, Layer: "config"},
		{Path: "/usr/lib/hl", Kind: Hardlink, Target: "/usr/lib/big", Layer: "payload"},
	} {
		if err := tr.Add(e); err != nil {
			t.Fatal(err)
		}
	}
	p, err := tr.Select(func(e *Entry) bool { return e.Layer == "payload" })
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range p.Entries() {
		got = append(got, e.Path)
	}
	if s := strings.Join(got, " "); s != "/usr /usr/lib /usr/lib/big /usr/lib/hl" {
		t.Fatalf("payload = %s", s)
	}
	c, err := tr.Select(func(e *Entry) bool { return e.Layer == "config" })
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := c.Get("/usr/lib/x"); !ok || e.Mode != 0o750 {
		t.Fatalf("config lost explicit dir: %+v", e)
	}
	if _, err := tr.Select(func(e *Entry) bool { return e.Kind == Hardlink }); err == nil || !strings.Contains(err.Error(), "same layer") {
		t.Fatalf("Select without hard link target: %v", err)
	}
}

func TestLess(t *testing.T) {
	for _, c := range [][2]string{{"/a", "/a/b"}, {"/a/b", "/a-b"}, {"/a/z", "/a-b"}, {"/a/b", "/a/c"}, {"/a/b/c", "/a/bc"}} {
		if !Less(c[0], c[1]) || Less(c[1], c[0]) {
			t.Errorf("Less(%q, %q) wrong", c[0], c[1])
		}
	}
	if Less("/a", "/a") {
		t.Error("Less(x, x) = true")
	}
}

func TestWhiteoutAndRemove(t *testing.T) {
	tr := New()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(tr.Add(Entry{Path: "/etc/systemd/system/multi-user.target.wants/a.service", Kind: Symlink, Mode: 0o777, Target: "/usr/lib/systemd/system/a.service"}))
	must(tr.Add(Entry{Path: "/etc/systemd/system/multi-user.target.wants/sshd.service", Kind: Whiteout}))
	must(tr.Add(Entry{Path: "/etc/systemd/system/multi-user.target.wants/sshd.service", Kind: Whiteout})) // identical: no-op
	for _, bad := range []Entry{
		{Path: "/etc/systemd/system/x", Kind: Whiteout, Mode: 0o644},
		{Path: "/etc/systemd/system/x", Kind: Whiteout, Data: []byte("x")},
		{Path: "/etc/systemd/system/multi-user.target.wants/sshd.service", Kind: Symlink, Mode: 0o777, Target: "/dev/null"},
		{Path: "/etc/systemd/system/multi-user.target.wants/sshd.service/below", Kind: File},
		{Path: "/etc/systemd/system/multi-user.target.wants", Kind: Whiteout}, // has entries below
	} {
		if err := tr.Add(bad); err == nil {
			t.Errorf("Add(%+v) succeeded", bad)
		}
	}
	if err := tr.Remove("/etc/systemd/system"); err == nil {
		t.Error("Remove of a directory with entries succeeded")
	}
	must(tr.Remove("/etc/systemd/system/multi-user.target.wants/a.service"))
	if _, ok := tr.Get("/etc/systemd/system/multi-user.target.wants"); !ok {
		t.Error("the parent of the whiteout went away")
	}
	must(tr.Remove("/etc/systemd/system/multi-user.target.wants/sshd.service"))
	must(tr.Remove("/etc/absent"))
	if tr.Len() != 0 {
		t.Errorf("implicit parents left: %d entries", tr.Len())
	}
	// An explicit parent stays.
	must(tr.Add(Entry{Path: "/etc/d", Kind: Dir, Mode: 0o700}))
	must(tr.Add(Entry{Path: "/etc/d/f", Kind: File, Mode: 0o644}))
	must(tr.Remove("/etc/d/f"))
	if _, ok := tr.Get("/etc/d"); !ok {
		t.Error("an explicit directory was removed with its last child")
	}
	must(tr.Add(Entry{Path: "/etc/d/h", Kind: File, Mode: 0o644, Layer: "x"}))
	must(tr.Add(Entry{Path: "/etc/d/hl", Kind: Hardlink, Target: "/etc/d/h", Layer: "x"}))
	if err := tr.Remove("/etc/d/h"); err == nil {
		t.Error("Remove of a hard link's target succeeded")
	}
}
