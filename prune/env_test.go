package prune_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sigstore/sigstore/pkg/signature"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/oslayer/oslayer/assemble"
	"github.com/oslayer/oslayer/prune"
	"github.com/oslayer/oslayer/sign"
	"github.com/oslayer/oslayer/test/k8senv"
	"github.com/oslayer/oslayer/test/regtest"
)

// kube is the API server the package's tests share (started once).
var kube = &k8senv.Shared{
	Dirs: []string{filepath.Join("..", "config", "crd"),
		filepath.Join("..", "test", "fixtures", "testdata", "openshift-crds"),
		filepath.Join("..", "test", "fixtures", "testdata", "bootc-operator")},
}

// signer is the cosign key the tests sign with (scrypt is slow: once).
var signer struct {
	once sync.Once
	sv   signature.SignerVerifier
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if err := kube.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stopping envtest: %v\n", err)
	}
	os.Exit(code)
}

// kubeConfig starts the shared API server with the PoolImage, OpenShift
// MachineConfig and bootc-operator CRDs.
func kubeConfig(t testing.TB) *rest.Config {
	t.Helper()
	return kube.Config(t)
}

// env is one test's registry repository and cluster.
type env struct {
	t     testing.TB
	ctx   context.Context
	reg   *regtest.Registry
	proxy *regtest.Proxy
	repo  name.Repository
	dc    dynamic.Interface
	ns    string
}

var serial atomic.Int32

// newEnv connects to the shared API server (a test skips here first
// when there is none, as in -short runs) and starts Debian's
// docker-registry (deletes on unless noDelete) behind a counting proxy:
// prune's deletes are what the tests check, and a real registry's
// deletes take a manifest's tags with it, or are refused. Each test gets
// its own namespace and object names.
func newEnv(t testing.TB, noDelete bool) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	dc, err := dynamic.NewForConfig(kubeConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	reg := regtest.Start(t, regtest.Config{NoDelete: noDelete, Quiet: true})
	proxy := regtest.NewProxy(t, reg.Host)
	repo, err := name.NewRepository(proxy.Host + "/os/pools")
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, ctx: ctx, reg: reg, proxy: proxy, repo: repo, dc: dc, ns: fmt.Sprintf("prune-%d", serial.Add(1))}
	e.apply(fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata: {name: %s}\n", e.ns))
	return e
}

// name is a cluster-wide unique object name.
func (e *env) name(s string) string { return e.ns + "-" + s }

// key returns the signing key, generated once.
func key(t testing.TB) signature.SignerVerifier {
	t.Helper()
	signer.once.Do(func() {
		kp, err := sign.GenerateKeyPair([]byte("pw"))
		if err != nil {
			signer.err = err
			return
		}
		p := filepath.Join(os.TempDir(), fmt.Sprintf("oslayer-prune-test-%d.key", os.Getpid()))
		if signer.err = os.WriteFile(p, kp.Private, 0o600); signer.err != nil {
			return
		}
		defer os.Remove(p)
		signer.sv, signer.err = sign.LoadKey(p, sign.Password([]byte("pw")))
	})
	if signer.err != nil {
		t.Fatal(signer.err)
	}
	return signer.sv
}

