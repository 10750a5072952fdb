// Package regtest starts real OCI registries for tests: the CNCF
// distribution registry ("docker-registry" from Debian) on a random loopback
// port, optionally behind htpasswd auth, and a counting proxy in front of it
// that records every request so tests can prove what was (not) transferred.
//
// Tests that need an external tool call Require, which skips the test when
// the tool is missing, unless OSLAYER_REQUIRE_TOOLS=1 (as in CI), where a
// missing tool fails the test.
package regtest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// Require returns the path of tool, skipping (or, with
// OSLAYER_REQUIRE_TOOLS=1, failing) the test when it is not installed.
// Tests that check what oslayer wrote with the real verifiers (the
// cosign and skopeo CLIs) are interoperability checks: in -short runs
// (test/unit.sh) they skip; test/run.sh runs them.
func Require(t testing.TB, tool string) string {
	t.Helper()
	if testing.Short() && verifiers[tool] {
		t.Skipf("runs %s (a real verifier): not in -short runs", tool)
	}
	p, err := exec.LookPath(tool)
	if err != nil {
		if os.Getenv("OSLAYER_REQUIRE_TOOLS") == "1" {
			t.Fatalf("%s is required (OSLAYER_REQUIRE_TOOLS=1) but not installed: %v", tool, err)
		}
		t.Skipf("%s not installed", tool)
	}
	return p
}

// verifiers are the tools whose tests skip in -short runs.
var verifiers = map[string]bool{"cosign": true, "skopeo": true}

// RequireRoot skips (or, with OSLAYER_REQUIRE_TOOLS=1, fails) the test
// unless it runs as root; why says what needs root. The tests that need
// root run real system tools on whole trees (buildah, ostree,
// ignition-apply): in -short runs (test/unit.sh) they skip.
func RequireRoot(t testing.TB, why string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("needs root (%s): not in -short runs", why)
	}
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("OSLAYER_REQUIRE_TOOLS") == "1" {
		t.Fatalf("root is required (OSLAYER_REQUIRE_TOOLS=1): %s", why)
	}
	t.Skipf("not root: %s", why)
}

