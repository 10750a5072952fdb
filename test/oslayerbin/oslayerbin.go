// Package oslayerbin gives tests the oslayer command, built once per test
// run rather than by every test package.
//
// A test calls Path (or Static, for the build the project's image ships) and
// gets, in this order:
//
//   - the binary named by $OSLAYER_BIN ($OSLAYER_BIN_STATIC): test/run.sh
//     and test/unit.sh build both once and export them, so `go test ./...`
//     links the command once however many packages run it;
//   - otherwise a binary from a cache keyed by the content of the tree it is
//     built from (the Go, C and assembly sources of the module outside
//     test/, except *_test.go, and go.mod and go.sum), the build's flags and environment and
//     the Go toolchain: `go test ./pkg -run X` alone builds it once, and
//     again only after a change of the command's sources. The cache is
//     $XDG_CACHE_HOME/oslayer-test-bin (~/.cache/...) or, when
//     $OSLAYER_BIN_CACHE is set, that directory; a file lock makes test
//     packages running in parallel wait for one build instead of each
//     doing their own, and binaries not used for a day are removed.
package oslayerbin

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Env names a prebuilt oslayer binary: the default build, with the package
// stage's buildah executor (Tags).
const Env = "OSLAYER_BIN"

// StaticEnv names a prebuilt static oslayer binary, built as the project's
// Containerfile builds it (see Static).
const StaticEnv = "OSLAYER_BIN_STATIC"

// CacheEnv names the directory of the content-keyed cache.
const CacheEnv = "OSLAYER_BIN_CACHE"

// Tags are the build tags that link in the package stage's buildah
// executor: packagestage/bud.Tags (a test checks that they agree; this
// package does not import bud, so that tests using it do not link buildah).
const Tags = "containers_image_openpgp,exclude_graphdriver_btrfs,exclude_graphdriver_devicemapper"

// A variant is one way to build the command.
type variant struct {
	name string   // file name prefix in the cache
	env  string   // environment variable of a prebuilt binary
	args []string // go build flags before -o
	vars []string // environment of go build

	once sync.Once
	path string
	err  error
}

var (
	plain = &variant{name: "oslayer", env: Env, args: []string{"-tags", Tags}}
	// static is the Containerfile's build: cgo linked statically (buildah's
	// chroot isolation needs cgo), netgo and osusergo, stripped, trimmed.
	static = &variant{name: "oslayer-static", env: StaticEnv,
		args: []string{"-trimpath", "-tags", Tags + ",netgo,osusergo",
			"-ldflags", "-s -w -linkmode external -extldflags -static"},
		vars: []string{"CGO_ENABLED=1"}}
)

// Path returns the oslayer command as `go build -tags Tags ./cmd/oslayer`
// builds it: $OSLAYER_BIN when set, else a build from the cache. A failed
// build fails the test.
func Path(t testing.TB) string {
	t.Helper()
	return plain.get(t)
}

// Static returns the oslayer command built as the project's image has it
// (Containerfile: static with cgo, netgo and osusergo, with the package
// stage's executor), for tests that run it in a pod image:
// $OSLAYER_BIN_STATIC when set, else a build from the cache.
func Static(t testing.TB) string {
	t.Helper()
	return static.get(t)
}

func (v *variant) get(t testing.TB) string {
	t.Helper()
	v.once.Do(func() { v.path, v.err = v.resolve() })
	if v.err != nil {
		t.Fatalf("oslayer binary: %v", v.err)
	}
	return v.path
}

func (v *variant) resolve() (string, error) {
	if p := os.Getenv(v.env); p != "" {
		abs, err := filepath.Abs(p)
		if err != nil {
			return "", err
		}
		if fi, err := os.Stat(abs); err != nil || fi.IsDir() {
			return "", fmt.Errorf("$%s=%s is not a binary: %v", v.env, p, err)
		}
		return abs, nil
	}
	root, err := repoRoot()
	if err != nil {
		return "", fmt.Errorf("repository root: %w", err)
	}
	dir := os.Getenv(CacheEnv)
	if dir == "" {
		c, err := os.UserCacheDir()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(c, "oslayer-test-bin")
	}
	return v.cached(root, dir)
}

// BuildArgs returns the arguments of `go build` (without -o and the
// package) and the environment it adds for the static variant when static,
// else for the default one: what test/run.sh and test/unit.sh build.
func BuildArgs(staticBuild bool) (args, env []string) {
	v := plain
	if staticBuild {
		v = static
	}
	return append([]string(nil), v.args...), append([]string(nil), v.vars...)
}

