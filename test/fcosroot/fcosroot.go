// Package fcosroot is a small Fedora CoreOS / RHCOS-shaped root tree for
// tests that run the real node tools on it (ignition-apply, systemctl,
// systemd-tmpfiles, ostree): the /var symlinks (/opt, /usr/local, /root,
// /home, /srv, /mnt), passwd/group with core, OS units with their real
// [Install] sections, the OS presets and the enablement links they give, a
// kernel under /usr/lib/modules. It is written as a directory (WriteTree) or
// as a one-layer OCI layout base labelled like an ostree-native image
// (WriteBase).
package fcosroot

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/oslayer/oslayer/test/synth"
)

// Entry is one path of the FCOS-shaped root skeleton.
type Entry struct {
	path, link, data string
	typ              byte
	mode             int64
	uid, gid         int
}

func dir(p string, mode int64) Entry { return Entry{path: p, typ: tar.TypeDir, mode: mode} }
func sym(p, t string) Entry          { return Entry{path: p, link: t, typ: tar.TypeSymlink, mode: 0o777} }
func file(p string, mode int64, data string) Entry {
	return Entry{path: p, data: data, typ: tar.TypeReg, mode: mode}
}

// Kernel is the skeleton's kernel release (label ostree.linux).
const Kernel = "6.15.9-201.fc42.x86_64"

// unit is an OS-shipped unit file with its [Install] section (empty: a
// static unit), as Fedora CoreOS / RHCOS packages ship it.
func unit(name, install string) Entry {
	body := "[Unit]\nDescription=" + name + " (OS-shipped)\n\n[Service]\nExecStart=/usr/bin/true\n"
	switch filepath.Ext(name) {
	case ".target":
		body = "[Unit]\nDescription=" + name + " (OS-shipped)\n"
	case ".socket":
		body = "[Unit]\nDescription=" + name + " (OS-shipped)\n\n[Socket]\nListenStream=/run/" + name + "\n"
	case ".timer":
		body = "[Unit]\nDescription=" + name + " (OS-shipped)\n\n[Timer]\nOnCalendar=weekly\n"
	}
	if install != "" {
		body += "\n[Install]\n" + install
	}
	return file("usr/lib/systemd/system/"+name, 0o644, body)
}

// enabled is an enablement link the OS compose created from its presets.
func enabled(wants, name string) Entry {
	return sym("etc/systemd/system/"+wants+"/"+name, "/usr/lib/systemd/system/"+name)
}

