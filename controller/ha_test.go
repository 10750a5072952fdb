package controller_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sigstore/sigstore/pkg/signature"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/oslayer/oslayer/api/v1alpha1"
	"github.com/oslayer/oslayer/controller"
	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/sign"
	"github.com/oslayer/oslayer/test/regtest"
)

// Leader election of the replicas under test: a killed leader is replaced
// within seconds, and a leader keeps its lease while the API server
// answers renewals within 4 s (a loaded machine).
var haLease = []string{"--leader-elect", "--leader-elect-lease-duration", "6s", "--leader-elect-renew-deadline", "4s", "--leader-elect-retry-period", "500ms"}

// TestLeaderKilledMidBuild runs the real oslayer binary as controller
// replicas (separate processes, leader election on a Lease) against one
// API server. Only the leader builds (its build counter and logs; the
// follower's show none). The leader is killed with SIGKILL twice in the
// middle of a build: once while it uploads a layer, once while it pushes
// the signature (the image is in the registry by digest, its tag not
// moved yet). Each time a follower takes over and brings the PoolImage to
// Ready with the new image. All along a poller reads the target tag from
// the registry: every digest it ever points at has all its blobs and a
// valid signature and attestation by the PoolImage's key.
func TestLeaderKilledMidBuild(t *testing.T) {
	e := newEnv(t)
	bin := oslayerCmd(t)
	kubeconfig := e.kubeconfig(t)
	// Faults in front of the harness's counting proxy stall the request
	// the leader is killed in.
	faults := regtest.NewFaultProxy(t, e.proxy.Host)
	pub, err := sign.ParsePublicKey("cosign.pub", e.pub)
	if err != nil {
		t.Fatal(err)
	}

	// The faults stall the first request kill matches and report it on hit.
	var (
		mu   sync.Mutex
		kill func(*http.Request) bool
		hit  = make(chan string, 1)
	)
	faults.SetFault(func(r *http.Request) regtest.Fault {
		mu.Lock()
		defer mu.Unlock()
		if kill == nil || !kill(r) {
			return regtest.Fault{}
		}
		kill = nil
		hit <- r.Method + " " + r.URL.Path
		return regtest.Fault{Stall: true}
	})
	arm := func(f func(*http.Request) bool) {
		mu.Lock()
		defer mu.Unlock()
		kill = f
	}

	// The poller reads through the proxy too (the signatures name that
	// host); the faults stall only writes.
	p := startPoller(t, faults.Host, "os/worker", "latest", pub)

	a := e.startController(t, bin, kubeconfig, "a")
	b := e.startController(t, bin, kubeconfig, "b")
	e.create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "osc-worker", Namespace: e.ns}, Data: oscSecret("one")})
	pi := e.poolImage("worker", v1alpha1.Source{Gardener: &v1alpha1.GardenerSource{SecretName: "osc-worker"}})
	pi.Spec.Base = faults.Host + "/fcos/base:stable"
	pi.Spec.Target = faults.Host + "/os/worker:latest"
	e.create(t, pi)
	images := []string{e.wait(t, "worker", "Ready", ready).Status.Image}

	for _, p := range []*process{a, b} {
		p.checkProbes(t)
	}
	leader, follower := leaderOf(t, a, b)
	if n := leader.builds(t); n != 1 {
		t.Errorf("leader %s built %d times, want 1", leader.name, n)
	}
	spare := follower

	for i, k := range []struct {
		what  string
		match func(*http.Request) bool
	}{
		{"uploading a layer", func(r *http.Request) bool {
			return (r.Method == http.MethodPatch || r.Method == http.MethodPut) && strings.HasPrefix(r.URL.Path, "/v2/os/worker/blobs/uploads/")
		}},
		{"pushing the signature", func(r *http.Request) bool {
			return r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, "/v2/os/worker/manifests/sha256-") && strings.HasSuffix(r.URL.Path, ".sig")
		}},
	} {
		for _, p := range spare {
			if n := p.builds(t); n != 0 {
				t.Errorf("follower %s built %d times", p.name, n)
			}
		}
		arm(k.match)
		e.updateSecret(t, "osc-worker", func(s *corev1.Secret) { s.Data = oscSecret(fmt.Sprint("change ", i)) })
		select {
		case req := <-hit:
			t.Logf("killing leader %s while %s (%s)", leader.name, k.what, req)
		case <-time.After(time.Minute):
			t.Fatalf("leader %s did not start building within a minute", leader.name)
		}
		if err := leader.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		killed := time.Now()
		<-leader.done
		prev := images[len(images)-1]
		pi := e.wait(t, "worker", "a new image after the leader died", func(pi *v1alpha1.PoolImage) bool {
			return ready(pi) && pi.Status.Image != prev && pi.Status.Signed
		})
		t.Logf("new leader built %s %.1f s after the kill", pi.Status.Image, time.Since(killed).Seconds())
		images = append(images, pi.Status.Image)
		if n := leader.logBuilds(t); n != 1 {
			t.Errorf("killed leader %s logged %d builds, want 1 (the one before this change)", leader.name, n)
		}
		next, rest := leaderOf(t, spare...)
		if n := next.builds(t); n != 1 {
			t.Errorf("new leader %s built %d times, want 1", next.name, n)
		}
		next.checkProbes(t)
		// A fresh replica joins as the next follower.
		leader, spare = next, append(rest, e.startController(t, bin, kubeconfig, fmt.Sprintf("r%d", i)))
		spare[len(spare)-1].checkProbes(t)
	}

	seen, errs := p.stop()
	for _, err := range errs {
		t.Error(err)
	}
	for _, im := range images {
		d := im[strings.Index(im, "@")+1:]
		if !seen[d] {
			t.Errorf("the tag never pointed at %s (seen %v)", im, seen)
		}
	}
	if len(seen) != len(images) {
		t.Errorf("the tag pointed at %d digests, the PoolImage recorded %d images: %v", len(seen), len(images), seen)
	}
}