// cached returns the binary of the tree at root from the cache in dir,
// building it under a lock when it is not there yet.
func (v *variant) cached(root, dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	key, err := v.key(root)
	if err != nil {
		return "", fmt.Errorf("hash the tree: %w", err)
	}
	bin := filepath.Join(dir, v.name+"-"+key)
	lock, err := os.OpenFile(bin+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("lock %s: %w", lock.Name(), err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	now := time.Now()
	if fi, err := os.Stat(bin); err == nil && fi.Mode().IsRegular() {
		// Used now: pruning goes by the time of last use.
		_ = os.Chtimes(bin, now, now)
		return bin, nil
	}
	tmp := fmt.Sprintf("%s.%d.tmp", bin, os.Getpid())
	defer os.Remove(tmp)
	cmd := exec.Command("go", append(append([]string{"build"}, v.args...), "-o", tmp, "./cmd/oslayer")...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), v.vars...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s ./cmd/oslayer: %v\n%s", strings.Join(v.args, " "), err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", err
	}
	prune(dir, bin, now)
	return bin, nil
}

// maxAge is how long a cached binary stays without being used.
const maxAge = 24 * time.Hour

// prune removes the cached binaries (and their locks) not used for maxAge,
// except keep.
func prune(dir, keep string, now time.Time) {
	es, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range es {
		p := filepath.Join(dir, e.Name())
		if p == keep || p == keep+".lock" || !strings.HasPrefix(e.Name(), "oslayer") {
			continue
		}
		if fi, err := e.Info(); err == nil && now.Sub(fi.ModTime()) > maxAge {
			os.Remove(p)
		}
	}
}

// envKeys are the environment variables that change what go build makes.
var envKeys = []string{"GOFLAGS", "GOEXPERIMENT", "GOOS", "GOARCH", "GOAMD64", "GOARM64",
	"CGO_ENABLED", "CC", "CGO_CFLAGS", "CGO_LDFLAGS", "GOTOOLCHAIN"}

// key hashes what the build depends on: the Go toolchain (the go command
// on PATH, by path, size and time), the variant's flags, the environment
// (envKeys), and the build inputs of the module at root outside test/,
// hidden folders and modules of their own, except *_test.go (by path,
// mode and content).
func (v *variant) key(root string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s %s %s\n%q\n%q\n", runtime.Version(), runtime.GOOS, runtime.GOARCH, v.args, v.vars)
	if gobin, err := exec.LookPath("go"); err == nil {
		if fi, err := os.Stat(gobin); err == nil {
			fmt.Fprintf(h, "go %s %d %d\n", gobin, fi.Size(), fi.ModTime().UnixNano())
		}
	}
	for _, k := range envKeys {
		v, ok := os.LookupEnv(k)
		fmt.Fprintf(h, "%s=%t:%q\n", k, ok, v)
	}
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == ".git" || rel == "test" || (rel != "." && (strings.HasPrefix(d.Name(), ".") || ownModule(p))) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(rel, "_test.go") || !d.Type().IsRegular() || !buildInput(d.Name()) {
			return nil
		}
		files = append(files, rel)
		return nil
	})
	if err != nil {
		return "", err
	}
	sort.Strings(files)
	for _, rel := range files {
		f, err := os.Open(filepath.Join(root, rel))
		if err != nil {
			return "", err
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return "", err
		}
		fmt.Fprintf(h, "%s %o %d\n", rel, fi.Mode().Perm(), fi.Size())
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:24], nil
}

// ownModule reports whether the folder dir holds a Go module of its own
// (the Gardener OS extension): none of it goes into the command.
func ownModule(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "go.mod"))
	return err == nil
}

// buildInput reports whether a file named name can change what go build
// makes: Go, C and assembly sources, .syso objects, go.mod and go.sum,
// and the shell scripts packages embed (a test checks every embedded file
// is one of these).
func buildInput(name string) bool {
	switch filepath.Ext(name) {
	case ".go", ".c", ".h", ".s", ".S", ".syso", ".sh":
		return true
	}
	return name == "go.mod" || name == "go.sum"
}

// repoRoot walks up from the working directory to the module holding
// cmd/oslayer.
func repoRoot() (string, error) {
	d, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "cmd", "oslayer")); err == nil {
			if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
				return d, nil
			}
		}
		p := filepath.Dir(d)
		if p == d {
			return "", errors.New("no go.mod with cmd/oslayer above the working directory")
		}
		d = p
	}
}
