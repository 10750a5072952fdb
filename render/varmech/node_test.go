package varmech

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oslayer/oslayer/test/regtest"
)

// item is one configured entry with its content, as a source would give it.
type item struct {
	Entry
	data string
}

// image is the /usr tree the renderer would produce for items: store files
// with their modes and owners plus the generated files.
func image(t *testing.T, items []item) string {
	t.Helper()
	entries := make([]Entry, len(items))
	for i, it := range items {
		entries[i] = it.Entry
	}
	p, err := NewPlan(entries)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, it := range items {
		if it.Kind != File {
			continue
		}
		np, _ := Canonical(it.Path)
		store, ok := p.Store[np]
		if !ok {
			t.Fatalf("no store path for %s", np)
		}
		writeFile(t, filepath.Join(dir, store), []byte(it.data), it.Mode, it.UID, it.GID)
	}
	for _, g := range p.Files {
		dst := filepath.Join(dir, g.Path)
		if g.Symlink != "" {
			mkdirs(t, filepath.Dir(dst))
			if err := os.Symlink(g.Symlink, dst); err != nil {
				t.Fatal(err)
			}
			continue
		}
		writeFile(t, dst, g.Data, g.Mode, 0, 0)
	}
	return dir
}

func mkdirs(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, p string, data []byte, mode uint32, uid, gid int) {
	t.Helper()
	mkdirs(t, filepath.Dir(p))
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	// chown clears setuid/setgid: chown first.
	if os.Geteuid() == 0 {
		if err := os.Lchown(p, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(p, fileMode(mode)); err != nil {
		t.Fatal(err)
	}
}

func fileMode(m uint32) fs.FileMode {
	fm := fs.FileMode(m & 0o777)
	if m&0o4000 != 0 {
		fm |= fs.ModeSetuid
	}
	if m&0o2000 != 0 {
		fm |= fs.ModeSetgid
	}
	if m&0o1000 != 0 {
		fm |= fs.ModeSticky
	}
	return fm
}

// deploy replaces root/usr with the image's /usr, as ostree does; /var
// persists.
func deploy(t *testing.T, img, root string) {
	t.Helper()
	if err := os.RemoveAll(filepath.Join(root, "usr")); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(filepath.Join(root, "usr"), os.DirFS(filepath.Join(img, "usr"))); err != nil {
		t.Fatal(err)
	}
	// os.CopyFS does not keep modes beyond 0777|exec bits nor owners.
	err := filepath.WalkDir(filepath.Join(img, "usr"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(img, p)
		dst := filepath.Join(root, rel)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return nil
		}
		if os.Geteuid() == 0 {
			uid, gid := owner(fi)
			if err := os.Lchown(dst, uid, gid); err != nil {
				return err
			}
		}
		return os.Chmod(dst, fi.Mode()&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky))
	})
	if err != nil {
		t.Fatal(err)
	}
}

// boot runs what the node runs: the prune unit, then systemd-tmpfiles.
func boot(t *testing.T, tmpfiles, root string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Executed directly, as ExecStart= does: shebang and mode count.
	prune := exec.CommandContext(ctx, filepath.Join(root, PruneScript))
	prune.Env = append(os.Environ(), RootEnv+"="+root)
	if out, err := prune.CombinedOutput(); err != nil {
		t.Fatalf("prune: %v\n%s", err, out)
	} else {
		t.Logf("prune:\n%s", out)
	}
	tf := exec.CommandContext(ctx, tmpfiles, "--root="+root, "--create", filepath.Join(root, TmpfilesPath))
	if out, err := tf.CombinedOutput(); err != nil {
		t.Fatalf("systemd-tmpfiles: %v\n%s", err, out)
	}
}

// resolve follows symlinks of node path p inside root (absolute targets
// resolve against root, never the host).
func resolve(t *testing.T, root, p string) string {
	t.Helper()
	for range 40 {
		fi, err := os.Lstat(filepath.Join(root, p))
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			return p
		}
		target, err := os.Readlink(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(p), target)
		}
		p = filepath.Clean(target)
	}
	t.Fatalf("%s: symlink loop", p)
	return ""
}

