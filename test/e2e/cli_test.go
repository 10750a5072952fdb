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

	"github.com/oslayer/oslayer/assemble"
	"github.com/oslayer/oslayer/assemble/baseindex"
	"github.com/oslayer/oslayer/test/oslayerbin"
	"github.com/oslayer/oslayer/test/regtest"
)

// binary is the oslayer command (test/oslayerbin: built once per test
// run) as a link in a directory of its own per test binary, which also
// holds its base index cache.
type binary struct {
	once sync.Once
	path string
	dir  string
	err  error
}

var (
	// plain and withBud are the same build (with the package stage's
	// executor, bud.Tags), each with a cache of its own.
	plain   = &binary{}
	withBud = &binary{}
)

func (b *binary) get(t *testing.T) string {
	t.Helper()
	bin := oslayerbin.Path(t)
	b.once.Do(func() {
		b.dir, b.err = os.MkdirTemp("", "oslayer-e2e-")
		if b.err != nil {
			return
		}
		b.path = filepath.Join(b.dir, "oslayer")
		b.err = os.Symlink(bin, b.path)
	})
	if b.err != nil {
		t.Fatalf("oslayer binary: %v", b.err)
	}
	return b.path
}

// oslayer returns the command.
func oslayer(t *testing.T) string { return plain.get(t) }

// oslayerBud returns the command for the package stage's tests, with a
// base index cache of its own.
func oslayerBud(t *testing.T) string { return withBud.get(t) }

func TestMain(m *testing.M) {
	code := m.Run()
	for _, b := range []*binary{plain, withBud} {
		if b.dir != "" {
			os.RemoveAll(b.dir)
		}
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
	return cliBin(t, oslayer(t), args...)
}

// cliBin is cli with the binary bin.
func cliBin(t *testing.T, bin string, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.CommandContext(ctxT(t), bin, args...)
	cmd.Dir = repoRoot(t)
	cmd.Stdout, cmd.Stderr = &out, &errb
	// Base indexes go to the test binary's directory, not the user's cache.
	cmd.Env = append(os.Environ(), baseindex.CacheEnv+"="+filepath.Join(filepath.Dir(bin), "baseindex"))
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
	// The command is the one the README (and docs/cli.md) gives.
	for _, doc := range []string{"README.md", filepath.Join("docs", "cli.md")} {
		b, err := os.ReadFile(filepath.Join(repoRoot(t), doc))
		if err != nil {
			t.Fatal(err)
		}
		text := strings.Join(strings.Fields(strings.ReplaceAll(string(b), "\\\n", " ")), " ")
		if want := "go run ./cmd/oslayer build --base oci:examples/base --pool worker --osc examples/gardener/worker-osc.yaml --push oci:out/worker:latest"; !strings.Contains(text, want) {
			t.Errorf("%s does not give the main command %q", doc, want)
		}
	}
	regtest.Require(t, "skopeo")
	t.Setenv("SOURCE_DATE_EPOCH", "") // empty means unset
	out := filepath.Join(t.TempDir(), "out", "worker")
	args := []string{"build", "--base", "oci:examples/base", "--pool", "worker",
		"--osc", "examples/gardener/worker-osc.yaml", "--push", "oci:" + out + ":latest"}
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
	var res assemble.Result
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

	// SOURCE_DATE_EPOCH moves every time stamp, hence the digest.
	t.Setenv("SOURCE_DATE_EPOCH", "86400")
	stdout, stderr, code = cli(t, args...)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	if epochRef := lastLine(stdout); epochRef == ref {
		t.Errorf("SOURCE_DATE_EPOCH=86400 gave the same image %s", ref)
	}
	if c := run(t, "skopeo", "inspect", "--config", "oci:"+out+":latest"); !strings.Contains(c, `"created": "1970-01-02T00:00:00Z"`) {
		t.Errorf("config created is not SOURCE_DATE_EPOCH:\n%.300s", c)
	}
}

// -o json reports a failed build too: the step and what was done (here:
// built, not written).
func TestCLIJSONFailure(t *testing.T) {
	out := "oci:" + filepath.Join(t.TempDir(), "out")
	stdout, stderr, code := cli(t, "build", "--base", "oci:examples/base", "--pool", "worker",
		"--osc", "examples/gardener/worker-osc.yaml", "--push", out, "--max-added-bytes", "10", "-o", "json")
	if code == 0 {
		t.Fatalf("a 10-byte budget passed:\n%s\n%s", stdout, stderr)
	}
	var res assemble.Result
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("-o json on failure: %v\n%s", err, stdout)
	}
	// The size check runs before the write: the image was built (its
	// digest is known) but not written.
	if res.Tagged || !strings.HasPrefix(res.Error, "preflight: ") || res.Image != "" || res.Digest.Hex == "" {
		t.Errorf("result tagged=%v error=%q image=%q digest=%s", res.Tagged, res.Error, res.Image, res.Digest)
	}
}

