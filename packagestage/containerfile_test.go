package packagestage

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestExtensionPackagesFollowTheMCOTable(t *testing.T) {
	got, err := ExtensionPackages([]string{"usbguard", "kerberos", "ipsec"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"usbguard", "krb5-workstation", "libkadm5", "NetworkManager-libreswan", "libreswan", "openvswitch3.5-ipsec"}
	if !slices.Equal(got, want) {
		t.Fatalf("packages %q, want %q", got, want)
	}
	_, err = ExtensionPackages([]string{"usbguard", "wireguard", "wireguard"})
	if err == nil || !strings.Contains(err.Error(), `"wireguard"`) || strings.Count(err.Error(), "wireguard") != 1 || !strings.Contains(err.Error(), "sysstat") {
		t.Fatalf("unsupported extension: %v", err)
	}
	for in, want := range map[string]string{"": KernelDefault, "default": KernelDefault, "realtime": KernelRealtime, "64k-pages": Kernel64kPages, "rt": KernelDefault} {
		if got := CanonicalKernelType(in); got != want {
			t.Errorf("CanonicalKernelType(%q) = %q, want %q", in, got, want)
		}
	}
	if got := KernelPackages("realtime"); !slices.Equal(got, []string{"kernel-rt-core", "kernel-rt-modules", "kernel-rt-modules-extra", "kernel-rt-kvm"}) {
		t.Fatalf("realtime packages %q", got)
	}
}

func TestGenerateRefusesBadInputsNamingTheField(t *testing.T) {
	for _, tc := range []struct {
		in   Inputs
		want string
	}{
		{Inputs{Extensions: []string{"nope"}}, "spec.extensions"},
		{Inputs{KernelType: "64k-pages", Arch: "amd64"}, "spec.kernelType: 64k-pages is only supported on arm64"},
		{Inputs{Extensions: []string{"sysstat"}, BuildArgs: map[string]string{BaseArg: "x"}}, "build argument OSLAYER_BASE is set by oslayer"},
		{Inputs{Extensions: []string{"sysstat"}, BuildArgs: map[string]string{"1x": "x"}}, `build argument "1x"`},
		{Inputs{Extensions: []string{"sysstat"}, Repos: map[string][]byte{"../x.repo": nil}}, `repository definition "../x.repo"`},
		{Inputs{Containerfile: []byte("FROM quay.io/fedora/fedora-coreos:stable\nRUN true\n"), ContainerfileName: "agent.Containerfile"}, "agent.Containerfile line 1: the final stage is FROM quay.io/fedora/fedora-coreos:stable"},
	} {
		_, err := Generate(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", tc.in, err, tc.want)
		}
	}
	if _, err := Generate(Inputs{KernelType: "64k-pages", Arch: "arm64"}); err != nil {
		t.Fatal(err)
	}
}

func TestGeneratedSteps(t *testing.T) {
	cf, err := Generate(Inputs{Extensions: []string{"usbguard", "sysstat"}, KernelType: "realtime", Repos: map[string][]byte{"rt.repo": []byte("[rt]\n")}})
	if err != nil {
		t.Fatal(err)
	}
	g := string(cf.Generated)
	for _, want := range []string{
		"ARG OSLAYER_BASE\nFROM ${OSLAYER_BASE} AS packages\n",
		"pkgs='usbguard sysstat'",
		"rpm-ostree install $pkgs",
		"new='kernel-rt-core kernel-rt-modules kernel-rt-modules-extra kernel-rt-kvm'",
		"dnf -y shell",
		"--mount=type=bind,from=oslayer-repos,target=/run/oslayer/repos.d",
		"ostree container commit",
		"usbguard_ipsec.conf",
	} {
		if !strings.Contains(g, want) {
			t.Errorf("generated Containerfile lacks %q:\n%s", want, g)
		}
	}
	// Without repositories nothing is mounted; without extensions or a
	// kernel type there is no install step.
	cf, err = Generate(Inputs{Containerfile: []byte("FROM packages\nRUN true\n")})
	if err != nil {
		t.Fatal(err)
	}
	if g := string(cf.Generated); strings.Contains(g, "--mount") || strings.Contains(g, "install") || strings.Contains(g, "rpm -q") {
		t.Fatalf("generated steps without extensions or kernelType:\n%s", g)
	}
	if !strings.HasSuffix(string(cf.Bytes()), "\nFROM packages\nRUN true\n") {
		t.Fatalf("user Containerfile not appended:\n%s", cf.Bytes())
	}
}

func TestUserContainerfileBuildsOnThePackageBase(t *testing.T) {
	ok := []string{
		"FROM packages\nRUN rpm -i /agent.rpm\n",
		"# comment\nFROM configs AS final\nRUN true\n",
		"ARG V=1\nFROM --platform=linux/amd64 registry.example/builder:1 AS build\nRUN make\nFROM packages\nCOPY --from=build /out /usr/lib/agent\n",
		"FROM packages AS one\nRUN true\nFROM one AS two\nFROM two\n",
		"FROM packages\nRUN <<EOF\ncat > /etc/x <<X\nFROM other\nX\nEOF\n",
		"FROM packages\nRUN echo a \\\n  FROM b\n",
	}
	for _, s := range ok {
		if err := checkUser([]byte(s), "cf"); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	}
	bad := map[string]string{
		"RUN true\n":                         "cf: no FROM",
		"FROM packages\n\nFROM fedora\n":     "cf line 3: the final stage is FROM fedora",
		"FROM fedora AS packages\n":          "cf line 1: stage name packages is taken",
		"FROM a AS b\nFROM b AS a\nFROM a\n": "cf line 3:",
		"FROM --platform=x\n":                "cf line 1: FROM without an image",
	}
	for s, want := range bad {
		if err := checkUser([]byte(s), "cf"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", s, err, want)
		}
	}
}

func TestLocateNamesTheFileAndLine(t *testing.T) {
	cf, err := Generate(Inputs{Extensions: []string{"sysstat"}, Containerfile: []byte("FROM packages\nRUN false\n"), ContainerfileName: "agent.Containerfile"})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(cf.Bytes()), "\n")
	for i, l := range lines {
		switch l {
		case "RUN false":
			if got := cf.Locate(i + 1); got != "agent.Containerfile line 2" {
				t.Fatalf("Locate(%d) = %q", i+1, got)
			}
		case "FROM ${OSLAYER_BASE} AS packages":
			if got := cf.Locate(i + 1); got != "generated Containerfile line 3" {
				t.Fatalf("Locate(%d) = %q", i+1, got)
			}
		}
	}
}