// checkOwned verifies that every item reads on the node as configured.
func checkOwned(t *testing.T, root string, items []item) {
	t.Helper()
	for _, it := range items {
		np, _ := Canonical(it.Path)
		host := filepath.Join(root, np)
		fi, err := os.Lstat(host)
		if err != nil {
			t.Errorf("%s: %v", np, err)
			continue
		}
		switch it.Kind {
		case File:
			if fi.Mode()&fs.ModeSymlink == 0 {
				t.Errorf("%s: not a symlink into the store", np)
				continue
			}
			real := resolve(t, root, np)
			if want := StoreDir + np; real != want {
				t.Errorf("%s resolves to %s, want %s", np, real, want)
			}
			data, err := os.ReadFile(filepath.Join(root, real))
			if err != nil {
				t.Fatal(err)
			}
			if string(data) != it.data {
				t.Errorf("%s: content %q, want %q", np, data, it.data)
			}
			st, err := os.Stat(filepath.Join(root, real))
			if err != nil {
				t.Fatal(err)
			}
			if got := st.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky); got != fileMode(it.Mode) {
				t.Errorf("%s: mode %v, want %v", np, got, fileMode(it.Mode))
			}
			checkOwner(t, np, st, it.UID, it.GID)
		case Dir:
			if !fi.IsDir() {
				t.Errorf("%s: not a directory", np)
				continue
			}
			if got := fi.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky); got != fileMode(it.Mode) {
				t.Errorf("%s: mode %v, want %v", np, got, fileMode(it.Mode))
			}
			checkOwner(t, np, fi, it.UID, it.GID)
		case Symlink:
			target, err := os.Readlink(host)
			if err != nil || target != it.Target {
				t.Errorf("%s: symlink %q (%v), want %q", np, target, err, it.Target)
			}
		}
	}
}

func checkOwner(t *testing.T, np string, fi fs.FileInfo, uid, gid int) {
	t.Helper()
	if os.Geteuid() != 0 {
		return
	}
	if u, g := owner(fi); u != uid || g != gid {
		t.Errorf("%s: owner %d:%d, want %d:%d", np, u, g, uid, gid)
	}
}

func checkGone(t *testing.T, root string, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if _, err := os.Lstat(filepath.Join(root, p)); !os.IsNotExist(err) {
			t.Errorf("%s: still there (%v)", p, err)
		}
	}
}

// unrelated is what an admin or another agent put under /var.
type unrelated struct {
	path string
	data string // "" for a directory
	mode fs.FileMode
}

func plantUnrelated(t *testing.T, root string, us []unrelated) {
	t.Helper()
	for _, u := range us {
		p := filepath.Join(root, u.path)
		if u.data == "" {
			mkdirs(t, p)
		} else {
			writeFile(t, p, []byte(u.data), uint32(u.mode), 0, 0)
		}
		if err := os.Chmod(p, u.mode); err != nil {
			t.Fatal(err)
		}
	}
}

func checkUnrelated(t *testing.T, root string, us []unrelated) {
	t.Helper()
	for _, u := range us {
		p := filepath.Join(root, u.path)
		fi, err := os.Lstat(p)
		if err != nil {
			t.Errorf("unrelated %s: %v", u.path, err)
			continue
		}
		if fi.Mode().Perm() != u.mode.Perm() || fi.Mode()&fs.ModeSymlink != 0 {
			t.Errorf("unrelated %s: mode %v, want %v", u.path, fi.Mode(), u.mode)
		}
		if u.data != "" {
			if b, _ := os.ReadFile(p); string(b) != u.data {
				t.Errorf("unrelated %s: content %q, want %q", u.path, b, u.data)
			}
		}
	}
}

