package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/oslayer/oslayer/assemble"
	"github.com/oslayer/oslayer/test/pkgbase"
	"github.com/oslayer/oslayer/test/regtest"
	"github.com/oslayer/oslayer/test/synth"
)

// agentMC is a worker MachineConfig with a file (its content is site) that
// enables agent-report.service, a unit only the package base has (the
// agent RPM ships it, WantedBy=graphical.target).
func agentMC(site string) string {
	return `apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: 99-worker-agent
  labels:
    machineconfiguration.openshift.io/role: worker
spec:
  config:
    ignition:
      version: 3.4.0
    storage:
      files:
      - path: /etc/agent/site.conf
        mode: 420
        contents:
          source: data:,site%3D` + site + `%0A
    systemd:
      units:
      - name: agent-report.service
        enabled: true
`
}

// agentContainerfile installs the agent RPM from the context with the
// base's rpm, writes its config from a build argument in a step that uses
// a build secret, and enables its unit.
const agentContainerfile = `FROM packages
ARG LEVEL=0
COPY agent.rpm /tmp/agent.rpm
RUN /usr/bin/rpm -i --nodeps --dbpath /var/lib/rpm /tmp/agent.rpm && rm /tmp/agent.rpm
RUN --mount=type=secret,id=token test -s /run/secrets/token && \
    mkdir -p /etc/agent /etc/systemd/system/multi-user.target.wants && \
    printf 'level=%s\n' "$LEVEL" > /etc/agent/agent.conf && \
    ln -s /usr/lib/systemd/system/agent.service /etc/systemd/system/multi-user.target.wants/agent.service
`

const agentSecret = "s3cr3t-token-value-7f3a"

// packageBuild is what -o json of a build says.
type packageBuild struct {
	Image        string                  `json:"image"`
	Digest       v1.Hash                 `json:"digest"`
	Tagged       bool                    `json:"tagged"`
	Base         assemble.Base           `json:"base"`
	PackageStage *assemble.PackageResult `json:"packageStage"`
	BaseIndex    *assemble.IndexInfo     `json:"baseIndex"`
}

// layerGets counts GETs of the blobs in layers among reqs.
func layerGets(reqs []regtest.Request, layers map[v1.Hash]bool) int {
	n := 0
	for _, r := range reqs {
		if r.Method != "GET" || !strings.Contains(r.Path, "/blobs/") {
			continue
		}
		h, err := v1.NewHash(r.Path[strings.LastIndex(r.Path, "/")+1:])
		if err == nil && layers[h] {
			n++
		}
	}
	return n
}