// A registry base is read once (its index is cached and pushed next to the
// image); the second build on it reads no base blob.
func TestCLIRegistry(t *testing.T) {
	e := newEnv(t)
	bm, _ := synthBase(t).Manifest()
	for i, wantGets := range []int{len(bm.Layers), 0} {
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
		if !strings.Contains(stderr, "not pinned") || !strings.Contains(stderr, "  index  sha256:") {
			t.Errorf("no warning about the unpinned base, or no index line:\n%s", stderr)
		}
		up, down := e.proxy.Bytes()
		t.Logf("CLI build %d with preflight: wall %v, peak RSS %d KiB, %d base layer GETs, %d mounts, %d uploads, %d B up, %d B down",
			i+1, lastWall.Round(time.Millisecond), lastRSSKiB, baseLayerGets(t, e.proxy), e.proxy.Mounts(), e.proxy.Uploads(), up, down)
		if n := baseLayerGets(t, e.proxy); n != wantGets {
			t.Errorf("build %d: %d base layers downloaded, want %d:\n%s", i+1, n, wantGets, e.proxy.Dump())
		}
	}
	// --base-index=off reads nothing and says what it assumed.
	e.proxy.Reset()
	stdout, stderr, code := cli(t, "build", "--base", e.base, "--pool", "worker", "--base-index", "off",
		"--osc", "examples/gardener/worker-osc.yaml", "--push", e.proxy.Host+"/pools/worker-off:v1")
	if code != 0 || !strings.Contains(stderr, "base index off") || strings.Contains(stderr, "  index  sha256:") {
		t.Errorf("--base-index=off: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if n := baseLayerGets(t, e.proxy); n != 0 {
		t.Errorf("--base-index=off: %d base layers downloaded", n)
	}
}

func TestCLIErrors(t *testing.T) {
	out := "oci:" + filepath.Join(t.TempDir(), "out")
	osc := "examples/gardener/worker-osc.yaml"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"build", "--base", "oci:examples/base", "--osc", osc, "--push", out}, "--pool"},
		{[]string{"build", "--base", "oci:examples/base", "--pool", "worker", "--osc", osc}, "--push"},
		{[]string{"build", "--base", "oci:examples/base", "--pool", "worker", "--osc", osc, "--output", out, "--push", "127.0.0.1:1/x"}, "want text or json"},
		{[]string{"build", "--base", "oci:examples/base", "--pool", "worker", "--osc", osc, "--output", "out/x"}, "want text or json"},
		{[]string{"build", "--base", "oci:examples/base", "--pool", "worker", "--osc", osc, "-o", "yaml", "--push", out}, "want text or json"},
		{[]string{"build", "--pool", "worker", "--osc", osc, "--push", out}, "no base image"},
		{[]string{"build", "--base", "oci:examples/nothing", "--pool", "worker", "--osc", osc, "--push", out}, "oci:examples/nothing"},
		{[]string{"build", "--base", "oci:examples/base", "--pool", "worker", "--osc", "examples/missing.yaml", "--push", out}, "examples/missing.yaml"},
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