// TestNodeEmulation deploys image A, B, then A again on an emulated node
// (/usr replaced, /var kept), runs the prune script and the real
// systemd-tmpfiles each time, and checks the invariants: every owned item
// has that image's content and mode, dropped items are gone, nothing else
// is touched.
func TestNodeEmulation(t *testing.T) {
	tmpfiles := regtest.Require(t, "systemd-tmpfiles")
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	uid, gid := 0, 0
	if os.Geteuid() == 0 {
		uid, gid = 1000, 1001
	}
	kubeletA := item{Entry{Path: "/var/lib/kubelet/config/kubelet", Mode: 0o644}, "kubelet config A\n"}
	kubeletB := item{Entry{Path: "/var/lib/kubelet/config/kubelet", Mode: 0o600}, "kubelet config B\n"}
	ca := item{Entry{Path: "/var/lib/kubelet/ca.crt", Mode: 0o600}, "CA\n"}
	health := item{Entry{Path: "/opt/bin/health-monitor", Mode: 0o755}, "#!/bin/sh\necho ok\n"}
	script := item{Entry{Path: "/usr/local/bin/configure.sh", Mode: 0o750, UID: uid, GID: gid}, "#!/bin/sh\n"}
	dropped := item{Entry{Path: "/var/lib/dropped/file", Mode: 0o640}, "only in A\n"}
	adminKeeps := item{Entry{Path: "/var/lib/shared/conf", Mode: 0o644}, "A's copy\n"}
	added := item{Entry{Path: "/opt/bin/added", Mode: 0o4711}, "only in B\n"}
	dir := item{Entry{Path: "/var/log/custom", Kind: Dir, Mode: 0o2750, UID: uid, GID: gid}, ""}
	emptyDir := item{Entry{Path: "/var/lib/emptydir", Kind: Dir, Mode: 0o700}, ""}
	link := item{Entry{Path: "/var/lib/kubelet/kubeconfig", Kind: Symlink, Target: "/etc/kubernetes/kubeconfig"}, ""}

	// Kind changes: a file in A is a directory in B and the reverse.
	fileToDirA := item{Entry{Path: "/var/lib/f2d", Mode: 0o644}, "file in A\n"}
	fileToDirB := item{Entry{Path: "/var/lib/f2d", Kind: Dir, Mode: 0o711}, ""}
	dirToFileA := item{Entry{Path: "/usr/local/d2f", Kind: Dir, Mode: 0o755}, ""}
	dirToFileB := item{Entry{Path: "/usr/local/d2f", Mode: 0o755}, "#!/bin/sh\n"}

	itemsA := []item{kubeletA, ca, health, script, dropped, adminKeeps, dir, emptyDir, link, fileToDirA, dirToFileA}
	itemsB := []item{kubeletB, ca, health, script, added, dir, fileToDirB, dirToFileB}
	imgA, imgB := image(t, itemsA), image(t, itemsB)

	root := t.TempDir()
	// An FCOS-like /var with things oslayer does not own.
	others := []unrelated{
		{path: "/var/lib", mode: 0o755},
		{path: "/var/lib/kubelet", mode: 0o700}, // stays 0700: the implicit "d -" leaves it alone
		{path: "/var/lib/kubelet/pods/x/volume", data: "pod data\n", mode: 0o600},
		{path: "/var/opt", mode: 0o755},
		{path: "/var/opt/other", data: "admin file\n", mode: 0o644},
		{path: "/var/usrlocal/bin", mode: 0o755},
		{path: "/var/usrlocal/bin/admin-tool", data: "#!/bin/sh\n", mode: 0o700},
		{path: "/var/log", mode: 0o755},
	}
	plantUnrelated(t, root, others)

	// Image A.
	deploy(t, imgA, root)
	if target, err := os.Readlink(filepath.Join(root, PruneWantsPath)); err != nil || target != "../"+PruneUnit {
		t.Fatalf("deployed enablement link: %q %v", target, err)
	}
	boot(t, tmpfiles, root)
	checkOwned(t, root, itemsA)
	checkUnrelated(t, root, others)

	// Boot A again: idempotent.
	boot(t, tmpfiles, root)
	checkOwned(t, root, itemsA)
	checkUnrelated(t, root, others)

	// The admin replaces a file A owns; B drops it: the admin's copy stays.
	// The admin also puts a file in a directory of A's dropped file.
	if err := os.Remove(filepath.Join(root, "/var/lib/shared/conf")); err != nil {
		t.Fatal(err)
	}
	adminCopy := unrelated{path: "/var/lib/shared/conf", data: "admin's copy\n", mode: 0o644}
	inDropped := unrelated{path: "/var/lib/dropped/admin-note", data: "note\n", mode: 0o644}
	plantUnrelated(t, root, []unrelated{adminCopy, inDropped})
	others = append(others, adminCopy, inDropped)

	// Image B: one file changed content and mode, one file, a symlink and
	// an empty directory dropped, one added.
	deploy(t, imgB, root)
	boot(t, tmpfiles, root)
	checkOwned(t, root, itemsB)
	checkGone(t, root, "/var/lib/dropped/file", "/var/lib/kubelet/kubeconfig", "/var/lib/emptydir")
	checkUnrelated(t, root, others)

	// Rollback to A.
	if err := os.Remove(filepath.Join(root, "/var/lib/shared/conf")); err != nil {
		t.Fatal(err) // the admin gives the path back to the image
	}
	others = others[:len(others)-2]
	others = append(others, inDropped)
	deploy(t, imgA, root)
	boot(t, tmpfiles, root)
	checkOwned(t, root, itemsA)
	checkGone(t, root, "/var/opt/bin/added")
	checkUnrelated(t, root, others)

	// The state records the deployed image's list.
	state, err := os.ReadFile(filepath.Join(root, StatePath))
	if err != nil {
		t.Fatal(err)
	}
	list, err := os.ReadFile(filepath.Join(root, ListPath))
	if err != nil {
		t.Fatal(err)
	}
	if string(state) != string(list) || !strings.Contains(string(list), "f\t/var/lib/dropped/file\n") {
		t.Errorf("state %q, list %q", state, list)
	}
}