// Skeleton is an FCOS/RHCOS-shaped root: the /var symlinks (/opt,
// /usr/local, /root, /home, /srv, /mnt), passwd/group with core, OS units
// with their real [Install] sections, the OS presets and the enablement
// links those presets give (test/oracle/ignition checks that with systemctl preset-all).
func Skeleton() []Entry {
	const wants = "multi-user.target.wants"
	return []Entry{
		dir("etc", 0o755),
		file("etc/passwd", 0o644, "root:x:0:0:root:/root:/bin/bash\n"+
			"chrony:x:994:992:chrony system user:/var/lib/chrony:/sbin/nologin\n"+
			"sshd:x:74:74:Privilege-separated SSH:/usr/share/empty.sshd:/usr/sbin/nologin\n"+
			"core:x:1000:1000:CoreOS Admin:/var/home/core:/bin/bash\n"+
			"containers:x:993:991:User for housing the sub ID range for containers:/var/home/containers:/sbin/nologin\n"),
		file("etc/group", 0o644, "root:x:0:\nwheel:x:10:core\nadm:x:4:core\nsudo:x:16:core\n"+
			"chrony:x:992:\nsshd:x:74:\ncore:x:1000:\ncontainers:x:991:\n"),
		file("etc/os-release", 0o644, "NAME=\"Fedora Linux\"\nID=fedora\nVERSION_ID=42\nVARIANT_ID=coreos\n"),
		file("etc/chrony.conf", 0o644, "pool 2.fedora.pool.ntp.org iburst\n"),
		dir("etc/containers", 0o755),
		file("etc/containers/policy.json", 0o644, "{\"default\":[{\"type\":\"insecureAcceptAnything\"}]}\n"),
		dir("etc/crio", 0o755),
		dir("etc/crio/crio.conf.d", 0o755),
		file("etc/crio/crio.conf.d/00-default", 0o644, "[crio]\n"),
		dir("etc/kubernetes", 0o755),
		dir("etc/ssh", 0o755),
		file("etc/ssh/sshd_config", 0o600, "Include /etc/ssh/sshd_config.d/*.conf\n"),
		dir("etc/systemd", 0o755),
		file("etc/systemd/journald.conf", 0o644, "[Journal]\n"),
		dir("etc/systemd/system", 0o755),
		dir("etc/systemd/system/"+wants, 0o755),
		enabled(wants, "sshd.service"),
		enabled(wants, "chronyd.service"),
		enabled(wants, "zincati.service"),
		enabled(wants, "NetworkManager.service"),
		sym("etc/systemd/system/dbus-org.freedesktop.NetworkManager.service", "/usr/lib/systemd/system/NetworkManager.service"),
		dir("etc/systemd/system/timers.target.wants", 0o755),
		enabled("timers.target.wants", "fstrim.timer"),
		dir("etc/systemd/system/sockets.target.wants", 0o755),
		enabled("sockets.target.wants", "sshd.socket"),
		dir("etc/tmpfiles.d", 0o755),

		sym("home", "var/home"),
		sym("mnt", "var/mnt"),
		sym("opt", "var/opt"),
		sym("root", "var/roothome"),
		sym("srv", "var/srv"),
		sym("ostree", "sysroot/ostree"),
		dir("sysroot", 0o755),
		dir("boot", 0o755),
		dir("run", 0o755),
		dir("tmp", 0o1777),

		dir("usr", 0o755),
		dir("usr/bin", 0o755),
		sym("bin", "usr/bin"),
		sym("sbin", "usr/sbin"),
		sym("lib", "usr/lib"),
		sym("lib64", "usr/lib64"),
		dir("usr/sbin", 0o755),
		dir("usr/lib64", 0o755),
		sym("usr/local", "../var/usrlocal"),
		dir("usr/lib", 0o755),
		file("usr/lib/os-release", 0o644, "NAME=\"Fedora Linux\"\nID=fedora\nVERSION_ID=42\nVARIANT_ID=coreos\n"),
		dir("usr/lib/modules", 0o755),
		dir("usr/lib/modules/"+Kernel, 0o755),
		file("usr/lib/modules/"+Kernel+"/vmlinuz", 0o755, "not a kernel\n"),
		dir("usr/lib/systemd", 0o755),
		dir("usr/lib/systemd/system-preset", 0o755),
		file("usr/lib/systemd/system-preset/40-coreos.preset", 0o644,
			"enable sshd.service\nenable sshd.socket\nenable zincati.service\nenable fstrim.timer\n"),
		file("usr/lib/systemd/system-preset/90-default.preset", 0o644,
			"enable chronyd.service\nenable NetworkManager.service\ndisable nfs-server.service\n"),
		file("usr/lib/systemd/system-preset/99-default.preset", 0o644, "disable *\n"),
		dir("usr/lib/systemd/system", 0o755),
		unit("multi-user.target", ""),
		sym("usr/lib/systemd/system/default.target", "multi-user.target"),
		unit("basic.target", ""),
		unit("sockets.target", ""),
		unit("timers.target", ""),
		unit("network-online.target", ""),
		unit("getty.target", ""),
		unit("sshd.service", "WantedBy=multi-user.target\n"),
		unit("sshd.socket", "WantedBy=sockets.target\n"),
		unit("chronyd.service", "WantedBy=multi-user.target\n"),
		unit("chrony-wait.service", "WantedBy=multi-user.target\n"),
		unit("zincati.service", "WantedBy=multi-user.target\n"),
		unit("fstrim.timer", "WantedBy=timers.target\n"),
		unit("NetworkManager.service", "WantedBy=multi-user.target\nAlias=dbus-org.freedesktop.NetworkManager.service\n"),
		unit("nfs-server.service", "WantedBy=multi-user.target\n"),
		unit("crio.service", "WantedBy=multi-user.target\n"),
		unit("openvswitch.service", "WantedBy=multi-user.target\n"),
		unit("ovsdb-server.service", ""),
		unit("ovs-vswitchd.service", ""),
		unit("ipsec.service", "WantedBy=multi-user.target\n"),
		unit("openvswitch-ipsec.service", "WantedBy=multi-user.target\n"),
		unit("rpm-ostreed.service", ""),
		unit("docker.socket", "WantedBy=sockets.target\n"),
		unit("docker.service", "WantedBy=multi-user.target\n"),
		unit("systemd-journald.service", ""),
		unit("usbguard.service", "WantedBy=basic.target\n"),
		unit("auditd.service", "WantedBy=multi-user.target\n"),
		dir("usr/lib/tmpfiles.d", 0o755),
		// What rpm-ostree's autovar and FCOS's tmpfiles create on boot.
		file("usr/lib/tmpfiles.d/fcos-var.conf", 0o644, "d /var/opt 0755 root root -\n"+
			"d /var/usrlocal 0755 root root -\nd /var/usrlocal/bin 0755 root root -\n"+
			"d /var/roothome 0700 root root -\nd /var/home 0755 root root -\n"+
			"d /var/srv 0755 root root -\nd /var/mnt 0755 root root -\n"+
			"d /var/lib 0755 root root -\nd /var/log 0755 root root -\n"),
		dir("usr/share", 0o755),

		dir("var", 0o755),
	}
}