// kubeconfig writes a kubeconfig of an administrator of the API server,
// for processes.
func (e *env) kubeconfig(t *testing.T) string {
	t.Helper()
	kubeConfig(t)
	u, err := kube.Env().AddUser(envtest.User{Name: "oslayer-controller", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := u.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// process is one oslayer controller process.
type process struct {
	name           string
	cmd            *exec.Cmd
	done           chan struct{}
	metrics, probe string
	log            syncBuffer // stderr: JSON log records
}

// startController starts oslayer controller as a leader-election replica
// watching the test's namespace (the lease is there too), with its
// metrics and probes on free loopback ports.
func (e *env) startController(t *testing.T, bin, kubeconfig, name string) *process {
	t.Helper()
	return e.startProcess(t, bin, kubeconfig, name, append([]string{"controller", "--log-format", "json", "--log-level", "info",
		"--namespace", e.ns, "--leader-election-namespace", e.ns}, haLease...)...)
}

// startProcess starts oslayer with args (a controller command) and its
// metrics, probes and base index cache on free loopback ports and a
// temporary directory, with the kubeconfig and a HOME of its own (no
// ~/.kube/config of the machine); SIGTERM stops it when the test ends.
func (e *env) startProcess(t *testing.T, bin, kubeconfig, name string, args ...string) *process {
	t.Helper()
	p := &process{name: name, done: make(chan struct{}), metrics: freeAddr(t), probe: freeAddr(t)}
	args = append(args, "--metrics-bind-address", p.metrics, "--health-probe-bind-address", p.probe,
		"--base-index-cache", t.TempDir())
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "HOME="+t.TempDir())
	p.cmd.Stderr = &p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(20 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
			t.Errorf("controller %s did not stop on SIGTERM", name)
		}
		if t.Failed() {
			t.Logf("controller %s log:\n%s", name, p.log.String())
		}
	})
	return p
}