// runSteps runs the generated RUN steps with sh, the shell the build runs
// them with, on a PATH that holds only dir (and sh's own builtins).
func runSteps(t *testing.T, cf *Containerfile, dir string) (string, error) {
	t.Helper()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	var out strings.Builder
	for _, in := range parse(cf.Generated) {
		if in.cmd != "RUN" {
			continue
		}
		args := in.args
		for len(args) > 0 && strings.HasPrefix(args[0], "--mount") {
			args = args[1:]
		}
		script := strings.Join(args, " ")
		if strings.Contains(script, "usbguard_ipsec") || strings.Contains(script, "ostree container commit") {
			continue // these write to the root file system
		}
		cmd := exec.Command(sh, "-c", script)
		cmd.Env = []string{"PATH=" + dir}
		b, err := cmd.CombinedOutput()
		out.Write(b)
		if err != nil {
			return out.String(), err
		}
	}
	return out.String(), nil
}

func TestGeneratedStepsRunInSh(t *testing.T) {
	cf, err := Generate(Inputs{Extensions: []string{"kerberos"}, KernelType: "realtime"})
	if err != nil {
		t.Fatal(err)
	}
	// A base with neither rpm-ostree nor dnf: the extension step fails
	// saying so.
	out, err := runSteps(t, cf, t.TempDir())
	if err == nil || !strings.Contains(out, "oslayer: extensions: the base has neither rpm-ostree nor dnf") {
		t.Fatalf("without package tools: %v\n%s", err, out)
	}
	// A base with dnf and the default kernel: dnf installs the extension's
	// packages and swaps the kernel in one transaction. The tools here
	// record their arguments and input.
	dir := t.TempDir()
	log := filepath.Join(dir, "log")
	tool := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	tool("dnf", `echo "dnf $*" >> `+log+`; if [ "$2" = shell ]; then while read -r l; do echo "  $l" >> `+log+`; done; fi`)
	tool("rpm", `[ "$2" = kernel ]`)
	if out, err := runSteps(t, cf, dir); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	want := "dnf -y install krb5-workstation libkadm5\n" +
		"dnf -y shell\n" +
		"  remove kernel kernel-core kernel-modules kernel-modules-core kernel-modules-extra\n" +
		"  install kernel-rt-core kernel-rt-modules kernel-rt-modules-extra kernel-rt-kvm\n" +
		"  run\n"
	if string(b) != want {
		t.Fatalf("commands run:\n%s\nwant:\n%s", b, want)
	}
	// A base already on the realtime kernel needs no swap.
	os.Remove(log)
	tool("rpm", `[ "$2" = kernel-rt-core ]`)
	if out, err := runSteps(t, cf, dir); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if b, _ := os.ReadFile(log); string(b) != "dnf -y install krb5-workstation libkadm5\n" {
		t.Fatalf("realtime base: commands run:\n%s", b)
	}
}

