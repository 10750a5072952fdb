package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/oslayer/oslayer/test/regtest"
	"github.com/oslayer/oslayer/test/synth"
)

// imageRefOSC writes an OSC with one imageRef file from image.
func imageRefOSC(t *testing.T, dir, image string) string {
	t.Helper()
	p := filepath.Join(dir, "osc.yaml")
	osc := synth.OSCFiles(synth.ImageRefFile("/opt/bin/kubelet", image, "/kubelet"))
	if err := os.WriteFile(p, []byte(osc), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// start runs oslayer in the repository root without waiting for it.
func start(t *testing.T, stdout, stderr *bytes.Buffer, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(oslayer(t), args...)
	cmd.Dir = repoRoot(t)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return cmd
}

// waitExit waits up to limit for cmd and returns its exit code and how long
// it took from since.
func waitExit(t *testing.T, cmd *exec.Cmd, since time.Time, limit time.Duration) (int, time.Duration) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
		return cmd.ProcessState.ExitCode(), time.Since(since)
	case <-time.After(limit):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("%v still running %v after the signal", cmd.Args[1:3], limit)
	}
	return 0, 0
}

// TestSignalStopsCommands sends SIGINT and SIGTERM to a real oslayer
// process stuck on a registry that never answers (render's imageRef pull,
// build's base), and expects exit 130 / 143 within a second, with nothing
// written: no output, no temporary file beside it.
func TestSignalStopsCommands(t *testing.T) {
	host := regtest.Stalled(t)
	for _, tc := range []struct {
		name string
		sig  syscall.Signal
		code int
		args func(dir string) []string
		out  string
	}{
		{"render SIGTERM", syscall.SIGTERM, 143, func(dir string) []string {
			return []string{"render", "--osc", imageRefOSC(t, dir, host+"/x/hyperkube:v1"), "--output-dir", filepath.Join(dir, "out")}
		}, "out"},
		{"render SIGINT", syscall.SIGINT, 130, func(dir string) []string {
			return []string{"render", "--osc", imageRefOSC(t, dir, host+"/x/hyperkube:v1"), "--output-dir", filepath.Join(dir, "out")}
		}, "out"},
		{"build SIGINT", syscall.SIGINT, 130, func(dir string) []string {
			return []string{"build", "--base", host + "/fcos/base:stable", "--pool", "worker",
				"--osc", exampleOSC(t), "--push", "oci:" + filepath.Join(dir, "layout")}
		}, "layout"},
		{"build SIGTERM", syscall.SIGTERM, 143, func(dir string) []string {
			return []string{"build", "--base", host + "/fcos/base:stable", "--pool", "worker",
				"--osc", exampleOSC(t), "--push", host + "/os/worker:latest"}
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var stdout, stderr bytes.Buffer
			cmd := start(t, &stdout, &stderr, tc.args(dir)...)
			time.Sleep(700 * time.Millisecond) // well into the stalled request
			if cmd.ProcessState != nil {
				t.Fatalf("exited before the signal: %s", stderr.String())
			}
			sent := time.Now()
			if err := cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			code, took := waitExit(t, cmd, sent, 10*time.Second)
			t.Logf("%s: exit %d %.3fs after the signal; stderr %q", tc.name, code, took.Seconds(), stderr.String())
			if code != tc.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tc.code, stderr.String())
			}
			if took > 2*time.Second {
				t.Errorf("took %v after the signal (the grace is under a second)", took)
			}
			ents, _ := os.ReadDir(dir)
			for _, e := range ents {
				if e.Name() != "osc.yaml" {
					t.Errorf("left behind: %s", e.Name())
				}
			}
		})
	}
}