// get fetches http://addr/path, retrying while the process starts.
func (p *process) get(t *testing.T, addr, path string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + path)
		if err == nil {
			b, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			if rerr == nil && resp.StatusCode == http.StatusOK {
				return string(b)
			}
			err = fmt.Errorf("%s: %v %s", resp.Status, rerr, b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("controller %s: GET %s%s: %v", p.name, addr, path, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkProbes checks that /healthz and /readyz answer ok.
func (p *process) checkProbes(t *testing.T) {
	t.Helper()
	for _, path := range []string{"/healthz", "/readyz"} {
		if body := p.get(t, p.probe, path); strings.TrimSpace(body) != "ok" {
			t.Errorf("controller %s: %s says %q", p.name, path, body)
		}
	}
}

// metric is the value of the sample of name whose labels contain label
// (0 when there is none).
func (p *process) metric(t *testing.T, name, label string) float64 {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(p.get(t, p.metrics, "/metrics")))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) || !strings.Contains(line, label) {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(line[strings.LastIndex(line, " ")+1:], &v); err == nil {
			return v
		}
	}
	return 0
}

// builds is the process's count of successful builds, from its metrics;
// its log must say the same.
func (p *process) builds(t *testing.T) int {
	t.Helper()
	n := int(p.metric(t, "oslayer_builds_total", `result="succeeded"`))
	if l := p.logBuilds(t); l != n {
		t.Errorf("controller %s: oslayer_builds_total says %d builds, its log %d", p.name, n, l)
	}
	return n
}

// logBuilds counts the "built" records the reconciler logged.
func (p *process) logBuilds(t *testing.T) int {
	t.Helper()
	n := 0
	for _, line := range strings.Split(p.log.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil {
			continue
		}
		if _, ok := rec["seconds"]; ok && rec["msg"] == "built" && rec["poolimage"] != nil {
			n++
		}
	}
	return n
}

// leaderOf waits until exactly one of ps says it leads (controller-
// runtime's leader_election_master_status) and returns it and the others.
func leaderOf(t *testing.T, ps ...*process) (*process, []*process) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		var leaders, rest []*process
		for _, p := range ps {
			if p.metric(t, "leader_election_master_status", `name="`+controller.LeaderElectionID+`"`) == 1 {
				leaders = append(leaders, p)
			} else {
				rest = append(rest, p)
			}
		}
		if len(leaders) == 1 {
			return leaders[0], rest
		}
		if len(leaders) > 1 || time.Now().After(deadline) {
			t.Fatalf("%d of %d replicas lead", len(leaders), len(ps))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// poller reads a tag from the registry until stopped and checks every
// digest the tag points at: the manifest and all its blobs are there, and
// the image verifies with the key (signature and attestation).
type poller struct {
	quit chan struct{}
	done chan struct{}
	seen map[string]bool
	errs []error
}

func startPoller(t *testing.T, host, repo, tag string, pub signature.Verifier) *poller {
	p := &poller{quit: make(chan struct{}), done: make(chan struct{}), seen: map[string]bool{}}
	go func() {
		defer close(p.done)
		for {
			select {
			case <-p.quit:
				return
			case <-time.After(20 * time.Millisecond):
			}
			d, _, err := getManifest(host, repo, tag)
			if err != nil || d == "" || p.seen[d] {
				continue
			}
			p.seen[d] = true
			if err := checkImage(host, repo, d, pub); err != nil {
				p.errs = append(p.errs, fmt.Errorf("%s:%s pointed at %s: %v", repo, tag, d, err))
			}
		}
	}()
	t.Cleanup(func() { p.stop() })
	return p
}

func (p *poller) stop() (map[string]bool, []error) {
	select {
	case <-p.quit:
	default:
		close(p.quit)
	}
	<-p.done
	return p.seen, p.errs
}

// getManifest returns the digest and body of repo's manifest ref ("" when
// there is none).
func getManifest(host, repo, ref string) (string, []byte, error) {
	req, err := http.NewRequest(http.MethodGet, "http://"+host+"/v2/"+repo+"/manifests/"+ref, nil)
	if err != nil {
		return "", nil, err
	}
	req.Header.Set("Accept", "application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json, application/vnd.oci.image.index.v1+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusNotFound {
		return "", nil, nil
	}
	if err != nil || resp.StatusCode != http.StatusOK {
		return "", nil, fmt.Errorf("GET manifest %s: %s %v", ref, resp.Status, err)
	}
	return resp.Header.Get("Docker-Content-Digest"), b, nil
}

// checkImage checks that the image repo@digest is complete and signed.
func checkImage(host, repo, digest string, pub signature.Verifier) error {
	_, b, err := getManifest(host, repo, digest)
	if err != nil || b == nil {
		return fmt.Errorf("manifest: %v (found %v)", err, b != nil)
	}
	var m struct {
		MediaType string
		Config    struct{ Digest string }
		Layers    []struct{ Digest string }
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	if m.Config.Digest == "" || len(m.Layers) == 0 {
		return fmt.Errorf("not an image manifest: %s", b)
	}
	blobs := []string{m.Config.Digest}
	for _, l := range m.Layers {
		blobs = append(blobs, l.Digest)
	}
	for _, d := range blobs {
		resp, err := http.Head("http://" + host + "/v2/" + repo + "/blobs/" + d)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("blob %s: %s", d, resp.Status)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	v, err := sign.Verify(ctx, host+"/"+repo+"@"+digest, pub, sign.WithRegistry(&registry.Options{}))
	if err != nil {
		return err
	}
	if !v.OK() {
		return fmt.Errorf("not verified: signature %q, attestation %q", v.SignatureError, v.AttestationError)
	}
	return nil
}
