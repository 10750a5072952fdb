//go:build containers_image_openpgp && exclude_graphdriver_btrfs && exclude_graphdriver_devicemapper

package bud

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/packagestage"
	"github.com/oslayer/oslayer/test/pkgbase"
	"github.com/oslayer/oslayer/test/regtest"
)

func TestMain(m *testing.M) {
	if InitReexec() {
		return
	}
	os.Exit(m.Run())
}

func TestBuildahBuildsCachesAndNamesTheFailingLine(t *testing.T) {
	regtest.RequireRoot(t, "buildah's chroot isolation")
	reg := regtest.Start(t, regtest.Config{})
	base, digest := pkgbase.Push(t, reg.Host)
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
	scratch := t.TempDir()
	run := func(p *packagestage.Plan) (*Result, error) {
		return Run(ctx, Options{Plan: p, Base: base, Repository: reg.Host + "/os/packages", Secrets: map[string]string{"token": secret}, Registry: opts, Log: &log, ScratchDir: scratch})
	}
	res, err := run(plan)
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if res.Hit || res.AddedLayers == 0 || res.Key != plan.Key.String() {
		t.Fatalf("first build: %+v", res)
	}
	// A miss reports each of its steps, in order, with wall time.
	var names []string
	for _, p := range res.Phases {
		names = append(names, p.Name)
		if p.Seconds <= 0 || p.CPUSeconds < 0 {
			t.Errorf("first build: phase %+v", p)
		}
	}
	if got, want := strings.Join(names, " "), "lookup storage pull build push describe cleanup"; got != want {
		t.Errorf("first build: phases %q, want %q", got, want)
	}
	if left, _ := os.ReadDir(scratch); len(left) != 0 {
		t.Errorf("first build: scratch storage left: %v", left)
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
	if len(res2.Phases) != 1 || res2.Phases[0].Name != "lookup" {
		t.Errorf("second build: phases %+v, want the lookup only", res2.Phases)
	}
	t.Logf("package stage: miss (buildah, push) %s, %d layers %d bytes added; hit %s", res.Duration, res.AddedLayers, res.AddedBytes, res2.Duration)
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

// A user Containerfile installs a 3rd-party RPM with the base's rpm, adds
// a config file and enables its unit; umoci unpacks the package base and
// the host's rpm finds the package in its database.
func TestBuildahInstallsAnRPMAndEnablesItsUnit(t *testing.T) {
	regtest.RequireRoot(t, "buildah's chroot isolation")
	rpm := regtest.Require(t, "rpm")
	reg := regtest.Start(t, regtest.Config{})
	base, digest := pkgbase.Push(t, reg.Host, pkgbase.RPMDebs...)
	ctxDir := t.TempDir()
	pkgbase.BuildRPM(t, ctxDir)
	user := []byte(`FROM packages
COPY agent.rpm /tmp/agent.rpm
RUN /usr/bin/rpm -i --nodeps --dbpath /var/lib/rpm /tmp/agent.rpm && rm /tmp/agent.rpm
RUN mkdir -p /etc/agent /etc/systemd/system/multi-user.target.wants && \
    printf 'level=2\n' > /etc/agent/agent.conf && \
    ln -s /usr/lib/systemd/system/agent.service /etc/systemd/system/multi-user.target.wants/agent.service
`)
	plan, err := packagestage.NewPlan(digest, packagestage.Inputs{Containerfile: user, ContainerfileName: "agent.Containerfile"}, ctxDir)
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	ctx := context.Background()
	opts := &registry.Options{Insecure: []string{reg.Host}}
	// The scratch storage handed over for removal (as Stage removes it
	// in the background) rather than removed before Run returns.
	scratch := t.TempDir()
	var handed []string
	res, err := Run(ctx, Options{Plan: plan, Base: base, Repository: reg.Host + "/os/packages", Registry: opts, Log: &log, ScratchDir: scratch,
		RemoveScratch: func(dir string) { handed = append(handed, dir) }})
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if len(handed) != 1 || filepath.Dir(handed[0]) != scratch {
		t.Fatalf("scratch directories handed over: %q, want one in %s", handed, scratch)
	}
	if _, err := os.Stat(handed[0]); err != nil {
		t.Fatalf("the scratch directory handed over: %v", err)
	}
	for _, p := range res.Phases {
		if p.Name == "cleanup" {
			t.Errorf("a cleanup phase although the removal was handed over: %+v", res.Phases)
		}
	}
	img, err := remote.Image(mustRef(res.Ref), opts.RemoteOptions(ctx)...)
	if err != nil {
		t.Fatal(err)
	}
	rootfs := pkgbase.Unpack(t, img)
	if b, err := os.ReadFile(filepath.Join(rootfs, "usr/bin/agent")); err != nil || !strings.Contains(string(b), "echo agent") {
		t.Fatalf("/usr/bin/agent: %q %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(rootfs, "etc/agent/agent.conf")); err != nil || string(b) != "level=2\n" {
		t.Fatalf("/etc/agent/agent.conf: %q %v", b, err)
	}
	if target, err := os.Readlink(filepath.Join(rootfs, "etc/systemd/system/multi-user.target.wants/agent.service")); err != nil || target != "/usr/lib/systemd/system/agent.service" {
		t.Fatalf("unit link: %q %v", target, err)
	}
	if _, err := os.Stat(filepath.Join(rootfs, "tmp/agent.rpm")); err == nil {
		t.Fatal("/tmp/agent.rpm left in the image")
	}
	if out := regtest.Run(t, nil, rpm, "--root", rootfs, "--dbpath", "/var/lib/rpm", "-q", "agent"); strings.TrimSpace(out) != "agent-1.2-1.noarch" {
		t.Fatalf("rpm -q agent: %q", out)
	}
}

// dnfStub stands in for dnf on the test base (Debian has no dnf to
// assemble one from): it records each call, the repository files it sees
// and, for "dnf shell", the transaction it is given.
const dnfStub = `#!/bin/sh
{
  echo "dnf $*"
  ls /etc/yum.repos.d
  if [ "$2" = shell ]; then cat; fi
} >> /var/log/dnf-calls
`

// The generated steps for extensions and kernelType run against a base
// with a real rpm whose database has a default kernel, and a dnf that
// records its calls. The base has no rpm-ostree (the tool FCOS uses for
// extensions), so the generated step selects dnf -y install, as the MCO's
// template would on a plain bootc base; the kernel step finds the default
// kernel with rpm -q and swaps it in one dnf shell transaction, as the
// MCO does. The repository definitions are visible to both steps and in
// no layer.
func TestGeneratedStepsOnRPMBase(t *testing.T) {
	regtest.RequireRoot(t, "buildah's chroot isolation")
	rpmbuild := regtest.Require(t, "rpmbuild")
	reg := regtest.Start(t, regtest.Config{})
	_, digest := pkgbase.Push(t, reg.Host, append(pkgbase.RPMDebs, "dash")...)
	opts := &registry.Options{Insecure: []string{reg.Host}}
	ctx := context.Background()
	run := func(p *packagestage.Plan, base string) *Result {
		t.Helper()
		var log bytes.Buffer
		res, err := Run(ctx, Options{Plan: p, Base: base, Repository: reg.Host + "/os/packages", Registry: opts, Log: &log, ScratchDir: t.TempDir()})
		if err != nil {
			t.Fatalf("%v\n%s", err, log.String())
		}
		return res
	}

	// The base: a default kernel in the rpm database (the rpm's default
	// dbpath, which the generated rpm -q reads), the dnf stub, and dash as
	// /bin/sh so that a bare rpm is the real one, not busybox's applet.
	ctxDir := t.TempDir()
	top := t.TempDir()
	spec := filepath.Join(top, "kernel.spec")
	os.WriteFile(spec, []byte("Name: kernel\nVersion: 6.1.0\nRelease: 1\nSummary: test kernel\nLicense: MIT\nBuildArch: noarch\n%description\nA test kernel.\n%files\n"), 0o644)
	regtest.Run(t, nil, rpmbuild, "-bb", "--define", "_topdir "+top, "--define", "_dbpath "+filepath.Join(top, "db"), spec)
	b, err := os.ReadFile(filepath.Join(top, "RPMS", "noarch", "kernel-6.1.0-1.noarch.rpm"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(ctxDir, "kernel.rpm"), b, 0o644)
	os.WriteFile(filepath.Join(ctxDir, "dnf"), []byte(dnfStub), 0o755)
	setup := []byte(`FROM packages
COPY kernel.rpm dnf /tmp/
RUN /usr/bin/rpm -i --nodeps /tmp/kernel.rpm && rm /tmp/kernel.rpm && \
    cp /tmp/dnf /usr/bin/dnf && chmod 0755 /usr/bin/dnf && rm /tmp/dnf && \
    mkdir -p /var/log /etc/yum.repos.d && ln -sf dash /bin/sh
`)
	plan, err := packagestage.NewPlan(digest, packagestage.Inputs{Containerfile: setup, ContainerfileName: "setup.Containerfile"}, ctxDir)
	if err != nil {
		t.Fatal(err)
	}
	base := run(plan, reg.Host+"/os/base@"+digest.String())

	// The pool: an extension and the realtime kernel, with a repository.
	plan, err = packagestage.NewPlan(base.Digest, packagestage.Inputs{Extensions: []string{"usbguard"}, KernelType: "realtime", Arch: "amd64",
		Repos: map[string][]byte{"agent.repo": []byte("[agent]\nbaseurl=file:///srv/agent\n")}}, "")
	if err != nil {
		t.Fatal(err)
	}
	res := run(plan, base.Ref)
	img, err := remote.Image(mustRef(res.Ref), opts.RemoteOptions(ctx)...)
	if err != nil {
		t.Fatal(err)
	}
	rootfs := pkgbase.Unpack(t, img)
	calls, err := os.ReadFile(filepath.Join(rootfs, "var/log/dnf-calls"))
	if err != nil {
		t.Fatal(err)
	}
	want := "dnf -y install usbguard\noslayer-agent.repo\n" +
		"dnf -y shell\noslayer-agent.repo\n" +
		"remove kernel kernel-core kernel-modules kernel-modules-core kernel-modules-extra\n" +
		"install kernel-rt-core kernel-rt-modules kernel-rt-modules-extra kernel-rt-kvm\nrun\n"
	t.Logf("dnf calls:\n%s", calls)
	if string(calls) != want {
		t.Errorf("dnf calls:\n%s\nwant:\n%s", calls, want)
	}
	if entries, _ := os.ReadDir(filepath.Join(rootfs, "etc/yum.repos.d")); len(entries) != 0 {
		t.Errorf("repository files left in the image: %v", entries)
	}
	if b, err := os.ReadFile(filepath.Join(rootfs, "usr/lib/tmpfiles.d/usbguard_ipsec.conf")); err != nil || !strings.Contains(string(b), "d /var/lib/ipsec 0700") {
		t.Errorf("usbguard_ipsec.conf: %q %v", b, err)
	}
}

// TestNoiseFilter: the steps' output passes line by line, without what
// buildah's chroot runtime writes at every level of its process chain for
// a failing step.
func TestNoiseFilter(t *testing.T) {
	var out strings.Builder
	f := &noiseFilter{w: &out}
	for _, s := range []string{"STEP 3/3: RUN x\nagent-install", "-failed-here\nsubprocess exited with status 3\n", "subprocess exited with status 3\nsubprocess exited on killed\n", "last"} {
		if _, err := f.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	f.Flush()
	if want := "STEP 3/3: RUN x\nagent-install-failed-here\nlast"; out.String() != want {
		t.Errorf("filtered output %q, want %q", out.String(), want)
	}
}
