package tarball

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/oslayer/oslayer/render/tree"
	"github.com/oslayer/oslayer/test/fixtures"
)

var epoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

func sample(t testing.TB) *tree.Tree {
	tr := tree.New()
	for _, e := range []tree.Entry{
		{Path: "/usr/lib/oslayer/var/opt/bin/kubelet", Kind: tree.File, Mode: 0o755, Data: bytes.Repeat([]byte("k"), 5000)},
		{Path: "/etc/sysctl.d/99-k8s.conf", Kind: tree.File, Mode: 0o644, Data: []byte("net.ipv4.ip_forward = 1\n")},
		{Path: "/etc/setuid", Kind: tree.File, Mode: 0o4755, UID: 1000, GID: 3000000, Data: []byte("s")},
		{Path: "/etc/systemd/system/multi-user.target.wants/kubelet.service", Kind: tree.Symlink, Target: "/etc/systemd/system/kubelet.service"},
		{Path: "/etc/dir", Kind: tree.Dir, Mode: 0o1777},
		{Path: "/etc/hl", Kind: tree.Hardlink, Target: "/etc/setuid"},
		{Path: "/usr/share/ünïcödé/" + strings.Repeat("long", 40), Kind: tree.File, Mode: 0o600},
	} {
		if err := tr.Add(e); err != nil {
			t.Fatal(err)
		}
	}
	return tr
}

// readBack lists a tar as "name type mode uid gid size/target sha".
func readBack(t testing.TB, r io.Reader) []string {
	t.Helper()
	tr := tar.NewReader(r)
	var out []string
	for i := 0; i < 100000; i++ {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if !h.ModTime.Equal(epoch) || !h.AccessTime.IsZero() || !h.ChangeTime.IsZero() || h.Uname != "" || h.Gname != "" {
			t.Errorf("%s: host-dependent fields: mtime %v atime %v ctime %v uname %q gname %q", h.Name, h.ModTime, h.AccessTime, h.ChangeTime, h.Uname, h.Gname)
		}
		if len(h.PAXRecords) > 0 {
			for k := range h.PAXRecords {
				if k != "path" && k != "linkpath" && k != "uid" && k != "gid" && k != "size" {
					t.Errorf("%s: unexpected PAX record %q", h.Name, k)
				}
			}
		}
		sum := sha256.Sum256(data)
		out = append(out, strings.Join([]string{h.Name, string(h.Typeflag), octal(h.Mode), itoa(h.Uid), itoa(h.Gid), h.Linkname, hex.EncodeToString(sum[:4])}, " "))
	}
	t.Fatal("too many entries")
	return nil
}

func octal(m int64) string { return "0" + strconvFormat(m, 8) }
func itoa(i int) string    { return strconvFormat(int64(i), 10) }
func strconvFormat(v int64, base int) string {
	if v == 0 {
		return "0"
	}
	var b []byte
	for v > 0 {
		b = append([]byte{"0123456789"[v%int64(base)]}, b...)
		v /= int64(base)
	}
	return string(b)
}

// expect lists a tree the way readBack lists a tar.
func expect(tr *tree.Tree) []string {
	var out []string
	for _, e := range tr.Entries() {
		h, _ := Header(e, epoch)
		sum := sha256.Sum256(e.Data)
		if e.Kind != tree.File {
			sum = sha256.Sum256(nil)
		}
		out = append(out, strings.Join([]string{h.Name, string(h.Typeflag), octal(h.Mode), itoa(h.Uid), itoa(h.Gid), h.Linkname, hex.EncodeToString(sum[:4])}, " "))
	}
	return out
}

func TestBuildRoundTrip(t *testing.T) {
	tr := sample(t)
	l, err := Build(tr, epoch)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(l.Gzip))
	if err != nil {
		t.Fatal(err)
	}
	if zr.Name != "" || zr.Comment != "" || !zr.ModTime.IsZero() || !bytes.Equal(l.Gzip[4:8], []byte{0, 0, 0, 0}) {
		t.Errorf("gzip header has name %q comment %q mtime %v", zr.Name, zr.Comment, zr.ModTime)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if got := sha256.Sum256(raw); hex.EncodeToString(got[:]) != l.DiffID.Hex || int64(len(raw)) != l.TarSize {
		t.Errorf("DiffID %s / size %d do not match the tar (%x, %d)", l.DiffID, l.TarSize, got, len(raw))
	}
	if got := sha256.Sum256(l.Gzip); hex.EncodeToString(got[:]) != l.Digest.Hex {
		t.Errorf("Digest %s does not match the gzip bytes", l.Digest)
	}
	got, want := readBack(t, bytes.NewReader(raw)), expect(tr)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("round trip:\n got %q\nwant %q", got, want)
	}
	if !strings.HasPrefix(got[0], "etc/ 5 0755 0 0") {
		t.Errorf("first entry %q, want the implicit etc/ dir", got[0])
	}
	if !strings.HasPrefix(got[len(got)-1], "etc/hl 1 ") {
		t.Errorf("last entry %q, want the hard link", got[len(got)-1])
	}
}