// TestSpecialFileInputs: a FIFO given as an input, or named like a document
// inside a --machineconfig or --secrets directory, is an error naming it,
// at once (on the main of before, each hung for ever). The run is bounded by
// a timeout and measured.
func TestSpecialFileInputs(t *testing.T) {
	dir := t.TempDir()
	fifo := func(p string) string {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mkfifo(p, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	oscFIFO := fifo(filepath.Join(dir, "osc.yaml"))
	mcDir := filepath.Join(dir, "mcs")
	mcFIFO := fifo(filepath.Join(mcDir, "99-worker.yaml"))
	secDir := filepath.Join(dir, "secrets")
	secFIFO := fifo(filepath.Join(secDir, "s.yaml"))
	authFIFO := fifo(filepath.Join(dir, "auth.json"))
	keyFIFO := fifo(filepath.Join(dir, "cosign.key"))
	out := filepath.Join(dir, "out")
	// A copy of the example base layout whose index.json is a FIFO.
	baseCopy := filepath.Join(dir, "base")
	if err := os.CopyFS(baseCopy, os.DirFS(filepath.Join(repoRoot(t), "examples", "base"))); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(baseCopy, "index.json")); err != nil {
		t.Fatal(err)
	}
	baseFIFO := fifo(filepath.Join(baseCopy, "index.json"))
	secretOSC := filepath.Join(dir, "secret-osc.yaml")
	if err := os.WriteFile(secretOSC, []byte(synth.OSCFiles("  - path: /etc/token\n    content:\n      secretRef: {name: s, dataKey: token}\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		path string
		code int // 2: bad input (the input files, the key); 1: a failure (the registry's authfile, the base)
	}{
		{"--osc FIFO", []string{"render", "--osc", oscFIFO, "--output-dir", out}, oscFIFO, 2},
		{"--machineconfig DIR with a FIFO", []string{"render", "--machineconfig", mcDir, "--output-dir", out}, mcFIFO, 2},
		{"--machineconfig FIFO", []string{"render", "--machineconfig", mcFIFO, "--output-dir", out}, mcFIFO, 2},
		{"--secrets DIR with a FIFO", []string{"render", "--osc", secretOSC, "--secrets", secDir, "--bake-secrets", "--output-dir", out}, secFIFO, 2},
		{"--secrets FIFO", []string{"render", "--osc", secretOSC, "--secrets", authFIFO, "--bake-secrets", "--output-dir", out}, authFIFO, 2},
		{"--authfile FIFO", []string{"render", "--osc", exampleOSC(t), "--authfile", authFIFO, "--output-dir", out}, authFIFO, 1},
		{"build --sign-key FIFO", []string{"build", "--base", "oci:examples/base", "--pool", "worker", "--osc", exampleOSC(t),
			"--sign-key", keyFIFO, "--sign-identity", "127.0.0.1:5000/pools/worker", "--push", "oci:" + filepath.Join(dir, "layout")}, keyFIFO, 2},
		{"build --base oci:DIR with a FIFO index.json", []string{"build", "--base", "oci:" + baseCopy, "--pool", "worker", "--osc", exampleOSC(t),
			"--push", "oci:" + filepath.Join(dir, "layout")}, baseFIFO, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			bin := oslayer(t) // built before the clock starts
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, tc.args...)
			cmd.Dir = repoRoot(t)
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			began := time.Now()
			err := cmd.Run()
			took := time.Since(began)
			if ctx.Err() != nil {
				t.Fatalf("still running after 20s (killed): %s", stderr.String())
			}
			t.Logf("%s: %v in %.3fs: %s", tc.name, err, took.Seconds(), strings.TrimSpace(stderr.String()))
			want := tc.code
			if cmd.ProcessState.ExitCode() != want || !strings.Contains(stderr.String(), tc.path) || !strings.Contains(stderr.String(), "named pipe") {
				t.Errorf("exit %d, stderr %q: want exit %d and an error naming %s as a named pipe", cmd.ProcessState.ExitCode(), stderr.String(), want, tc.path)
			}
			for _, p := range []string{out, filepath.Join(dir, "layout")} {
				if _, err := os.Stat(p); !os.IsNotExist(err) {
					t.Errorf("%s written: %v", p, err)
				}
			}
		})
	}
}

// manyFilesOSC writes an OSC with n small inline files: rendering it takes
// long enough to be killed while the output is written.
func manyFilesOSC(t *testing.T, dir string, n int) string {
	t.Helper()
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "  - path: /etc/many/d%d/f%d.conf\n    content:\n      inline:\n        data: %q\n", i%50, i, strings.Repeat(fmt.Sprint(i), 200))
	}
	p := filepath.Join(dir, "many-osc.yaml")
	if err := os.WriteFile(p, []byte(synth.OSCFiles(b.String())), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestKilledRenderIsSwept kills (SIGKILL) a render while it writes its
// output, then renders again: the killed run's temporary directory beside
// the output is gone, and the output is complete.
func TestKilledRenderIsSwept(t *testing.T) {
	dir := t.TempDir()
	osc := manyFilesOSC(t, dir, 4000)
	parent := filepath.Join(dir, "renders")
	if err := os.Mkdir(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(parent, "out")
	var killed bool
	for attempt := 0; attempt < 5 && !killed; attempt++ {
		var stdout, stderr bytes.Buffer
		cmd := start(t, &stdout, &stderr, "render", "--osc", osc, "--output-dir", out)
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
	poll:
		for {
			select {
			case <-exited:
				break poll
			default:
			}
			if ents, _ := os.ReadDir(parent); len(ents) > 0 && strings.HasPrefix(ents[0].Name(), ".out") {
				_ = cmd.Process.Signal(syscall.SIGKILL)
				<-exited
				killed = true
				break poll
			}
			time.Sleep(200 * time.Microsecond)
		}
	}
	if !killed {
		t.Fatal("no render was caught writing its output")
	}
	ents, _ := os.ReadDir(parent)
	var left []string
	for _, e := range ents {
		left = append(left, e.Name())
	}
	t.Logf("after kill -9: %v", left)
	if _, stderr, code := cli(t, "render", "--osc", osc, "--output-dir", out); code != 0 {
		t.Fatalf("render after the kill: exit %d\n%s", code, stderr)
	}
	ents, _ = os.ReadDir(parent)
	if len(ents) != 1 || ents[0].Name() != "out" {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("beside the output after the next render: %v, want only out", names)
	}
	if _, err := os.Stat(filepath.Join(out, "rootfs/etc/many/d49/f3999.conf")); err != nil {
		t.Error(err)
	}
}