// image is a small pool image: random content, the pool label, a base.
func image(t testing.TB, pool string) v1.Image {
	t.Helper()
	img, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	if pool != "" {
		cf.Config.Labels = map[string]string{assemble.LabelPool: pool, assemble.LabelBaseDigest: "sha256:" + fmt.Sprintf("%064x", 1)}
	}
	cf.Created = v1.Time{Time: time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// push writes a pool image by digest (and under tags), signs it and
// attaches provenance and SBOM; it returns its digested reference.
func (e *env) push(pool string, signed bool, tags ...string) name.Digest {
	e.t.Helper()
	img := image(e.t, pool)
	return e.pushImage(img, pool, signed, tags...)
}

func (e *env) pushImage(img remote.Taggable, pool string, signed bool, tags ...string) name.Digest {
	e.t.Helper()
	h, err := partial(img)
	if err != nil {
		e.t.Fatal(err)
	}
	d := e.repo.Digest(h.String())
	if err := writeTaggable(d, img); err != nil {
		e.t.Fatalf("push %s: %v", d, err)
	}
	for _, tag := range tags {
		if err := remote.Tag(e.repo.Tag(tag), img); err != nil {
			e.t.Fatal(err)
		}
	}
	if signed {
		e.sign(d, pool)
	}
	return d
}

// sign runs oslayer's sign and attest stages on d: the .sig and .att tags.
func (e *env) sign(d name.Digest, pool string) {
	e.t.Helper()
	sv := key(e.t)
	stages := sign.Stages(func(context.Context) (signature.SignerVerifier, error) { return sv, nil })
	h, _ := v1.NewHash(d.DigestStr())
	b := &assemble.Built{Digest: h, Pool: pool, Base: assemble.Base{Ref: "quay.io/fedora/fedora-coreos:stable", Digest: h}}
	p := &assemble.Published{Ref: d.String(), Digest: &d}
	for _, s := range stages {
		if _, err := s.Run(e.ctx, b, p); err != nil {
			e.t.Fatalf("stage %s on %s: %v", s.Name(), d, err)
		}
	}
}

// apply creates the objects of a YAML document (status included: it is
// written through the status subresource after the create).
func (e *env) apply(doc string) *unstructured.Unstructured {
	e.t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
		e.t.Fatalf("%v\n%s", err, doc)
	}
	u := &unstructured.Unstructured{Object: m}
	gvr := gvrOf(u.GroupVersionKind().GroupVersion().WithKind(u.GetKind()))
	ri := e.dc.Resource(gvr)
	var rc dynamic.ResourceInterface = ri
	if u.GetNamespace() != "" {
		rc = ri.Namespace(u.GetNamespace())
	}
	status, hasStatus := m["status"]
	out, err := rc.Create(e.ctx, u, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatalf("create %s %s: %v", u.GetKind(), u.GetName(), err)
	}
	if hasStatus && u.GetKind() != "Namespace" {
		out.Object["status"] = status
		if out, err = rc.UpdateStatus(e.ctx, out, metav1.UpdateOptions{}); err != nil {
			e.t.Fatalf("status of %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
	return out
}

// gvrOf maps the kinds the tests create to their resources.
func gvrOf(gvk schema.GroupVersionKind) schema.GroupVersionResource {
	plural := map[string]string{"Namespace": "namespaces", "Node": "nodes", "ConfigMap": "configmaps",
		"PoolImage": "poolimages", "MachineConfig": "machineconfigs", "MachineConfigPool": "machineconfigpools",
		"BootcNode": "bootcnodes", "BootcNodePool": "bootcnodepools"}
	return gvk.GroupVersion().WithResource(plural[gvk.Kind])
}

// prune runs prune over the test's repository with the cluster's
// references: keep 0, no grace, undated images deletable, so that only
// what is in use stays.
func (e *env) prune(del bool, mod ...func(*prune.Options)) *prune.Result {
	e.t.Helper()
	o := prune.Options{Targets: []string{e.repo.Name()}, Sources: []prune.Source{prune.Cluster(e.dc)},
		Policy: prune.Policy{Keep: 0, DeleteUndated: true, Now: time.Now()}, Delete: del}
	for _, m := range mod {
		m(&o)
	}
	res, err := prune.Run(e.ctx, o)
	if err != nil {
		e.t.Fatalf("prune: %v", err)
	}
	return res
}

// status is the HTTP status of GET manifest ref (tag or digest).
func (e *env) status(ref string) int {
	e.t.Helper()
	req, _ := http.NewRequestWithContext(e.ctx, http.MethodGet, "http://"+e.reg.Host+"/v2/"+e.repo.RepositoryStr()+"/manifests/"+ref, nil)
	req.Header.Set("Accept", "application/vnd.oci.image.manifest.v1+json, application/vnd.oci.image.index.v1+json, application/vnd.docker.distribution.manifest.v2+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// tags lists the repository's tags from the registry itself.
func (e *env) tags() map[string]bool {
	e.t.Helper()
	r, _ := name.NewRepository(e.reg.Host + "/" + e.repo.RepositoryStr())
	l, err := remote.List(r)
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]bool{}
	for _, t := range l {
		out[t] = true
	}
	return out
}