// Run runs name with args and env added to the environment, for at most
// two minutes, and returns its combined output. A failure fails the test
// with the output.
func Run(t testing.TB, env []string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Registry is a running docker-registry.
type Registry struct {
	// Host is "127.0.0.1:PORT" of the registry itself.
	Host string
	// LogFile receives the registry's log (it records cross-repo mounts).
	LogFile string
	bin     string
	cfgPath string
	logf    *os.File
	mu      sync.Mutex
	cmd     *exec.Cmd
}

// Config tunes a registry.
type Config struct {
	// User and Password enable htpasswd auth when User is set.
	User, Password string
	// Filesystem keeps blobs on disk in a temp dir instead of in memory.
	Filesystem bool
	// StorageDir, with Filesystem, is the directory the temp dir is made
	// in ("" means the test's own temp dir).
	StorageDir string
	// Binary is the registry program to run ("" means Debian's
	// docker-registry, 2.8; the benchmarks can run distribution v3's
	// "registry", which test/setup.sh builds). Both take "serve CONFIG".
	Binary string
	// Quiet logs only warnings and errors, without the access log, and
	// caches blob descriptors in memory, as Debian's packaged config.yml
	// does (the registry then spends its time on requests: for
	// benchmarks). Tests that read the Log need the default.
	Quiet bool
	// NoDelete refuses DELETE requests (distribution's default:
	// storage.delete.enabled false), as most registries run.
	NoDelete bool
}

// Start starts docker-registry on a random 127.0.0.1 port and stops it when
// the test ends.
func Start(t testing.TB, c Config) *Registry {
	t.Helper()
	tool := "docker-registry"
	if c.Binary != "" {
		tool = c.Binary
	}
	bin := Require(t, tool)
	dir := t.TempDir()
	port := freePort(t)
	storage := "  inmemory: {}\n"
	if c.Filesystem {
		data := filepath.Join(dir, "data")
		if c.StorageDir != "" {
			d, err := os.MkdirTemp(c.StorageDir, "registry-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(d) })
			data = d
		}
		storage = fmt.Sprintf("  filesystem:\n    rootdirectory: %s\n", data)
	}
	auth := ""
	if c.User != "" {
		h, err := bcrypt.GenerateFromPassword([]byte(c.Password), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		hp := filepath.Join(dir, "htpasswd")
		if err := os.WriteFile(hp, []byte(c.User+":"+string(h)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		auth = fmt.Sprintf("auth:\n  htpasswd:\n    realm: oslayer-test\n    path: %s\n", hp)
	}
	level, accessOff := "info", false
	if c.Quiet {
		level, accessOff = "warn", true
		storage += "  cache:\n    blobdescriptor: inmemory\n"
	}
	cfg := fmt.Sprintf(`version: 0.1
log:
  level: %s
  accesslog:
    disabled: %t
storage:
%s  delete:
    enabled: %t
http:
  addr: 127.0.0.1:%d
%s`, level, accessOff, storage, !c.NoDelete, port, auth)
	cfgPath := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "registry.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	r := &Registry{Host: fmt.Sprintf("127.0.0.1:%d", port), LogFile: logPath, bin: bin, cfgPath: cfgPath, logf: logf}
	t.Cleanup(func() {
		r.Stop()
		logf.Close()
	})
	r.launch(t)
	return r
}

// launch starts the registry process and waits until it answers.
func (r *Registry) launch(t testing.TB) {
	t.Helper()
	cmd := exec.Command(r.bin, "serve", r.cfgPath)
	cmd.Stdout, cmd.Stderr = r.logf, r.logf
	// Keep the registry from reading proxy settings or the host's config.
	// Distribution v3 exports traces over OTLP unless told not to.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + filepath.Dir(r.cfgPath),
		"OTEL_TRACES_EXPORTER=none", "OTEL_METRICS_EXPORTER=none", "OTEL_LOGS_EXPORTER=none"}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start docker-registry: %v", err)
	}
	r.mu.Lock()
	r.cmd = cmd
	r.mu.Unlock()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get("http://" + r.Host + "/v2/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 || resp.StatusCode == 401 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("docker-registry did not come up on %s: %v\n%s", r.Host, err, r.Log())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop kills the registry process: its port refuses connections until
// Restart. Only a Filesystem registry keeps its content across a restart.
func (r *Registry) Stop() {
	r.mu.Lock()
	cmd := r.cmd
	r.cmd = nil
	r.mu.Unlock()
	if cmd != nil {
		_ = cmd.Process.Kill()
		_, _ = cmd.Process.Wait()
	}
}

// Restart starts a stopped registry again on the same port and storage.
func (r *Registry) Restart(t testing.TB) {
	t.Helper()
	r.Stop()
	r.launch(t)
}

// Version returns what the registry program says of its version.
func (r *Registry) Version() string {
	out, err := exec.Command(r.bin, "--version").Output()
	if err != nil {
		return filepath.Base(r.bin)
	}
	return strings.TrimSpace(string(out))
}

// CPU returns the user+system CPU time the running registry process has
// used so far (zero when it is stopped or /proc cannot be read).
func (r *Registry) CPU() time.Duration {
	r.mu.Lock()
	cmd := r.cmd
	r.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return 0
	}
	return ProcessCPU(cmd.Process.Pid)
}

// ProcessCPU returns the user+system CPU time of process pid from
// /proc/PID/stat (zero when it cannot be read).
func ProcessCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command name (which may hold spaces) in ")".
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0
	}
	var ut, st int64
	if _, err := fmt.Sscan(f[11], &ut); err != nil {
		return 0
	}
	if _, err := fmt.Sscan(f[12], &st); err != nil {
		return 0
	}
	// USER_HZ is 100 on Linux.
	return time.Duration(ut+st) * (time.Second / 100)
}

// Log returns what the registry logged so far.
func (r *Registry) Log() string {
	b, _ := os.ReadFile(r.LogFile)
	return string(b)
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Request is one request seen by a Proxy.
type Request struct {
	Method string
	Path   string
	Query  string
	Status int
}

// Proxy is a counting reverse proxy on 127.0.0.1 in front of a registry.
type Proxy struct {
	// Host is "127.0.0.1:PORT" of the proxy: point clients here.
	Host string
	mu   sync.Mutex
	reqs []Request
	// Fail, when set, is consulted for every request; a non-zero status is
	// returned instead of forwarding (to inject 5xx, 429, refusals).
	Fail func(r *http.Request) int
	// bytes sent by clients (request bodies) and to clients (response bodies).
	up, down int64
}

// NewProxy starts a counting proxy to upstream ("127.0.0.1:PORT").
func NewProxy(t testing.TB, upstream string) *Proxy {
	t.Helper()
	u, _ := url.Parse("http://" + upstream)
	rp := httputil.NewSingleHostReverseProxy(u)
	// Keep a connection to the registry per client request under way (the
	// default keeps 2, so concurrent clients would open new ones all the
	// time and the proxy would measure itself).
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 256, 256
	rp.Transport = tr
	// Reuse copy buffers rather than allocate 32 KiB per request: the
	// proxy shares the cores with what it measures.
	rp.BufferPool = copyBuffers{}
	p := &Proxy{}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		fail := p.Fail
		p.mu.Unlock()
		if fail != nil {
			if code := fail(r); code != 0 {
				p.record(r, code)
				http.Error(w, "injected failure", code)
				return
			}
		}
		sw := &statusWriter{ResponseWriter: w, status: 200}
		body := &countingReader{r: r.Body}
		if r.Body != nil {
			r.Body = body
		}
		rp.ServeHTTP(sw, r)
		p.record(r, sw.status)
		p.mu.Lock()
		p.up += body.n
		p.down += sw.n
		p.mu.Unlock()
	})
	p.Host = serveLoopback(t, handler)
	return p
}

// serveLoopback serves h on a random 127.0.0.1 port until the test ends and
// returns "127.0.0.1:PORT".
func serveLoopback(t testing.TB, h http.Handler) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	return l.Addr().String()
}

