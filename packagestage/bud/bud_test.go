//go:build containers_image_openpgp && exclude_graphdriver_btrfs && exclude_graphdriver_devicemapper

package bud

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/oslayer/oslayer/packagestage"
	"github.com/oslayer/oslayer/registry"
	"github.com/oslayer/oslayer/test/regtest"
)

func TestMain(m *testing.M) {
	if InitReexec() {
		return
	}
	os.Exit(m.Run())
}

// busyboxBase pushes a base made of Debian's busybox-static (a shell and
// the usual commands, as links) to reg and returns it by digest.
func busyboxBase(t *testing.T, reg string) (string, v1.Hash) {
	t.Helper()
	tools := os.Getenv("OSLAYER_TOOLS")
	if tools == "" {
		home, _ := os.UserHomeDir()
		tools = filepath.Join(home, ".cache", "oslayer-tools")
	}
	debs, _ := filepath.Glob(filepath.Join(tools, "debs", "busybox-static_*.deb"))
	if len(debs) == 0 {
		if os.Getenv("OSLAYER_REQUIRE_TOOLS") == "1" {
			t.Fatalf("busybox-static .deb missing under %s/debs (test/setup.sh downloads it)", tools)
		}
		t.Skip("busybox-static .deb missing (test/setup.sh downloads it)")
	}
	dpkg := regtest.Require(t, "dpkg-deb")
	root := t.TempDir()
	regtest.Run(t, nil, dpkg, "-x", debs[len(debs)-1], root)
	bb, err := os.ReadFile(filepath.Join(root, "bin", "busybox"))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range []string{"bin", "etc", "tmp", "usr", "usr/lib", "var", "proc", "sys", "dev", "run"} {
		tw.WriteHeader(&tar.Header{Name: d + "/", Typeflag: tar.TypeDir, Mode: 0o755})
	}
	tw.WriteHeader(&tar.Header{Name: "bin/busybox", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(bb))})
	tw.Write(bb)
	for _, a := range []string{"sh", "mkdir", "rm", "printf", "echo", "cat", "cp", "true", "false", "test", "["} {
		tw.WriteHeader(&tar.Header{Name: "bin/" + a, Typeflag: tar.TypeSymlink, Linkname: "busybox"})
	}
	tw.Close()
	data := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		t.Fatal(err)
	}
	cf, _ := img.ConfigFile()
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config.Env = []string{"PATH=/bin"}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(reg+"/os/base:1", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatal(err)
	}
	d, _ := img.Digest()
	return reg + "/os/base@" + d.String(), d
}

func TestBuildahBuildsCachesAndNamesTheFailingLine(t *testing.T) {
	regtest.RequireRoot(t, "buildah's chroot isolation")
	reg := regtest.Start(t, regtest.Config{})
	base, digest := busyboxBase(t, reg.Host)
	opts := &registry.Options{Insecure: []string{reg.Host}}
	user := []byte("FROM packages\nRUN mkdir -p /etc/agent && printf 'level=1\\n' > /etc/agent/agent.conf\n" +
		"RUN --mount=type=secret,id=token cat /run/secrets/token > /dev/null\n")
	secret := filepath.Join(t.TempDir(), "token")
	os.WriteFile(secret, []byte("s3cr3t-token-value"), 0o600)
	plan, err := packagestage.NewPlan(digest, packagestage.Inputs{Containerfile: user, ContainerfileName: "agent.Containerfile"}, "")
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	ctx := context.Background()
	run := func(p *packagestage.Plan) (*Result, error) {
		return Run(ctx, Options{Plan: p, Base: base, Repository: reg.Host + "/os/packages", Secrets: map[string]string{"token": secret}, Registry: opts, Log: &log, ScratchDir: t.TempDir()})
	}
	res, err := run(plan)
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if res.Hit || res.AddedLayers == 0 || res.Key != plan.Key.String() {
		t.Fatalf("first build: %+v", res)
	}
	// The package base: the base's layers first, the key label, the file.
	img, err := remote.Image(mustRef(res.Ref), opts.RemoteOptions(ctx)...)
	if err != nil {
		t.Fatal(err)
	}
	baseImg, err := remote.Image(mustRef(base), opts.RemoteOptions(ctx)...)
	if err != nil {
		t.Fatal(err)
	}
	bl, _ := baseImg.Layers()
	il, _ := img.Layers()
	for i := range bl {
		a, _ := bl[i].DiffID()
		b, _ := il[i].DiffID()
		if a != b {
			t.Fatalf("layer %d: diffID %s, base has %s", i, b, a)
		}
	}
	cfg, _ := img.ConfigFile()
	if cfg.Config.Labels[packagestage.LabelKey] != plan.Key.String() {
		t.Fatalf("labels %v", cfg.Config.Labels)
	}
	// The secret is in no layer, label or history.
	raw, _ := img.RawConfigFile()
	if bytes.Contains(raw, []byte("s3cr3t-token-value")) {
		t.Fatal("secret in the config")
	}
	found := false
	for _, l := range il[len(bl):] {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(rc)
		rc.Close()
		if bytes.Contains(b, []byte("s3cr3t-token-value")) {
			t.Fatal("secret in a layer")
		}
		if bytes.Contains(b, []byte("level=1\n")) {
			found = true
		}
	}
	if !found {
		t.Fatal("the user's file is in no added layer")
	}
	// Same inputs: a hit, no buildah.
	log.Reset()
	res2, err := run(plan)
	if err != nil {
		t.Fatal(err)
	}
	if !res2.Hit || res2.Digest != res.Digest || log.Len() != 0 {
		t.Fatalf("second build: %+v, log %q", res2, log.String())
	}
	// A failing RUN names its line; nothing is tagged.
	bad := []byte("FROM packages\nRUN true\nRUN exit 3\n")
	plan3, err := packagestage.NewPlan(digest, packagestage.Inputs{Containerfile: bad, ContainerfileName: "bad.Containerfile"}, "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = run(plan3)
	if err == nil || !strings.Contains(err.Error(), "bad.Containerfile line 3") {
		t.Fatalf("failing RUN: %v", err)
	}
	if _, err := remote.Head(mustRef(reg.Host+"/os/packages:"+plan3.Key.Tag()), opts.RemoteOptions(ctx)...); err == nil {
		t.Fatal("a failed build is tagged")
	}
}