// TestGolden pins the exact bytes: a change of archive/tar, of the pinned
// gzip or of the ordering shows up here.
// The compressors are reused: the bytes are the same for a fresh one and
// for one that compressed something else before.
func TestGolden(t *testing.T) {
	const wantDiffID = "sha256:d1570d99eceb950665fa8c0cd44d08539e4b871721bce80a6a36ff7d70328ce9"
	const wantDigest = "sha256:3f24af56c162e57d421479fa8cd585e059662052e54493575d55d6b05fcb01f5"
	other := tree.New()
	if err := other.Add(tree.Entry{Path: "/etc/other", Kind: tree.File, Mode: 0o644, Data: bytes.Repeat([]byte("other content "), 5000)}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		l, err := Build(sample(t), epoch)
		if err != nil {
			t.Fatal(err)
		}
		if l.DiffID.String() != wantDiffID || l.Digest.String() != wantDigest {
			t.Fatalf("build %d: digests changed:\n diffID %s\n digest %s", i, l.DiffID, l.Digest)
		}
		if _, err := Build(other, epoch); err != nil {
			t.Fatal(err)
		}
	}
}

func TestDeterministic(t *testing.T) {
	a, err := Build(sample(t), epoch)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		b, err := Build(sample(t), epoch)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a.Gzip, b.Gzip) {
			t.Fatalf("build %d differs", i)
		}
	}
	c, err := Build(sample(t), epoch.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if c.DiffID == a.DiffID {
		t.Fatal("epoch does not reach the tar")
	}
}

// fuzzTree builds a tree from a spec: one entry per line, "K PATH [TARGET]",
// K one of f d l h; modes and owners come from data.
func fuzzTree(spec string, data []byte) *tree.Tree {
	tr := tree.New()
	if len(data) > 4096 {
		data = data[:4096] // bound the work per input
	}
	lines := strings.Split(spec, "\n")
	if len(lines) > 64 {
		lines = lines[:64]
	}
	for i, ln := range lines {
		k, rest, _ := strings.Cut(ln, " ")
		p, target, _ := strings.Cut(rest, " ")
		var b byte
		if len(data) > 0 {
			b = data[i%len(data)]
		}
		e := tree.Entry{Path: p, Mode: uint32(b) * 29 & 0o7777, UID: int(b) * 7919, GID: int(b) % 5}
		switch k {
		case "f":
			e.Kind = tree.File
			if len(data) > 0 {
				e.Data = data[i%len(data):]
			}
		case "d":
			e.Kind = tree.Dir
		case "l":
			e.Kind, e.Target = tree.Symlink, target
		case "h":
			e.Kind, e.Target = tree.Hardlink, target
		default:
			continue
		}
		_ = tr.Add(e) // invalid entries are rejected; the rest must round-trip
	}
	return tr
}

func FuzzTreeToTar(f *testing.F) {
	f.Add("f /etc/a\nd /etc/b\nl /etc/c ../a\nh /etc/d /etc/a", []byte{0o644 / 29, 3})
	f.Add("f /usr/local/bin/"+strings.Repeat("x", 200)+"\nf /var/ü", []byte("data"))
	for _, p := range []string{
		"gardener/generated/osc-worker-a-reconcile.yaml",
		"mco/aws/worker/00-worker.yaml",
	} {
		b, err := os.ReadFile(fixtures.Path(f, p))
		if err != nil {
			f.Fatal(err)
		}
		// Paths the fixture mentions become entries, its bytes the data.
		var spec []string
		for _, w := range strings.Fields(string(b)) {
			w = strings.Trim(w, `"',`)
			if strings.HasPrefix(w, "/") && len(spec) < 12 {
				spec = append(spec, "f "+w)
			}
		}
		f.Add(strings.Join(spec, "\n"), b[:min(len(b), 512)])
	}
	f.Fuzz(func(t *testing.T, spec string, data []byte) {
		tr := fuzzTree(spec, data)
		var a, b bytes.Buffer
		if err := Write(&a, tr, epoch); err != nil {
			t.Fatalf("Write of a valid tree: %v", err)
		}
		if err := Write(&b, tr, epoch); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a.Bytes(), b.Bytes()) {
			t.Fatal("two writes differ")
		}
		got, want := readBack(t, &a), expect(tr)
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("round trip:\n got %q\nwant %q", got, want)
		}
	})
}

func TestWhiteout(t *testing.T) {
	tr := tree.New()
	for _, e := range []tree.Entry{
		{Path: "/etc/systemd/system/multi-user.target.wants/sshd.service", Kind: tree.Whiteout},
		{Path: "/etc/systemd/system/sockets.target.wants", Kind: tree.Whiteout},
	} {
		if err := tr.Add(e); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if err := Write(&buf, tr, epoch); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(readBack(t, &buf), "\n")
	for _, want := range []string{
		"etc/systemd/system/multi-user.target.wants/.wh.sshd.service 0 00 0 0  e3b0c442",
		"etc/systemd/system/.wh.sockets.target.wants 0 00 0 0  e3b0c442",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("tar lacks %q:\n%s", want, got)
		}
	}
}
