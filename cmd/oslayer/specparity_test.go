package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/oslayer/oslayer/api/v1alpha1"
	"github.com/oslayer/oslayer/controller"
	"github.com/oslayer/oslayer/fleet"
	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/pipeline"
	"github.com/oslayer/oslayer/sign"
)

// TestSpecParity: every field of the build specification is reachable
// from oslayer build's flags, a fleet plan's pool and a PoolImage's spec,
// unless pipeline.Absent lists it for that front-end with the reason; a
// field listed there must really be out of reach. (The Gardener
// extension, a module of its own, has its TestSpecParity beside its
// mapping.) A new field of
// pipeline.Spec fails this test until each front-end maps it (and this
// test's full inputs set it) or Absent says why not.
func TestSpecParity(t *testing.T) {
	files := parityFiles(t)
	for front, specs := range map[string][]pipeline.Spec{
		pipeline.FrontCLI:       cliSpecs(t, files),
		pipeline.FrontFleet:     fleetSpecs(t, files),
		pipeline.FrontPoolImage: poolImageSpecs(t, files),
	} {
		for _, e := range pipeline.ParityErrors(front, specs[0], specs[1:]...) {
			t.Error(e)
		}
	}
}

// parityFiles are the files the full inputs name (read by the mappings).
type parityInputs struct{ dir, key, password, containerfile, secret, repo, authfile string }