// TestPruneTouchesOnlyWhatItOwns runs the prune script against a state list
// with entries the script must refuse to act on.
func TestPruneTouchesOnlyWhatItOwns(t *testing.T) {
	// The node's /bin/sh is bash on FCOS/RHCOS; dash is stricter POSIX.
	ran := 0
	for _, shell := range []string{"sh", "dash", "bash"} {
		bin, err := exec.LookPath(shell)
		if err != nil {
			continue
		}
		ran++
		t.Run(shell, func(t *testing.T) { pruneOnlyOwned(t, bin) })
	}
	if ran == 0 {
		t.Skip("no shell")
	}
}

func pruneOnlyOwned(t *testing.T, shell string) {
	img := image(t, []item{{Entry{Path: "/var/lib/kept", Mode: 0o644}, "kept\n"}})
	root := t.TempDir()
	deploy(t, img, root)
	type node struct{ path, link, data string }
	nodes := []node{
		{path: "/etc/passwd", link: StoreDir + "/etc/passwd"},          // outside /var
		{path: "/etc/shadow", link: StoreDir + "/etc/shadow"},          // reached through ..
		{path: "/var/lib/elsewhere", link: "/srv/elsewhere"},           // not into the store
		{path: "/var/lib/regular", data: "admin\n"},                    // replaced by a file
		{path: "/var/lib/retargeted", link: "/b"},                      // symlink changed by the admin
		{path: "/var/lib/nonempty/file", data: "x\n"},                  // dropped dir, not empty
		{path: "/var/lib/realdir/x", data: "x\n"},                      // target of dirlink
		{path: "/var/lib/dirlink", link: "realdir"},                    // dropped dir that is a symlink
		{path: "/var/lib/unknown-kind", link: StoreDir + "/var/lib/q"}, // unknown kind letter
		{path: "/var/lib/gone", link: StoreDir + "/var/lib/gone"},      // control: removed
		{path: "/var/lib/gone-link", link: "/etc/target"},              // control: removed
		{path: "/var/lib/kept", link: StoreDir + "/var/lib/kept"},      // still owned
	}
	for _, n := range nodes {
		p := filepath.Join(root, n.path)
		mkdirs(t, filepath.Dir(p))
		switch {
		case n.link != "":
			if err := os.Symlink(n.link, p); err != nil {
				t.Fatal(err)
			}
		case n.data != "":
			writeFile(t, p, []byte(n.data), 0o644, 0, 0)
		}
	}
	mkdirs(t, filepath.Join(root, "/var/lib/emptydir2"))
	state := "# previous image\n" +
		"f\t/etc/passwd\n" +
		"f\t/var/../etc/shadow\n" +
		"f\t/var/lib/elsewhere\n" +
		"f\t/var/lib/regular\n" +
		"l\t/var/lib/retargeted\t/a\n" +
		"d\t/var/lib/nonempty\n" +
		"d\t/var/lib/dirlink\n" +
		"q\t/var/lib/unknown-kind\n" +
		"garbage\n" +
		"f\t/var/lib/gone\n" +
		"l\t/var/lib/gone-link\t/etc/target\n" +
		"d\t/var/lib/emptydir2\n" +
		"f\t/var/lib/kept\n"
	writeFile(t, filepath.Join(root, StatePath), []byte(state), 0o644, 0, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, shell, filepath.Join(root, PruneScript))
	cmd.Env = append(os.Environ(), RootEnv+"="+root)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("prune: %v\n%s", err, out)
	}
	checkGone(t, root, "/var/lib/gone", "/var/lib/gone-link", "/var/lib/emptydir2")
	for _, n := range nodes {
		if strings.HasPrefix(n.path, "/var/lib/gone") {
			continue
		}
		if _, err := os.Lstat(filepath.Join(root, n.path)); err != nil {
			t.Errorf("%s was touched: %v", n.path, err)
		}
	}
	want := "var-prune: removed /var/lib/gone-link\nvar-prune: removed /var/lib/gone\nvar-prune: removed /var/lib/emptydir2\n"
	if string(out) != want {
		t.Errorf("prune output:\n%s\nwant:\n%s", out, want)
	}
	// The state is now the image's list.
	b, err := os.ReadFile(filepath.Join(root, StatePath))
	if err != nil || !strings.HasSuffix(string(b), "f\t/var/lib/kept\n") || strings.Contains(string(b), "gone") {
		t.Errorf("state after prune: %q (%v)", b, err)
	}
}

