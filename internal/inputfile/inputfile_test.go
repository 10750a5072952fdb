package inputfile

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReadRefusesSpecialFiles: a FIFO (with no writer: opening it for
// reading would block for ever), a socket, a character device and links to
// them are refused with an error naming the path, at once.
func TestReadRefusesSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "osc.yaml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "sock.yaml")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	link := filepath.Join(dir, "link.yaml")
	if err := os.Symlink("osc.yaml", link); err != nil {
		t.Fatal(err)
	}
	for p, kind := range map[string]string{
		fifo:        "named pipe (FIFO)",
		sock:        "socket",
		link:        "named pipe (FIFO)",
		"/dev/zero": "character device",
	} {
		done := make(chan error, 1)
		go func() { _, err := Read(p); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), kind) {
				t.Errorf("%s: %v, want an error naming it as %s", p, err, kind)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: Read blocked", p)
		}
		if _, err := Stat(p); !errors.Is(err, ErrNotRegular) {
			t.Errorf("Stat %s: %v", p, err)
		}
	}
}

func TestReadRegular(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "a.yaml")
	if err := os.WriteFile(f, []byte("kind: X\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Kubernetes mounts Secret keys as links into a ..data directory.
	link := filepath.Join(dir, "b.yaml")
	if err := os.Symlink("a.yaml", link); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{f, link} {
		if b, err := Read(p); err != nil || string(b) != "kind: X\n" {
			t.Errorf("%s: %q %v", p, b, err)
		}
	}
	if _, err := Read(dir); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("directory: %v", err)
	}
	if fi, err := Stat(dir); err != nil || !fi.IsDir() {
		t.Errorf("Stat dir: %v", err)
	}
	if _, err := Read(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing: %v", err)
	}
}

func TestCheckTree(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "blobs", "sha256"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "index.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../index.json", filepath.Join(dir, "blobs", "sha256", "link")); err != nil {
		t.Fatal(err)
	}
	if err := CheckTree(dir); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "blobs", "sha256", "abc")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := CheckTree(dir); !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), fifo) {
		t.Fatalf("FIFO in the tree: %v", err)
	}
}
