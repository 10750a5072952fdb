package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/oslayer/oslayer/builder"
	"github.com/oslayer/oslayer/test/regtest"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
	binDir  string
)

// oslayer builds the command once per test binary.
func oslayer(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "oslayer-e2e-")
		if binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "oslayer")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/oslayer")
		cmd.Dir = repoRoot(t)
		out, err := cmd.CombinedOutput()
		if err != nil {
			binErr = err
			binPath = string(out)
		}
	})
	if binErr != nil {
		t.Fatalf("go build ./cmd/oslayer: %v\n%s", binErr, binPath)
	}
	return binPath
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// Wall time and peak RSS of the last cli run, for the logs.
var (
	lastWall   time.Duration
	lastRSSKiB int64
)

// cli runs oslayer in the repository root and returns stdout, stderr and
// the exit code.
func cli(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.CommandContext(ctxT(t), oslayer(t), args...)
	cmd.Dir = repoRoot(t)
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Env = append(os.Environ(), "SOURCE_DATE_EPOCH=")
	start := time.Now()
	err := cmd.Run()
	lastWall = time.Since(start)
	if cmd.ProcessState != nil {
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			lastRSSKiB = ru.Maxrss
		}
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// The README's main command (into a temporary layout), then the same with
// -o json and --digest-file.
func TestCLIExample(t *testing.T) {
	regtest.Require(t, "skopeo")
	out := filepath.Join(t.TempDir(), "out", "worker")
	args := []string{"build", "--base", "oci:examples/base", "--pool", "worker",
		"--osc", "examples/gardener/worker-osc.yaml", "--output", "oci:" + out + ":latest"}
	stdout, stderr, code := cli(t, args...)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	ref := lastLine(stdout)
	if !strings.HasPrefix(ref, "oci:"+out+"@sha256:") || len(ref) != len("oci:"+out+"@sha256:")+64 {
		t.Fatalf("last stdout line %q, want oci:%s@sha256:...", ref, out)
	}
	if !strings.Contains(stderr, "pool worker: "+ref) {
		t.Errorf("stderr does not tell what was produced:\n%s", stderr)
	}
	if si := inspect(t, "oci:"+out+":latest"); "oci:"+out+"@"+si.Digest != ref {
		t.Errorf("oci:%s:latest is %s, build printed %s", out, si.Digest, ref)
	}

	df := filepath.Join(t.TempDir(), "digest")
	stdout, stderr, code = cli(t, append(args, "-o", "json", "--digest-file", df)...)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	var res builder.Result
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("-o json: %v\n%s", err, stdout)
	}
	if res.Image != ref || res.Pool != "worker" || !res.Tagged || len(res.Layers) == 0 || res.Base.Ref != "oci:examples/base" {
		t.Errorf("json result %+v", res)
	}
	if res.BytesUploaded != 0 {
		t.Errorf("second build into the same layout wrote %d bytes", res.BytesUploaded)
	}
	if b, _ := os.ReadFile(df); strings.TrimSpace(string(b)) != ref {
		t.Errorf("--digest-file holds %q, want %q", b, ref)
	}
	if res.Stages["preflight"] == nil {
		t.Errorf("no preflight in the result: %v", res.Stages)
	}
}

func TestCLIRegistry(t *testing.T) {
	e := newEnv(t)
	e.proxy.Reset()
	stdout, stderr, code := cli(t, "build", "--base", e.base, "--pool", "worker",
		"--osc", "examples/gardener/worker-osc.yaml", "--push", e.proxy.Host+"/pools/worker:v1")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	ref := lastLine(stdout)
	if !strings.HasPrefix(ref, e.proxy.Host+"/pools/worker@sha256:") {
		t.Errorf("last stdout line %q", ref)
	}
	if !strings.Contains(stderr, "not pinned") {
		t.Errorf("no warning about the unpinned base:\n%s", stderr)
	}
	up, down := e.proxy.Bytes()
	t.Logf("CLI build with preflight: wall %v, peak RSS %d KiB, %d base blob GETs, %d mounts, %d uploads, %d B up, %d B down",
		lastWall.Round(time.Millisecond), lastRSSKiB, baseBlobGets(t, e.proxy), e.proxy.Mounts(), e.proxy.Uploads(), up, down)
	if n := baseBlobGets(t, e.proxy); n != 0 {
		t.Errorf("%d base blobs downloaded:\n%s", n, e.proxy.Dump())
	}
}

func TestCLIErrors(t *testing.T) {
	out := "oci:" + filepath.Join(t.TempDir(), "out")
	osc := "examples/gardener/worker-osc.yaml"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"build", "--base", "oci:examples/base", "--osc", osc, "--output", out}, "--pool"},
		{[]string{"build", "--base", "oci:examples/base", "--pool", "w", "--osc", osc}, "--push"},
		{[]string{"build", "--base", "oci:examples/base", "--pool", "w", "--osc", osc, "--output", out, "--push", "127.0.0.1:1/x"}, "not both"},
		{[]string{"build", "--base", "oci:examples/base", "--pool", "w", "--osc", osc, "--output", "/tmp/x"}, "oci:DIR"},
		{[]string{"build", "--pool", "w", "--osc", osc, "--output", out}, "no base image"},
		{[]string{"build", "--base", "oci:examples/nothing", "--pool", "w", "--osc", osc, "--output", out}, "oci:examples/nothing"},
		{[]string{"build", "--base", "oci:examples/base", "--pool", "w", "--osc", "examples/missing.yaml", "--output", out}, "examples/missing.yaml"},
	} {
		stdout, stderr, code := cli(t, tc.args...)
		if code == 0 || !strings.Contains(stderr, tc.want) || stdout != "" {
			t.Errorf("%v: exit %d, stderr %q, stdout %q; want an error naming %q", tc.args, code, stderr, stdout, tc.want)
		}
	}
	if _, err := os.Stat(strings.TrimPrefix(out, "oci:")); !os.IsNotExist(err) {
		t.Errorf("failed builds created %s: %v", out, err)
	}
}