// SetFail installs (or with nil removes) a failure injector.
func (p *Proxy) SetFail(f func(r *http.Request) int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.Fail = f
}

// copyBuffers is a pool of the proxy's copy buffers.
type copyBuffers struct{}

var copyBufferPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func (copyBuffers) Get() []byte  { return *copyBufferPool.Get().(*[]byte) }
func (copyBuffers) Put(b []byte) { copyBufferPool.Put(&b) }

func (p *Proxy) record(r *http.Request, status int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reqs = append(p.reqs, Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Status: status})
}

// Requests returns a copy of the requests seen so far.
func (p *Proxy) Requests() []Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Request(nil), p.reqs...)
}

// Reset forgets the requests and bytes seen so far.
func (p *Proxy) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reqs = nil
	p.up, p.down = 0, 0
}

// Bytes returns the body bytes clients sent (uploaded) and received
// (downloaded) through the proxy since the last Reset.
func (p *Proxy) Bytes() (uploaded, downloaded int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.up, p.down
}

// BlobGets counts GET requests for blobs (downloads), HEADs excluded.
func (p *Proxy) BlobGets() int {
	n := 0
	for _, r := range p.Requests() {
		if r.Method == http.MethodGet && strings.Contains(r.Path, "/blobs/sha256:") {
			n++
		}
	}
	return n
}

// Uploads counts blob upload completions (PUT .../blobs/uploads/...) and
// monolithic POSTs with a digest.
func (p *Proxy) Uploads() int {
	n := 0
	for _, r := range p.Requests() {
		if r.Method == http.MethodPut && strings.Contains(r.Path, "/blobs/uploads/") {
			n++
		}
	}
	return n
}

// Mounts counts cross-repository mount requests (POST ...?mount=...&from=...).
func (p *Proxy) Mounts() int {
	n := 0
	for _, r := range p.Requests() {
		if r.Method == http.MethodPost && strings.Contains(r.Query, "mount=") && r.Status == http.StatusCreated {
			n++
		}
	}
	return n
}

// Dump renders the requests for failure messages.
func (p *Proxy) Dump() string {
	var b bytes.Buffer
	for _, r := range p.Requests() {
		fmt.Fprintf(&b, "%s %s?%s -> %d\n", r.Method, r.Path, r.Query, r.Status)
	}
	return b.String()
}

type statusWriter struct {
	http.ResponseWriter
	status int
	n      int64
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	n, err := w.ResponseWriter.Write(b)
	w.n += int64(n)
	return n, err
}

// Flush keeps streaming responses streaming.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

type countingReader struct {
	r io.ReadCloser
	n int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	if c.r == nil {
		return 0, io.EOF
	}
	n, err := c.r.Read(b)
	c.n += int64(n)
	return n, err
}

func (c *countingReader) Close() error {
	if c.r == nil {
		return nil
	}
	return c.r.Close()
}

// DSSEPredicateTypes returns the predicate types of the DSSE envelopes
// `cosign verify-attestation` printed (one JSON object a line).
func DSSEPredicateTypes(out string) []string {
	var types []string
	for _, line := range strings.Split(out, "\n") {
		var env struct {
			Payload string `json:"payload"`
		}
		if !strings.HasPrefix(line, "{") || json.Unmarshal([]byte(line), &env) != nil {
			continue
		}
		b, err := base64.StdEncoding.DecodeString(env.Payload)
		if err != nil {
			continue
		}
		var st struct {
			PredicateType string `json:"predicateType"`
		}
		if json.Unmarshal(b, &st) == nil {
			types = append(types, st.PredicateType)
		}
	}
	return types
}

// Tally counts reqs by the kind kind names for each and returns the
// counts sorted by kind, "KIND: N" each: request-count tests and the
// benchmarks' request summaries name their kinds, this counts them.
func Tally(reqs []Request, kind func(Request) string) []string {
	c := map[string]int{}
	for _, r := range reqs {
		c[kind(r)]++
	}
	out := make([]string, 0, len(c))
	for k, n := range c {
		out = append(out, fmt.Sprintf("%s: %d", k, n))
	}
	sort.Strings(out)
	return out
}
