package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/oslayer/oslayer/assemble/baseindex"
	"github.com/oslayer/oslayer/test/regtest"
	"github.com/oslayer/oslayer/test/synth"
)

// tempFiles lists the files of dir that are not part of an OCI layout:
// everything but oci-layout, index.json and blobs/sha256/<hex>.
func tempFiles(t *testing.T, dir string) (files []string, bytes int64) {
	t.Helper()
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		name := filepath.Base(p)
		isBlob := filepath.Dir(rel) == filepath.Join("blobs", "sha256") && len(name) == 64 && !strings.HasPrefix(name, ".")
		if rel == "oci-layout" || rel == "index.json" || isBlob {
			return nil
		}
		files = append(files, rel)
		if info, err := d.Info(); err == nil {
			bytes += info.Size()
		}
		return nil
	})
	return files, bytes
}

// blobInFlight reports whether a blob is being written into dir: a temp
// file of a blob holds some bytes.
func blobInFlight(t *testing.T, dir string) bool {
	t.Helper()
	files, _ := tempFiles(t, dir)
	for _, f := range files {
		name := filepath.Base(f)
		if !strings.HasPrefix(name, "blob-") && !strings.HasPrefix(name, ".tmp-") {
			continue
		}
		if st, err := os.Stat(filepath.Join(dir, f)); err == nil && st.Size() > 0 {
			return true
		}
	}
	return false
}

// TestKilledLayoutWriteThenRebuild: `oslayer build --push oci:DIR` is
// killed with SIGKILL while it writes blobs; the same build run again
// succeeds, removes what the killed run left, and the layout holds exactly
// the image's blobs, each with its digest (umoci unpacks it). Before, the
// killed run's temp files stayed among the blobs for ever.
func TestKilledLayoutWriteThenRebuild(t *testing.T) {
	regtest.Require(t, "umoci")
	reg := regtest.Start(t, regtest.Config{})
	base, err := synth.FCOSBase(0.02)
	if err != nil {
		t.Fatal(err)
	}
	baseRef := reg.Host + "/fcos/base:stable"
	if _, err := synth.Push(ctxT(t), base, baseRef); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "out")
	args := []string{"build", "--base", baseRef, "--pool", "worker", "--osc", exampleOSC(t), "--push", "oci:" + dir + ":latest"}

	cmd := exec.CommandContext(ctxT(t), oslayer(t), args...)
	cmd.Dir = repoRoot(t)
	cmd.Env = append(os.Environ(), baseindex.CacheEnv+"="+filepath.Join(t.TempDir(), "baseindex"))
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	killed := false
	deadline := time.After(60 * time.Second)
poll:
	for {
		select {
		case err := <-exited:
			t.Fatalf("the build ended (%v) before any temp file appeared; cannot kill it mid-write\n%s", err, errb.String())
		case <-deadline:
			_ = cmd.Process.Kill()
			t.Fatalf("no temp file appeared in %s within 60s\n%s", dir, errb.String())
		default:
		}
		if blobInFlight(t, dir) {
			_ = cmd.Process.Signal(syscall.SIGKILL)
			killed = true
			break poll
		}
		time.Sleep(time.Millisecond)
	}
	<-exited
	left, leftBytes := tempFiles(t, dir)
	t.Logf("killed mid-write: %d temp file(s), %d bytes left: %v", len(left), leftBytes, left)
	if !killed || len(left) == 0 {
		t.Fatalf("nothing left by the killed run")
	}

	stdout, stderr, code := cli(t, args...)
	if code != 0 {
		t.Fatalf("rebuild after a killed run: exit %d\n%s", code, stderr)
	}
	if files, n := tempFiles(t, dir); len(files) > 0 {
		t.Errorf("after the rebuild %d temp file(s), %d bytes remain: %v", len(files), n, files)
	}
	ents, err := os.ReadDir(filepath.Join(dir, "blobs", "sha256"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		f, err := os.Open(filepath.Join(dir, "blobs", "sha256", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil || hex.EncodeToString(h.Sum(nil)) != e.Name() {
			t.Errorf("blob %s does not have its digest (%v)", e.Name(), err)
		}
	}
	run(t, "umoci", "unpack", "--rootless", "--image", dir+":latest", filepath.Join(t.TempDir(), "bundle"))
	t.Logf("rebuild after the kill: %v, %s", lastWall.Round(time.Millisecond), lastLine(stdout))
}
