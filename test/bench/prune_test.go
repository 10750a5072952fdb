package bench

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/oslayer/oslayer/api/v1alpha1"
	"github.com/oslayer/oslayer/assemble"
	"github.com/oslayer/oslayer/controller"
	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/prune"
	"github.com/oslayer/oslayer/publish/record"
	"github.com/oslayer/oslayer/test/fixtures"
	"github.com/oslayer/oslayer/test/k8senv"
	"github.com/oslayer/oslayer/test/regtest"
)

var (
	prunePools  = flag.Int("bench.prune-pools", 100, "BenchmarkPrune: pools in the repository")
	pruneImages = flag.Int("bench.prune-images", 10, "BenchmarkPrune: images per pool (more than the 5 kept)")
)

// BenchmarkPrune measures `oslayer prune`'s dry run over one repository of
// -bench.prune-pools × -bench.prune-images pool images, each with a .sig
// and an .att tag and its build record (.rec), and a tag per pool on its
// newest image, with the
// references of a cluster (kube-apiserver and etcd, envtest): a PoolImage
// per pool whose status names its newest image and a build history of 5,
// and a Node per pool whose layered-image annotation names the newest
// image. It reports the wall time of the dry run (listing the references
// and the repository, deciding) and its registry requests by kind
// (counted by the proxy). Run it with test/bench/run.sh -bench.prune.
func BenchmarkPrune(b *testing.B) {
	assets := k8senv.Assets(b)
	root, err := fixtures.RepoRoot()
	if err != nil {
		b.Fatal(err)
	}
	te := &envtest.Environment{CRDDirectoryPaths: []string{filepath.Join(root, "config", "crd")}, ErrorIfCRDPathMissing: true, BinaryAssetsDirectory: assets}
	cfg, err := te.Start()
	if err != nil {
		b.Fatalf("envtest (kube-apiserver and etcd from %s): %v", assets, err)
	}
	defer func() { _ = te.Stop() }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	reg := regtest.Start(b, regtest.Config{Binary: *regBin, Quiet: *regQuiet, Filesystem: true, StorageDir: *regDir})
	proxy := regtest.NewProxy(b, reg.Host)
	repo, _ := name.NewRepository(proxy.Host + "/os/pools")
	pools, per := *prunePools, *pruneImages
	digests := pushPoolImages(b, repo, pools, per)
	scheme, err := controller.Scheme()
	if err != nil {
		b.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		b.Fatal(err)
	}
	pruneReferences(ctx, b, c, repo, digests)
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	loadBefore := loadavg()
	proxy.Reset()
	b.ResetTimer()
	cpu0, reg0 := selfCPU(), reg.CPU()
	start := time.Now()
	res, err := prune.Run(ctx, prune.Options{Targets: []string{repo.Name()}, Sources: []prune.Source{prune.Cluster(dc)},
		Policy: prune.Policy{Keep: 5, Grace: time.Hour, Now: time.Now()}})
	wall := time.Since(start)
	b.StopTimer()
	cpu, regCPU := selfCPU()-cpu0, reg.CPU()-reg0
	if err != nil {
		b.Fatal(err)
	}
	reqs := proxy.Requests()
	// One read of the cluster's references: what --yes does again right
	// before each image's DELETE.
	t0 := time.Now()
	if _, err := prune.Collect(ctx, prune.Cluster(dc)); err != nil {
		b.Fatal(err)
	}
	recheck := time.Since(t0)
	if want := pools * per; len(res.Images) != want || res.Delete != pools*(per-5) {
		b.Fatalf("%d images listed (want %d), %d to delete (want %d)", len(res.Images), want, res.Delete, pools*(per-5))
	}
	var s strings.Builder
	fmt.Fprintf(&s, "\nprune: dry run over one repository of %d images (%d pools × %d, each with .sig, .att and .rec, a tag per pool: %d tags), references from kube-apiserver %s + etcd (envtest: %d PoolImages with a build history of 5, %d Nodes)\n\n",
		pools*per, pools, per, pools*(per*3+1), k8senv.KubeVersion, pools, pools)
	fmt.Fprintf(&s, "registry: %s; load average (1, 5, 15 min) before: %s, after: %s; %d CPUs\n\n", reg.Version(), loadBefore, loadavg(), runtime.NumCPU())
	fmt.Fprintf(&s, "| measurement | value | target |\n|---|---:|---:|\n")
	fmt.Fprintf(&s, "| dry run wall time | %.2f s | ≤ 10 s |\n", wall.Seconds())
	fmt.Fprintf(&s, "| CPU of prune and the counting proxy (one process; user+sys) | %.2f s | |\n", cpu.Seconds())
	fmt.Fprintf(&s, "| CPU of the registry | %.2f s | |\n", regCPU.Seconds())
	fmt.Fprintf(&s, "| registry requests | %d | |\n", len(reqs))
	fmt.Fprintf(&s, "| one read of the cluster's references (the re-check before each DELETE) | %.0f ms | |\n", float64(recheck.Microseconds())/1000)
	fmt.Fprintf(&s, "| kept / to delete | %d / %d | |\n", res.Kept, res.Delete)
	fmt.Fprintf(&s, "\nregistry requests by kind: %s\n", requestKinds(reqs, 1))
	fmt.Print(s.String())
	if *mdOut != "" {
		if err := os.WriteFile(*mdOut, []byte(s.String()), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

// pushPoolImages pushes pools × per small pool images by digest, tags the
// newest (the last) of each pool, and gives each image a .sig and an .att
// tag (one small manifest under every attachment tag: prune reads their
// names) and its build record (.rec, which prune reads). digests[pool]
// lists a pool's images oldest first.
func pushPoolImages(b *testing.B, repo name.Repository, pools, per int) [][]name.Digest {
	att, err := random.Image(16, 1)
	if err != nil {
		b.Fatal(err)
	}
	ah, _ := att.Digest()
	if err := remote.Write(repo.Digest(ah.String()), att); err != nil {
		b.Fatal(err)
	}
	digests := make([][]name.Digest, pools)
	now := time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	errs := make([]error, pools)
	for p := range pools {
		digests[p] = make([]name.Digest, per)
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[p] = pushPool(repo, att, fmt.Sprintf("pool%03d", p), digests[p], now)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	return digests
}

// pushPool pushes one pool's images with their attachment tags.
func pushPool(repo name.Repository, att v1.Image, pool string, out []name.Digest, now time.Time) error {
	ctx, reg := context.Background(), &registry.Options{}
	for i := range out {
		img, err := random.Image(32, 1)
		if err != nil {
			return err
		}
		cf, _ := img.ConfigFile()
		cf = cf.DeepCopy()
		cf.Config.Labels = map[string]string{assemble.LabelPool: pool}
		if img, err = mutate.ConfigFile(img, cf); err != nil {
			return err
		}
		h, _ := img.Digest()
		out[i] = repo.Digest(h.String())
		if err := remote.Write(out[i], img); err != nil {
			return err
		}
		for _, suffix := range []string{".sig", ".att"} {
			if err := remote.Tag(repo.Tag("sha256-"+h.Hex+suffix), att); err != nil {
				return err
			}
		}
		// The build record every build writes: an hour apart, the
		// newest two hours old.
		at := now.Add(-2*time.Hour - time.Duration(len(out)-1-i)*time.Hour)
		m, err := img.Manifest()
		if err != nil {
			return err
		}
		if _, err := record.Write(ctx, reg, repo, record.Record{Image: h, Time: at, Pool: pool}, m.Config); err != nil {
			return err
		}
	}
	desc, err := remote.Get(out[len(out)-1])
	if err != nil {
		return err
	}
	return remote.Tag(repo.Tag(pool), desc)
}

// pruneReferences creates a PoolImage per pool (status.image the newest,
// a history of the 5 newest, an hour apart) and a Node per pool naming
// its newest image.
func pruneReferences(ctx context.Context, b *testing.B, c client.Client, repo name.Repository, digests [][]name.Digest) {
	const ns = "bench"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatal(err)
	}
	now := time.Now().Add(-2 * time.Hour)
	for p, ds := range digests {
		pool := fmt.Sprintf("pool%03d", p)
		pi := &v1alpha1.PoolImage{ObjectMeta: metav1.ObjectMeta{Name: pool, Namespace: ns},
			Spec: v1alpha1.PoolImageSpec{Source: v1alpha1.Source{Gardener: &v1alpha1.GardenerSource{SecretName: "osc"}}, Base: "quay.io/fedora/fedora-coreos:stable", Target: repo.Tag(pool).String()}}
		if err := c.Create(ctx, pi); err != nil {
			b.Fatal(err)
		}
		newest := ds[len(ds)-1]
		pi.Status.Image = newest.String()
		pi.Status.LastBuildTime = &metav1.Time{Time: now}
		for i := len(ds) - 1; i >= 0 && len(pi.Status.Builds) < 5; i-- {
			t := metav1.NewTime(now.Add(-time.Duration(len(ds)-1-i) * time.Hour))
			pi.Status.Builds = append(pi.Status.Builds, v1alpha1.BuildRecord{Image: ds[i].String(), Time: t, Result: "Succeeded"})
		}
		if err := c.Status().Update(ctx, pi); err != nil {
			b.Fatal(err)
		}
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-" + pool,
			Annotations: map[string]string{"machineconfiguration.openshift.io/currentImage": newest.String()}}}
		if err := c.Create(ctx, node); err != nil {
			b.Fatal(err)
		}
	}
}