// TestPackageStageCLI runs oslayer build with a user Containerfile that
// installs a 3rd-party RPM (built with rpmbuild) with real buildah onto a
// base assembled from Debian's busybox-static and rpm, then: the same
// inputs again run no buildah and read no base layer; a config-only change
// runs no buildah; a build argument change runs it once; the secret is in
// no layer, label or history; a failing RUN names its line, shows what the
// step wrote and tags nothing; umoci unpacks the final image, which has
// the RPM's files and database entry and both unit links.
func TestPackageStageCLI(t *testing.T) {
	regtest.RequireRoot(t, "buildah's chroot isolation")
	rpm := regtest.Require(t, "rpm")
	bin := oslayerBud(t)
	reg := regtest.Start(t, regtest.Config{})
	proxy := regtest.NewProxy(t, reg.Host)
	base, _ := pkgbase.Push(t, proxy.Host, pkgbase.RPMDebs...)
	dir := t.TempDir()
	ctxDir := filepath.Join(dir, "agent")
	os.Mkdir(ctxDir, 0o755)
	pkgbase.BuildRPM(t, ctxDir)
	cf := filepath.Join(ctxDir, "agent.Containerfile")
	secret := filepath.Join(dir, "token")
	mc := filepath.Join(dir, "mc.yaml")
	for p, data := range map[string]string{cf: agentContainerfile, secret: agentSecret, mc: agentMC("1")} {
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	repo := proxy.Host + "/os/worker"
	target := repo + ":latest"
	ctx := context.Background()
	pbuild := func(t *testing.T, level string, extra ...string) (packageBuild, string) {
		t.Helper()
		args := append([]string{"build", "--base", base, "--pool", "worker", "--machineconfig", mc,
			"--push", target, "--containerfile", cf, "--build-arg", "LEVEL=" + level,
			"--build-secret", "id=token,src=" + secret, "-o", "json"}, extra...)
		stdout, stderr, code := cliBin(t, bin, args...)
		var res packageBuild
		if code != 0 {
			t.Fatalf("build LEVEL=%s: exit %d\n%s\n%s", level, code, stdout, stderr)
		}
		if err := json.Unmarshal([]byte(stdout), &res); err != nil {
			t.Fatalf("-o json: %v\n%s", err, stdout)
		}
		if !res.Tagged || res.PackageStage == nil {
			t.Fatalf("build: %s\n%s", stdout, stderr)
		}
		t.Logf("build LEVEL=%s %s: package stage hit=%v %.2fs, %d layers %d B, wall %s", level, strings.Join(extra, " "), res.PackageStage.Hit,
			res.PackageStage.Seconds, len(res.PackageStage.Layers), res.PackageStage.AddedBytes, lastWall)
		return res, stderr
	}

	// The package stage's scratch storage (under TMPDIR) is removed by
	// the time the command ends, though in the background of the build.
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)

	// 1. Cold: buildah runs every step.
	first, stderr := pbuild(t, "1")
	ps := first.PackageStage
	if left, _ := filepath.Glob(filepath.Join(tmp, "oslayer-packages-*")); len(left) != 0 {
		t.Errorf("scratch storage left after the command: %q", left)
	}
	if ps.Hit || len(ps.Commands) == 0 || len(ps.Layers) == 0 || ps.AddedBytes <= 0 || !strings.HasPrefix(ps.Ref, repo+"@sha256:") || !strings.Contains(ps.Tag, ":packages-") {
		t.Fatalf("first build: package stage %+v\n%s", ps, stderr)
	}
	// The package base's index starts from the official base's: only the
	// layers the stage added are read for it.
	if ix := first.BaseIndex; ix == nil || ix.Source != "built" || ix.BytesRead != ps.AddedBytes {
		t.Errorf("package base index %+v: want built from the %d bytes the stage added", ix, ps.AddedBytes)
	}
	if !slices.ContainsFunc(ps.Commands, func(c string) bool { return strings.HasPrefix(c, "RUN /usr/bin/rpm -i") }) {
		t.Errorf("commands %q miss the user's RUN", ps.Commands)
	}
	// The package layer is named by what the user wrote, so that the layer
	// holding the RPM can be found.
	if l := ps.Layers[len(ps.Layers)-1]; !strings.HasPrefix(l.Source, cf+": COPY agent.rpm /tmp/agent.rpm; RUN /usr/bin/rpm -i") {
		t.Errorf("package layer %s source %q: want the Containerfile's steps", l.Digest, l.Source)
	}
	for _, l := range ps.Layers {
		if strings.Contains(l.Source, "#(nop)") {
			t.Errorf("package layer %s source %q: want a step that added files", l.Digest, l.Source)
		}
	}
	// buildah's info line for every RUN is not passed on.
	if strings.Contains(stderr, "network namespace isolation") {
		t.Errorf("buildah's chroot network info line is shown:\n%s", stderr)
	}
	layerSet := map[v1.Hash]bool{}
	pimg, err := remote.Image(mustRef(t, ps.Ref), remote.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	pm, _ := pimg.Manifest()
	for _, l := range pm.Layers {
		layerSet[l.Digest] = true
	}

	// 2. Same inputs: the tag's key matches, no buildah, no base layer read.
	proxy.Reset()
	second, stderr := pbuild(t, "1")
	if !second.PackageStage.Hit || len(second.PackageStage.Commands) != 0 || second.PackageStage.Ref != ps.Ref || second.Digest != first.Digest {
		t.Fatalf("same inputs: %+v (first %s)\n%s", second.PackageStage, first.Digest, stderr)
	}
	if strings.Contains(stderr, "STEP ") {
		t.Errorf("same inputs: buildah ran:\n%s", stderr)
	}
	// The progress says what moved: nothing.
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "push ") && strings.Contains(l, "100%") && !strings.Contains(l, " 0 B uploaded") {
			t.Errorf("same inputs: progress %q, want 0 B uploaded", l)
		}
	}
	if n := layerGets(proxy.Requests(), layerSet); n != 0 {
		t.Errorf("same inputs: %d base layer blobs downloaded\n%s", n, proxy.Dump())
	}

	// 3. A config-only change: no buildah, same package base, a new image.
	os.WriteFile(mc, []byte(agentMC("2")), 0o600)
	proxy.Reset()
	third, stderr := pbuild(t, "1")
	if !third.PackageStage.Hit || third.PackageStage.Ref != ps.Ref || third.Digest == first.Digest || strings.Contains(stderr, "STEP ") {
		t.Fatalf("config change: %+v, digest %s (first %s)\n%s", third.PackageStage, third.Digest, first.Digest, stderr)
	}
	if n := layerGets(proxy.Requests(), layerSet); n != 0 {
		t.Errorf("config change: %d base layer blobs downloaded", n)
	}

	// 4. A package input change (a build argument): buildah runs once.
	fourth, _ := pbuild(t, "2")
	if fourth.PackageStage.Hit || fourth.PackageStage.Key == ps.Key || fourth.PackageStage.Ref == ps.Ref {
		t.Fatalf("build-arg change: %+v", fourth.PackageStage)
	}
	fifth, stderr := pbuild(t, "2")
	if !fifth.PackageStage.Hit || fifth.PackageStage.Ref != fourth.PackageStage.Ref || fifth.Digest != fourth.Digest || strings.Contains(stderr, "STEP ") {
		t.Fatalf("build-arg change, again: %+v\n%s", fifth.PackageStage, stderr)
	}

	// 5. A failing RUN: the error names the line and what the step wrote;
	// no tag moves, no package base is tagged.
	tagsBefore, err := remote.List(mustRepo(t, repo), remote.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(ctxDir, "bad.Containerfile")
	os.WriteFile(bad, []byte("FROM packages\nRUN true\nRUN echo agent-install-failed-here >&2; exit 3\n"), 0o600)
	stdout, stderr, code := cliBin(t, bin, "build", "--base", base, "--pool", "worker", "--machineconfig", mc,
		"--push", target, "--containerfile", bad, "-o", "json")
	if code == 0 || !strings.Contains(stderr, "bad.Containerfile line 3") || !strings.Contains(stderr, "agent-install-failed-here") {
		t.Fatalf("failing RUN: exit %d\n%s\n%s", code, stdout, stderr)
	}
	// The step's output without buildah's noise: no info line per RUN, no
	// "subprocess exited" of each process of its chain.
	if strings.Contains(stderr, "network namespace isolation") || strings.Contains(stderr, "subprocess exited") {
		t.Errorf("failing RUN: buildah's noise is shown:\n%s", stderr)
	}
	// -o json of the failed build is valid and says how far it got: the
	// resolved base, no empty digest, the package stage's key, commands up
	// to the failing one and its phases.
	var failed packageBuild
	if err := json.Unmarshal([]byte(stdout), &failed); err != nil {
		t.Fatalf("failing RUN: -o json: %v\n%s", err, stdout)
	}
	if strings.Contains(stdout, `":"`) || failed.Base.Ref != base || failed.Base.Digest.Hex == "" || failed.Tagged {
		t.Errorf("failing RUN: -o json: want the resolved base and no empty digest:\n%s", stdout)
	}
	if fp := failed.PackageStage; fp == nil || fp.Key == "" || len(fp.Commands) == 0 || fp.Commands[len(fp.Commands)-1] != "RUN echo agent-install-failed-here >&2; exit 3" ||
		!slices.ContainsFunc(fp.Phases, func(p assemble.Phase) bool { return p.Name == "build" }) {
		t.Errorf("failing RUN: -o json: want the package stage's key, commands up to the failing one and phases:\n%s", stdout)
	}
	tagsAfter, err := remote.List(mustRepo(t, repo), remote.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(tagsBefore, tagsAfter) {
		t.Errorf("failing RUN: tags %v, before %v", tagsAfter, tagsBefore)
	}
	if d := headDigest(t, target); d != fifth.Digest {
		t.Errorf("failing RUN: %s moved to %s (was %s)", target, d, fifth.Digest)
	}

	// The final image: the official base's layers first; the secret in no
	// layer, label or history.
	img, err := remote.Image(mustRef(t, fifth.Image), remote.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	bimg, err := remote.Image(mustRef(t, base), remote.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	bm, _ := bimg.Manifest()
	m, _ := img.Manifest()
	for i, l := range bm.Layers {
		if m.Layers[i].Digest != l.Digest {
			t.Fatalf("layer %d is %s, the official base's is %s", i, m.Layers[i].Digest, l.Digest)
		}
	}
	raw, _ := img.RawConfigFile()
	rawM, _ := img.RawManifest()
	if bytes.Contains(raw, []byte(agentSecret)) || bytes.Contains(rawM, []byte(agentSecret)) {
		t.Fatal("the build secret is in the config (labels, history) or the manifest")
	}
	for i, b := range synth.LayerContents(t, img) {
		if bytes.Contains(b, []byte(agentSecret)) {
			t.Fatalf("the build secret is in layer %d", i)
		}
	}

	// umoci unpacks it; the RPM's files, its database entry and both unit
	// links are there.
	rootfs := pkgbase.Unpack(t, img)
	for p, want := range map[string]string{
		"usr/bin/agent":        "#!/bin/sh\necho agent\n",
		"etc/agent/agent.conf": "level=2\n",
		"etc/agent/site.conf":  "site=2\n",
		"run/secrets/token":    "",
		"tmp/agent.rpm":        "",
	} {
		b, err := os.ReadFile(filepath.Join(rootfs, p))
		switch {
		case want == "" && err == nil:
			t.Errorf("/%s is in the image", p)
		case want != "" && (err != nil || string(b) != want):
			t.Errorf("/%s: %q %v, want %q", p, b, err, want)
		}
	}
	for link, want := range map[string]string{
		"etc/systemd/system/multi-user.target.wants/agent.service":       "/usr/lib/systemd/system/agent.service",
		"etc/systemd/system/graphical.target.wants/agent-report.service": "/usr/lib/systemd/system/agent-report.service",
	} {
		if got, err := os.Readlink(filepath.Join(rootfs, link)); err != nil || got != want {
			t.Errorf("/%s: %q %v, want a link to %s", link, got, err, want)
		}
	}
	if out := regtest.Run(t, nil, rpm, "--root", rootfs, "--dbpath", "/var/lib/rpm", "-q", "agent"); strings.TrimSpace(out) != "agent-1.2-1.noarch" {
		t.Errorf("rpm -q agent: %q", out)
	}
}

func mustRepo(t *testing.T, s string) name.Repository {
	t.Helper()
	r, err := name.NewRepository(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func headDigest(t *testing.T, ref string, opts ...remote.Option) v1.Hash {
	t.Helper()
	d, err := remote.Head(mustRef(t, ref), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return d.Digest
}