func parityFiles(t *testing.T) parityInputs {
	t.Helper()
	dir := t.TempDir()
	kp, err := sign.GenerateKeyPair([]byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	f := parityInputs{dir: dir, key: filepath.Join(dir, "cosign.key"), password: filepath.Join(dir, "pw"),
		containerfile: filepath.Join(dir, "Containerfile"), secret: filepath.Join(dir, "secret"),
		repo: filepath.Join(dir, "extra.repo"), authfile: filepath.Join(dir, "auth.json")}
	for path, data := range map[string][]byte{f.key: kp.Private, f.password: []byte("pw"), f.containerfile: []byte("FROM packages\n"),
		f.secret: []byte("s"), f.repo: []byte("[extra]\n"), f.authfile: []byte(`{"auths":{}}`)} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// cliSpecs maps a minimal command line, then ones setting every flag.
func cliSpecs(t *testing.T, f parityInputs) []pipeline.Spec {
	spec := func(epoch string, args ...string) pipeline.Spec {
		t.Helper()
		t.Setenv("SOURCE_DATE_EPOCH", epoch)
		var bf buildFlags
		fs := pflag.NewFlagSet("build", pflag.ContinueOnError)
		bf.register(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		s, err := bf.spec(&globals{})
		if err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		return s
	}
	all := []string{"--pool", "worker", "--osc", "a.yaml", "--machineconfig", "mcs", "--machineconfigpool", "mcp.yaml",
		"--secrets", f.dir, "--bake-secrets", "--strict", "--allow-toplevel", "data", "--imageref-budget", "2GiB", "--imageref-timeout", "3m",
		"--base", "quay.io/fedora/fedora-coreos:stable", "--arch", "amd64,arm64",
		"--mirror", "quay.io=mirror.example.com", "--authfile", f.authfile, "--insecure-registry", "r.example.com:5000", "--jobs", "7", "--request-jobs", "9", "--timeout", "45s",
		"--base-index", "off", "--base-index-cache", f.dir,
		"--containerfile", f.containerfile, "--context", f.dir, "--build-arg", "A=1", "--build-secret", "id=s,src=" + f.secret, "--repo-file", f.repo,
		"--require-base", "quay.io/fedora/fedora-coreos:stable", "--expect-version", "42", "--skip", pipeline.FullSettings().Preflight.Skip[0], "--fatal-warnings",
		"--deny-usr-override", "--allow-secret", "/etc/x", "--warn-layers", "50", "--max-layers", "60", "--max-added-bytes", "1GiB",
		"--sign-key", f.key, "--sign-key-password-file", f.password}
	return []pipeline.Spec{
		spec("", "--pool", "a", "--osc", "b.yaml", "--push", "oci:"+filepath.Join(f.dir, "none")),
		spec("1700000000", append(all, "--push", "registry.example.com/os/worker:v1", "--sign-referrers")...),
		spec("1700000000", "--pool", "worker", "--osc", "a.yaml", "--push", "oci:"+filepath.Join(f.dir, "out"), "--sign-key", f.key, "--sign-identity", "registry.example.com/os/worker"),
	}
}

// fleetSpecs maps a minimal pool, then ones setting every field.
func fleetSpecs(t *testing.T, f parityInputs) []pipeline.Spec {
	yes := true
	spec := func(p fleet.Pool, o fleet.Options) pipeline.Spec {
		t.Helper()
		s, err := p.Spec(o)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	full := fleet.Settings{OSC: []string{"a.yaml"}, MachineConfig: []string{"mcs"}, MachineConfigPool: []string{"mcp.yaml"},
		Secrets: f.dir, Base: "quay.io/fedora/fedora-coreos:stable", Target: "registry.example.com/os/worker:v1", Arch: "amd64,arm64",
		SignKey: f.key, SignKeyPasswordFile: f.password, SignReferrers: &yes, Settings: pipeline.FullSettings()}
	layout := fleet.Settings{OSC: []string{"a.yaml"}, Target: "oci:" + filepath.Join(f.dir, "out"), SignKey: f.key,
		SignIdentity: "registry.example.com/os/worker"}
	o := fleet.Options{Registry: &registry.Options{Jobs: 7}, Epoch: time.Unix(1700000000, 0), IndexCacheDir: f.dir,
		ImageBudget: 2 << 30, ImageTimeout: 3 * time.Minute, Password: []byte("pw")}
	return []pipeline.Spec{
		spec(fleet.Pool{Name: "a", Settings: fleet.Settings{OSC: []string{"b.yaml"}, Target: "oci:" + filepath.Join(f.dir, "none")}}, fleet.Options{}),
		spec(fleet.Pool{Name: "worker", Settings: full}, o),
		spec(fleet.Pool{Name: "worker", Settings: layout}, o),
	}
}

// poolImageSpecs maps a minimal PoolImage, then one setting every field
// (with everything the controller reads from the cluster for it).
func poolImageSpecs(t *testing.T, f parityInputs) []pipeline.Spec {
	spec := func(pi *v1alpha1.PoolImage, rd controller.Read) pipeline.Spec {
		t.Helper()
		s, err := controller.SpecOf(pi, rd)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	none := &v1alpha1.PoolImage{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: v1alpha1.PoolImageSpec{Base: "oci:b", Target: "registry.example.com/os/a:v1"}}
	full := &v1alpha1.PoolImage{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: v1alpha1.PoolImageSpec{
		Pool: "worker", Base: "quay.io/fedora/fedora-coreos:stable", Target: "registry.example.com/os/worker:v1",
		Arch: []string{"amd64", "arm64"}, Settings: pipeline.FullSettings(),
		Signing: &v1alpha1.Signing{KeySecret: v1alpha1.LocalObjectReference{Name: "cosign"}, Referrers: true},
	}}
	rd := controller.Read{OSCs: []string{"a.yaml"}, MachineConfigs: []string{"mc.yaml"}, MachineConfigPools: []string{"mcp.yaml"},
		SecretsDir: f.dir, Registry: &registry.Options{Jobs: 7}, IndexCacheDir: f.dir,
		SigningKey: &sign.KeyMaterial{Source: "Secret ns/cosign", PEM: []byte("key")},
		Packages: &pipeline.Packages{Containerfile: []byte("FROM packages\n"), ContainerfileName: "ConfigMap ns/cf", BuildArgs: map[string]string{"A": "1"},
			Secrets: map[string]string{"s": f.secret}, Repos: map[string][]byte{"extra.repo": []byte("[extra]\n")}}}
	return []pipeline.Spec{spec(none, controller.Read{}), spec(full, rd)}
}
