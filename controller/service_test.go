package controller_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/oslayer/oslayer/api/v1alpha1"
	"github.com/oslayer/oslayer/controller"
	"github.com/oslayer/oslayer/sign"
	"github.com/oslayer/oslayer/test/synth"
)

// sample is one series of a Prometheus text exposition.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// scrape GETs http://addr/metrics (retrying while the server starts) and
// parses the text exposition.
func scrape(t *testing.T, addr string) []sample {
	t.Helper()
	var body []byte
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err == nil {
			body, err = io.ReadAll(resp.Body)
			resp.Body.Close()
			if err == nil && resp.StatusCode == http.StatusOK {
				break
			}
			err = fmt.Errorf("%s: %v", resp.Status, err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("scraping %s: %v", addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var out []sample
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		s := sample{labels: map[string]string{}}
		rest := line
		if i := strings.IndexAny(line, "{ "); i >= 0 && line[i] == '{' {
			s.name = line[:i]
			rest = line[i+1:]
			for !strings.HasPrefix(rest, "}") {
				eq := strings.Index(rest, `="`)
				if eq < 0 {
					t.Fatalf("metrics line %q", line)
				}
				key := strings.TrimPrefix(rest[:eq], ",")
				v, n := unquoteLabel(rest[eq+1:])
				s.labels[key] = v
				rest = strings.TrimPrefix(rest[eq+1+n:], ",")
			}
			rest = strings.TrimSpace(rest[1:])
		} else {
			s.name, rest, _ = strings.Cut(line, " ")
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			t.Fatalf("metrics line %q has no value", line)
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		s.value = v
		out = append(out, s)
	}
	return out
}

// unquoteLabel reads a quoted label value at the start of s and returns
// it and the bytes it took.
func unquoteLabel(s string) (string, int) {
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
			if s[i] == 'n' {
				b.WriteByte('\n')
			} else {
				b.WriteByte(s[i])
			}
		case '"':
			return b.String(), i + 1
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String(), len(s)
}

// metric sums the series of name whose labels include want.
func metric(ss []sample, name string, want map[string]string) (float64, bool) {
	var sum float64
	found := false
	for _, s := range ss {
		if s.name != name {
			continue
		}
		ok := true
		for k, v := range want {
			if s.labels[k] != v {
				ok = false
			}
		}
		if ok {
			sum += s.value
			found = true
		}
	}
	return sum, found
}

// events are the events.k8s.io Events about the PoolImage name, by reason.
func (e *env) events(t *testing.T, name string) map[string][]eventsv1.Event {
	t.Helper()
	var list eventsv1.EventList
	if err := e.c.List(context.Background(), &list, client.InNamespace(e.ns)); err != nil {
		t.Fatal(err)
	}
	out := map[string][]eventsv1.Event{}
	for _, ev := range list.Items {
		if ev.Regarding.Kind == "PoolImage" && ev.Regarding.Name == name {
			out[ev.Reason] = append(out[ev.Reason], ev)
		}
	}
	return out
}

// TestMetricsAndEvents scrapes the manager's metrics endpoint over HTTP
// around a good and a failed build: the build counters and the duration
// histogram count both, the last success time is the build's, the work
// queue depth is exported; the probes answer; and the PoolImage has Events
// for every build start, the success and the failure.
func TestMetricsAndEvents(t *testing.T) {
	e := newEnv(t)
	metrics, probes := freeAddr(t), freeAddr(t)
	e.runManager(t, func(o *controller.ManagerOptions) { o.MetricsAddr, o.ProbeAddr = metrics, probes })
	for _, p := range []string{"/healthz", "/readyz"} {
		deadline := time.Now().Add(30 * time.Second)
		for {
			resp, err := http.Get("http://" + probes + p)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
				err = fmt.Errorf("%s", resp.Status)
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %v", p, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	before := scrape(t, metrics)
	start := time.Now()
	e.create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "osc-worker", Namespace: e.ns}, Data: oscSecret("one")})
	e.create(t, e.poolImage("worker", v1alpha1.Source{Gardener: &v1alpha1.GardenerSource{SecretName: "osc-worker"}}))
	e.wait(t, "worker", "Ready", ready)
	e.updateSecret(t, "osc-worker", func(s *corev1.Secret) {
		s.Data = map[string][]byte{"osc.yaml": []byte(synth.OSCFiles("  - path: etc/relative\n    content:\n      inline:\n        data: x\n"))}
	})
	e.wait(t, "worker", "Degraded", degraded)
	// controller-runtime counts a reconcile once Reconcile has returned,
	// which is after the status the wait above saw was written.
	after := scrape(t, metrics)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); after = scrape(t, metrics) {
		a, _ := metric(after, "controller_runtime_reconcile_total", map[string]string{"controller": "poolimage"})
		b, _ := metric(before, "controller_runtime_reconcile_total", map[string]string{"controller": "poolimage"})
		if a-b >= 2 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}

	delta := func(name string, labels map[string]string) float64 {
		t.Helper()
		a, ok := metric(after, name, labels)
		if !ok {
			t.Errorf("metrics: no %s%v", name, labels)
		}
		b, _ := metric(before, name, labels)
		return a - b
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"oslayer_builds_total", map[string]string{"result": "succeeded"}, 1},
		{"oslayer_builds_total", map[string]string{"result": "failed"}, 1},
		{"oslayer_build_duration_seconds_count", map[string]string{"result": "succeeded"}, 1},
		{"oslayer_build_duration_seconds_count", map[string]string{"result": "failed"}, 1},
		{"oslayer_build_duration_seconds_bucket", map[string]string{"result": "succeeded", "le": "+Inf"}, 1},
	} {
		if d := delta(c.name, c.labels); d != c.want {
			t.Errorf("%s%v went up by %v, want %v", c.name, c.labels, d, c.want)
		}
	}
	if d := delta("oslayer_build_duration_seconds_sum", map[string]string{"result": "succeeded"}); d <= 0 || d > 60 {
		t.Errorf("the good build's duration %v s", d)
	}
	if d := delta("controller_runtime_reconcile_total", map[string]string{"controller": "poolimage"}); d < 2 {
		t.Errorf("%v reconciles counted", d)
	}
	if _, ok := metric(after, "workqueue_depth", map[string]string{"name": "poolimage"}); !ok {
		t.Error("no workqueue_depth of the poolimage controller")
	}
	ts, ok := metric(after, "oslayer_last_success_timestamp_seconds", map[string]string{"namespace": e.ns, "name": "worker"})
	if !ok || ts < float64(start.Unix()) || ts > float64(time.Now().Unix()) {
		t.Errorf("last success time %v (found %v), want between %d and now", ts, ok, start.Unix())
	}

	// Events are written asynchronously.
	deadline := time.Now().Add(30 * time.Second)
	for {
		evs := e.events(t, "worker")
		if len(evs["BuildStarted"]) == 2 && len(evs["Built"]) == 1 && len(evs["BuildFailed"]) == 1 {
			f := evs["BuildFailed"][0]
			if f.Type != corev1.EventTypeWarning || !strings.Contains(f.Note, "files[0]") || f.Action != "build" {
				t.Errorf("BuildFailed event %+v", f)
			}
			if b := evs["Built"][0]; b.Type != corev1.EventTypeNormal || !strings.Contains(b.Note, e.host+"/os/worker@sha256:") {
				t.Errorf("Built event %+v", b)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("events by reason: BuildStarted %d, Built %d, BuildFailed %d; want 2, 1, 1",
				len(evs["BuildStarted"]), len(evs["Built"]), len(evs["BuildFailed"]))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestRegistryDown stops the real registry (base and target) for 10 s
// while the inputs change: the build fails with Degraded (a run failure,
// retried with backoff, not an input failure), status.image stays the
// last good image, and once the registry is back on the same port the
// controller builds and signs the new inputs without intervention.
func TestRegistryDown(t *testing.T) {
	e := newEnv(t)
	metrics := freeAddr(t)
	e.runManager(t, func(o *controller.ManagerOptions) { o.MetricsAddr = metrics })
	e.create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "osc-worker", Namespace: e.ns}, Data: oscSecret("one")})
	pi := e.poolImage("worker", v1alpha1.Source{Gardener: &v1alpha1.GardenerSource{SecretName: "osc-worker"}})
	pi.Spec.Base = e.reg.Host + "/fcos/base:stable"
	pi.Spec.Target = e.reg.Host + "/os/worker:latest"
	e.create(t, pi)
	pi = e.wait(t, "worker", "Ready", ready)
	first := pi.Status.Image
	failed := func() float64 {
		v, _ := metric(scrape(t, metrics), "oslayer_builds_total", map[string]string{"result": "failed"})
		return v
	}
	failedBefore := failed()

	e.reg.Stop()
	down := time.Now()
	e.updateSecret(t, "osc-worker", func(s *corev1.Secret) { s.Data = oscSecret("two") })
	pi = e.wait(t, "worker", "Degraded", degraded)
	c := meta.FindStatusCondition(pi.Status.Conditions, v1alpha1.ConditionDegraded)
	t.Logf("Degraded %.1f s after the registry stopped: %s: %s", time.Since(down).Seconds(), c.Reason, c.Message)
	if c.Reason != controller.ReasonBuildFailed || !strings.Contains(c.Message, e.reg.Host) {
		t.Errorf("Degraded %s %q: want %s naming the registry", c.Reason, c.Message, controller.ReasonBuildFailed)
	}
	if pi.Status.Image != first || ready(pi) {
		t.Errorf("while the registry is down: image %q (want the last good %q), Ready %v", pi.Status.Image, first, ready(pi))
	}
	time.Sleep(time.Until(down.Add(10 * time.Second)))
	attempts := failed() - failedBefore
	t.Logf("%v failed builds in the 10 s the registry was down", attempts)
	if attempts < 1 || attempts > 10 {
		t.Errorf("%v failed builds in 10 s: want a few, retried with backoff", attempts)
	}

	e.reg.Restart(t)
	up := time.Now()
	pi = e.wait(t, "worker", "Ready after the registry came back", func(pi *v1alpha1.PoolImage) bool {
		return ready(pi) && pi.Status.Image != first && !degraded(pi)
	})
	t.Logf("Ready %.1f s after the registry came back", time.Since(up).Seconds())
	e.verify(t, pi.Status.Image)
}

func randomValue(t *testing.T, prefix string) string {
	t.Helper()
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return prefix + hex.EncodeToString(b)
}

// TestSecretsNotShown: the cosign key and password, the push credentials
// and secretRef content (and a wrong cosign password that fails a build)
// appear in no PoolImage status, no Event and no log line of the
// controller, in clear or base64; the secretRef content is not in the
// image (not baked unless spec.bakeSecrets).
func TestSecretsNotShown(t *testing.T) {
	e := start(t)
	token, pushPassword, wrongPassword := randomValue(t, "token-"), randomValue(t, "push-"), randomValue(t, "wrong-")
	var cosign corev1.Secret
	if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: "cosign"}, &cosign); err != nil {
		t.Fatal(err)
	}
	auth, err := json.Marshal(map[string]any{"auths": map[string]any{e.host: map[string]string{
		"auth": base64.StdEncoding.EncodeToString([]byte("builder:" + pushPassword))}}})
	if err != nil {
		t.Fatal(err)
	}
	e.create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "push", Namespace: e.ns}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: auth}})
	e.create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "tokens", Namespace: e.ns}, Data: map[string][]byte{"token": []byte(token)}})
	e.create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "cosign-wrong", Namespace: e.ns},
		Data: map[string][]byte{sign.SecretKeyField: cosign.Data[sign.SecretKeyField], sign.SecretPasswordField: []byte(wrongPassword)}})
	osc := synth.OSCFiles("  - path: /etc/oslayer/token\n    content:\n      secretRef: {name: tokens, dataKey: token}\n" +
		"  - path: /etc/oslayer/pool.conf\n    content:\n      inline:\n        data: one\n")
	e.create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "osc-worker", Namespace: e.ns}, Data: map[string][]byte{"osc.yaml": []byte(osc)}})
	src := v1alpha1.Source{Gardener: &v1alpha1.GardenerSource{SecretName: "osc-worker", SecretRefs: []string{"tokens"}}}
	good := e.poolImage("worker", src)
	good.Spec.PushSecret = &v1alpha1.LocalObjectReference{Name: "push"}
	e.create(t, good)
	bad := e.poolImage("wrongkey", src)
	bad.Spec.Signing.KeySecret.Name = "cosign-wrong"
	e.create(t, bad)
	pi := e.wait(t, "worker", "Ready", ready)
	e.verify(t, pi.Status.Image)
	failedPI := e.wait(t, "wrongkey", "Degraded", degraded)
	t.Logf("wrong password: %s", meta.FindStatusCondition(failedPI.Status.Conditions, v1alpha1.ConditionDegraded).Message)

	// The secretRef file is delivered at run time: its content is in no
	// layer of the image.
	for i, b := range synth.LayerContents(t, remoteImage(t, pi.Status.Image)) {
		if strings.Contains(string(b), token) {
			t.Errorf("layer %d holds the secretRef content", i)
		}
	}

	// Everything the controller showed: status, Events (both APIs), logs.
	shown := map[string]string{"log": e.logs.String()}
	for _, n := range []string{"worker", "wrongkey"} {
		b, err := json.Marshal(e.get(t, n).Status)
		if err != nil {
			t.Fatal(err)
		}
		shown["status of "+n] = string(b)
	}
	// Events are written asynchronously: wait for the two builds' last.
	deadline := time.Now().Add(30 * time.Second)
	for len(e.events(t, "worker")["Built"]) == 0 || len(e.events(t, "wrongkey")["BuildFailed"]) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no Built and BuildFailed Events within 30 s")
		}
		time.Sleep(200 * time.Millisecond)
	}
	shown["log"] = e.logs.String()
	var evs eventsv1.EventList
	if err := e.c.List(context.Background(), &evs, client.InNamespace(e.ns)); err != nil {
		t.Fatal(err)
	}
	var core corev1.EventList
	if err := e.c.List(context.Background(), &core, client.InNamespace(e.ns)); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(evs.Items)
	shown["events"] = string(b)
	b, _ = json.Marshal(core.Items)
	shown["core events"] = string(b)
	if len(evs.Items) == 0 || !strings.Contains(shown["log"], "build failed") {
		t.Fatalf("nothing to check: %d events, log:\n%s", len(evs.Items), e.logs.tail(2000))
	}
	keyLines := strings.Split(strings.TrimSpace(string(cosign.Data[sign.SecretKeyField])), "\n")
	secrets := map[string]string{"cosign password": e.password, "wrong cosign password": wrongPassword,
		"push password": pushPassword, "secretRef content": token, "cosign key": keyLines[len(keyLines)/2]}
	for what, v := range secrets {
		for where, s := range shown {
			for _, form := range []string{v, base64.StdEncoding.EncodeToString([]byte(v))} {
				if strings.Contains(s, form) {
					t.Errorf("the %s shows in the %s", what, where)
				}
			}
		}
	}
}