// TestPruneUnitVerifies checks the generated unit with systemd-analyze
// (no warnings) and that its static enablement link resolves in the image.
func TestPruneUnitVerifies(t *testing.T) {
	bin := regtest.Require(t, "systemd-analyze")
	img := image(t, []item{{Entry{Path: "/var/lib/x", Mode: 0o644}, "x\n"}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "verify", "--root="+img, PruneUnit).CombinedOutput()
	if err != nil || len(out) != 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	wants := filepath.Join(img, PruneWantsPath)
	target, err := os.Readlink(wants)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(filepath.Dir(wants), target)); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("%s -> %s does not resolve to the unit: %v", PruneWantsPath, target, err)
	}
	if fi, err := os.Stat(filepath.Join(img, PruneScript)); err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("prune script: %v %v", fi, err)
	}
}

// TestOSTmpfilesLinesKept runs every tmpfiles.d file of an image that also
// has OS lines for parents of our entries (/var/tmp with aging, /var/log):
// the OS lines still apply and nothing is reported as a duplicate.
func TestOSTmpfilesLinesKept(t *testing.T) {
	tmpfiles := regtest.Require(t, "systemd-tmpfiles")
	items := []item{
		{Entry{Path: "/var/tmp/cache/x", Mode: 0o644}, "x\n"},
		{Entry{Path: "/var/log/custom", Kind: Dir, Mode: 0o750}, ""},
	}
	img := image(t, items)
	writeFile(t, filepath.Join(img, "usr/lib/tmpfiles.d/tmp.conf"), []byte("q /var/tmp 1777 root root 30d\n"), 0o644, 0, 0)
	writeFile(t, filepath.Join(img, "usr/lib/tmpfiles.d/var.conf"), []byte("d /var/log 0755 - - -\n"), 0o644, 0, 0)
	root := t.TempDir()
	mkdirs(t, filepath.Join(root, "var"))
	deploy(t, img, root)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, tmpfiles, "--root="+root, "--create").CombinedOutput()
	if err != nil || len(out) != 0 {
		t.Fatalf("systemd-tmpfiles: %v\n%s", err, out)
	}
	fi, err := os.Stat(filepath.Join(root, "var/tmp"))
	if err != nil || fi.Mode()&(fs.ModePerm|fs.ModeSticky) != 0o777|fs.ModeSticky {
		t.Fatalf("/var/tmp: %v %v (the OS line must apply)", fi.Mode(), err)
	}
	checkOwned(t, root, items)
}
