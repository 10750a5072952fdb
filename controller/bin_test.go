package controller_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/oslayer/oslayer/packagestage/bud"
)

// The oslayer binaries the tests run as processes (the controller, the
// build pod played, oslayer verify), each built at most once per test
// binary into binDir, which TestMain removes.
//
//   - oslayerCmd is cmd/oslayer built as go test builds the package: the
//     same flags and tags, so the build cache the test binary's own
//     compile filled serves nearly every package and only the link is new
//     (seconds, also on a loaded machine). Every test runs it but one.
//   - imageBin is the command as the project's image has it
//     (Containerfile: static with cgo, -trimpath, netgo and osusergo).
//     Those flags change every package's build key, so on a cold build
//     cache it compiles the whole dependency graph again: minutes on an
//     idle machine, tens of minutes under load. Only the package stage
//     needs it (buildah's RUN steps in the played pod):
//     TestBuildJobPackageStage.
var (
	binDir     string
	binDirOnce sync.Once
	cmdBuild   goBuild
	imageBuild goBuild
)

// goBuild is one go build of cmd/oslayer.
type goBuild struct {
	once sync.Once
	path string
	err  error
}

// The go builds' bounds: a build still running then fails its test,
// saying how long it ran, instead of holding the package until go test's
// own timeout.
const (
	cmdBuildTimeout   = 10 * time.Minute
	imageBuildTimeout = 30 * time.Minute
)

func oslayerCmd(t *testing.T) string {
	t.Helper()
	return cmdBuild.get(t, "oslayer", cmdBuildTimeout, nil, "build", "-o")
}

func imageBin(t *testing.T) string {
	t.Helper()
	return imageBuild.get(t, "oslayer-static", imageBuildTimeout, []string{"CGO_ENABLED=1"}, "build", "-trimpath",
		"-tags", bud.Tags+",netgo,osusergo", "-ldflags", "-s -w -linkmode external -extldflags -static", "-o")
}

// get builds ../cmd/oslayer into binDir/name once (go ARGS binDir/name
// ../cmd/oslayer) and returns its path.
func (b *goBuild) get(t *testing.T, name string, timeout time.Duration, env []string, args ...string) string {
	t.Helper()
	b.once.Do(func() {
		binDirOnce.Do(func() { binDir, b.err = os.MkdirTemp("", "oslayer-controller-test-") })
		if binDir == "" {
			b.err = fmt.Errorf("no directory for the binaries: %v", b.err)
			return
		}
		path := filepath.Join(binDir, name)
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", append(args, path, "../cmd/oslayer")...)
		cmd.Env = append(os.Environ(), env...)
		start := time.Now()
		out, err := cmd.CombinedOutput()
		switch {
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			b.err = fmt.Errorf("go %v: not done after %s\n%s", cmd.Args[1:], timeout, out)
		case err != nil:
			b.err = fmt.Errorf("go %v: %v\n%s", cmd.Args[1:], err, out)
		default:
			b.path = path
			fmt.Fprintf(os.Stderr, "built %s in %.1f s\n", name, time.Since(start).Seconds())
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}
