// Package pkgbase gives tests of the package stage a real base to build on:
// an image assembled from Debian packages (busybox-static for a shell and
// the usual commands, and rpm with the libraries it links), pushed to a
// test registry, and a 3rd-party RPM built with rpmbuild.
package pkgbase

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/oslayer/oslayer/test/regtest"
)

// Push pushes a base assembled from Debian packages (busybox-static
// for a shell and the usual commands, as links, and any others given) to
// reg and returns it by digest.
func Push(t testing.TB, reg string, pkgs ...string) (string, v1.Hash) {
	t.Helper()
	return PushAuth(t, reg, authn.Anonymous, pkgs...)
}

// PushAuth is Push to a registry that needs the login auth.
func PushAuth(t testing.TB, reg string, auth authn.Authenticator, pkgs ...string) (string, v1.Hash) {
	t.Helper()
	root := t.TempDir()
	extract(t, root, append([]string{"busybox-static"}, pkgs...)...)
	for _, d := range []string{"etc", "tmp", "var/lib/rpm", "proc", "sys", "dev", "run"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, a := range applets {
		os.Symlink("busybox", filepath.Join(root, "bin", a))
	}
	data := tarDir(t, root)
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
	cf.Config.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	// Labelled as a bootable ostree-native base, so oslayer build's
	// preflight accepts images built on it.
	cf.Config.Labels = map[string]string{"ostree.bootable": "true", "containers.bootc": "1"}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(reg+"/os/base:1", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img, remote.WithAuth(auth)); err != nil {
		t.Fatal(err)
	}
	d, _ := img.Digest()
	return reg + "/os/base@" + d.String(), d
}

// applets are the busybox commands a base gets as links.
var applets = []string{"sh", "mkdir", "rm", "printf", "echo", "cat", "cp", "ln", "true", "false", "test", "[", "dd", "head", "ls", "chmod"}

// extract unpacks the Debian packages (downloaded by test/setup.sh) into
// root, skipping the test when one is missing (failing it with
// OSLAYER_REQUIRE_TOOLS=1).
func extract(t testing.TB, root string, pkgs ...string) {
	t.Helper()
	tools := os.Getenv("OSLAYER_TOOLS")
	if tools == "" {
		home, _ := os.UserHomeDir()
		tools = filepath.Join(home, ".cache", "oslayer-tools")
	}
	dpkg := regtest.Require(t, "dpkg-deb")
	for _, pkg := range pkgs {
		debs, _ := filepath.Glob(filepath.Join(tools, "debs", pkg+"_*.deb"))
		if len(debs) == 0 {
			if os.Getenv("OSLAYER_REQUIRE_TOOLS") == "1" {
				t.Fatalf("%s .deb missing under %s/debs (test/setup.sh downloads it)", pkg, tools)
			}
			t.Skipf("%s .deb missing (test/setup.sh downloads it)", pkg)
		}
		regtest.Run(t, nil, dpkg, "-x", debs[len(debs)-1], root)
	}
}

// ShellLayer is an OCI layer that gives a usr-merged base (bin a link to
// usr/bin, as Fedora CoreOS) a shell: busybox-static as usr/bin/busybox
// and links to it for the usual commands.
func ShellLayer(t testing.TB) v1.Layer {
	t.Helper()
	deb := t.TempDir()
	extract(t, deb, "busybox-static")
	root := t.TempDir()
	bin := filepath.Join(root, "usr", "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(deb, "bin", "busybox"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "busybox"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, a := range applets {
		os.Symlink("busybox", filepath.Join(bin, a))
	}
	data := tarDir(t, root)
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
		tarball.WithMediaType(types.OCILayer))
	if err != nil {
		t.Fatal(err)
	}
	return layer
}

// tarDir returns the tree under root as a tar stream (owner root).
func tarDir(t testing.TB, root string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	err := filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		link := ""
		if fi.Mode()&os.ModeSymlink != 0 {
			link, _ = os.Readlink(p)
		}
		h, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		h.Name, h.Uid, h.Gid, h.Uname, h.Gname = filepath.ToSlash(rel), 0, 0, "", ""
		if fi.IsDir() {
			h.Name += "/"
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			_, err = tw.Write(b)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	tw.Close()
	return buf.Bytes()
}

// Unpack unpacks img with umoci (rootless, from an OCI layout it writes
// first) and returns the root directory.
func Unpack(t testing.TB, img v1.Image) string {
	t.Helper()
	umoci := regtest.Require(t, "umoci")
	lp := filepath.Join(t.TempDir(), "layout")
	l, err := layout.Write(lp, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": "image"})); err != nil {
		t.Fatal(err)
	}
	rootfs := filepath.Join(t.TempDir(), "rootfs")
	regtest.Run(t, nil, umoci, "raw", "unpack", "--rootless", "--image", lp+":image", rootfs)
	return rootfs
}

// RPMDebs are the Debian packages that give the test base a working rpm.
var RPMDebs = []string{"rpm", "rpm-common", "librpm9", "librpmio9", "libbz2-1.0", "libc6", "libcap2", "libgcrypt20",
	"libgpg-error0", "liblua5.3-0", "liblzma5", "libpopt0", "libsqlite3-0", "libzstd1", "zlib1g"}

// BuildRPM builds a noarch RPM "agent" 1.2-1 with rpmbuild into dir (as
// agent.rpm) and returns its path: a program /usr/bin/agent and two units,
// agent.service (WantedBy=multi-user.target) and agent-report.service
// (WantedBy=graphical.target).
func BuildRPM(t testing.TB, dir string) string {
	t.Helper()
	rpmbuild := regtest.Require(t, "rpmbuild")
	top := t.TempDir()
	spec := filepath.Join(top, "agent.spec")
	os.WriteFile(spec, []byte(`Name: agent
Version: 1.2
Release: 1
Summary: test security agent
License: MIT
BuildArch: noarch
%description
A test agent.
%install
mkdir -p %{buildroot}/usr/bin %{buildroot}/usr/lib/systemd/system
printf '#!/bin/sh\necho agent\n' > %{buildroot}/usr/bin/agent
chmod 0755 %{buildroot}/usr/bin/agent
printf '[Unit]\nDescription=agent\n[Service]\nExecStart=/usr/bin/agent\n[Install]\nWantedBy=multi-user.target\n' > %{buildroot}/usr/lib/systemd/system/agent.service
printf '[Unit]\nDescription=agent report\n[Service]\nExecStart=/usr/bin/agent report\n[Install]\nWantedBy=graphical.target\n' > %{buildroot}/usr/lib/systemd/system/agent-report.service
%files
/usr/bin/agent
/usr/lib/systemd/system/agent.service
/usr/lib/systemd/system/agent-report.service
`), 0o644)
	regtest.Run(t, nil, rpmbuild, "-bb", "--define", "_topdir "+top, "--define", "_dbpath "+filepath.Join(top, "db"), spec)
	rpms, _ := filepath.Glob(filepath.Join(top, "RPMS", "noarch", "agent-1.2-1.noarch.rpm"))
	if len(rpms) != 1 {
		t.Fatalf("rpmbuild made no agent RPM under %s", top)
	}
	dst := filepath.Join(dir, "agent.rpm")
	b, _ := os.ReadFile(rpms[0])
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dst
}