// ARGs before the user's first FROM stay global: they come before the
// generated part, and their lines are located in the user's file.
func TestUserGlobalArgs(t *testing.T) {
	user := []byte("# syntax=docker/dockerfile:1\nARG BUILDER=registry.example.com/builder:1\n\nFROM ${BUILDER} AS build\nRUN make\nFROM packages\nCOPY --from=build /out/agent /usr/bin/agent\n")
	cf, err := Generate(Inputs{Containerfile: user, ContainerfileName: "agent.Containerfile", Arch: "amd64"})
	if err != nil {
		t.Fatal(err)
	}
	all := string(cf.Bytes())
	if !strings.HasPrefix(all, "# syntax=docker/dockerfile:1\nARG BUILDER=registry.example.com/builder:1\n\n# Generated by oslayer") {
		t.Fatalf("preamble not first:\n%s", all)
	}
	lines := strings.Split(all, "\n")
	want := map[string]string{
		"ARG BUILDER=registry.example.com/builder:1": "agent.Containerfile line 2",
		"ARG " + BaseArg:                              "generated Containerfile line 2",
		"FROM ${BUILDER} AS build":                    "agent.Containerfile line 4",
		"COPY --from=build /out/agent /usr/bin/agent": "agent.Containerfile line 7",
	}
	for i, l := range lines {
		if w, ok := want[l]; ok {
			if got := cf.Locate(i + 1); got != w {
				t.Errorf("Locate(%d) %q = %q, want %q", i+1, l, got, w)
			}
			delete(want, l)
		}
	}
	if len(want) != 0 {
		t.Errorf("lines not found: %v\n%s", want, all)
	}
}

// TestDescribeNamesWhatTheUserWrote: a package layer is named by the
// extensions, the kernel type and the user's steps that change files.
func TestDescribeNamesWhatTheUserWrote(t *testing.T) {
	c := &Containerfile{
		Packages: []string{"usbguard"}, KernelType: KernelRealtime, UserName: "agent.Containerfile",
		User: []byte("ARG V=1\nFROM packages\n# the agent\nCOPY agent.rpm /tmp/\nRUN rpm -i /tmp/agent.rpm && \\\n    rm /tmp/agent.rpm\nLABEL a=b\n"),
	}
	want := "extensions: usbguard; kernelType: realtime; agent.Containerfile: COPY agent.rpm /tmp/; RUN rpm -i /tmp/agent.rpm && rm /tmp/agent.rpm"
	if got := c.Describe(); got != want {
		t.Errorf("Describe:\n got %q\nwant %q", got, want)
	}
}