// WriteTree writes entries under root with their modes and owners.
func WriteTree(t testing.TB, root string, es []Entry) {
	t.Helper()
	for _, e := range es {
		p := filepath.Join(root, e.path)
		var err error
		switch e.typ {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeSymlink:
			err = os.Symlink(e.link, p)
		default:
			err = os.WriteFile(p, []byte(e.data), 0o600)
		}
		if err == nil && e.typ != tar.TypeSymlink {
			if err = os.Lchown(p, e.uid, e.gid); err == nil {
				// tar.Header converts the 07000 bits to os.FileMode flags.
				err = os.Chmod(p, (&tar.Header{Mode: e.mode}).FileInfo().Mode()&(os.ModePerm|os.ModeSetuid|os.ModeSetgid|os.ModeSticky))
			}
		}
		if err != nil {
			t.Fatalf("skeleton %s: %v", e.path, err)
		}
	}
}

var epoch = time.Date(2025, 9, 1, 0, 0, 0, 0, time.UTC)

// WriteBase writes the skeleton as a one-layer OCI layout (tag "latest")
// labelled like an ostree-native base, the way oslayer finds FCOS.
func WriteBase(t testing.TB, dir string, es []Entry) {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range es {
		h := &tar.Header{Name: e.path, Typeflag: e.typ, Mode: e.mode, Linkname: e.link,
			Uid: e.uid, Gid: e.gid, ModTime: epoch, Format: tar.FormatPAX}
		if e.typ == tar.TypeDir {
			h.Name += "/"
		}
		if e.typ == tar.TypeReg {
			h.Size = int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.data)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	l := synth.TarLayer(t, buf.Bytes())
	diffID, err := l.DiffID()
	if err != nil {
		t.Fatal(err)
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.ConfigFile(img, &v1.ConfigFile{
		Architecture: "amd64", OS: "linux", Created: v1.Time{Time: epoch},
		RootFS: v1.RootFS{Type: "layers"},
		Config: v1.Config{Labels: map[string]string{
			"containers.bootc":                 "1",
			"ostree.bootable":                  "1",
			"ostree.linux":                     Kernel,
			"ostree.final-diffid":              diffID.String(),
			"org.opencontainers.image.version": "42.20250901.3.0",
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	img, err = mutate.Append(img, mutate.Addendum{Layer: l, MediaType: types.OCILayer,
		History: v1.History{Created: v1.Time{Time: epoch}, CreatedBy: "FCOS-shaped skeleton"}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": "latest"})); err != nil {
		t.Fatal(err)
	}
}
