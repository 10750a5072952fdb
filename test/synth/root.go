package synth

import (
	"archive/tar"
	"bytes"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Entry is one path of an FCOS-shaped root: the tree every synthetic base
// carries in its first layer, and Skeleton.
type Entry struct {
	name, link, data string
	typ              byte
	mode             int64
	uid, gid         int
}

func dir(n string, mode int64) Entry {
	return Entry{name: strings.TrimSuffix(n, "/") + "/", typ: tar.TypeDir, mode: mode}
}
func sym(n, t string) Entry { return Entry{name: n, link: t, typ: tar.TypeSymlink, mode: 0o777} }
func file(n string, mode int64, data string) Entry {
	return Entry{name: n, data: data, typ: tar.TypeReg, mode: mode}
}

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

// Skeleton is the FCOS/RHCOS-shaped root for tests that run the real node
// tools on it (ignition-apply, systemctl, systemd-tmpfiles, ostree): the
// root tree of the synthetic bases (the ostree symlinks, the kernel under
// /usr/lib/modules, os-release) plus passwd/group with core, more /var
// symlinks (/srv, /mnt), a sticky /tmp, OS units with their real [Install]
// sections, the OS presets and the enablement links those presets give
// (test/oracle/ignition checks that with systemctl preset-all), and the
// tmpfiles that create /var's directories on boot.
func Skeleton() []Entry {
	const wants = "multi-user.target.wants"
	return merge(tree(), []Entry{
		file("etc/passwd", 0o644, "root:x:0:0:root:/root:/bin/bash\n"+
			"chrony:x:994:992:chrony system user:/var/lib/chrony:/sbin/nologin\n"+
			"sshd:x:74:74:Privilege-separated SSH:/usr/share/empty.sshd:/usr/sbin/nologin\n"+
			"core:x:1000:1000:CoreOS Admin:/var/home/core:/bin/bash\n"+
			"containers:x:993:991:User for housing the sub ID range for containers:/var/home/containers:/sbin/nologin\n"),
		file("etc/group", 0o644, "root:x:0:\nwheel:x:10:core\nadm:x:4:core\nsudo:x:16:core\n"+
			"chrony:x:992:\nsshd:x:74:\ncore:x:1000:\ncontainers:x:991:\n"),
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

		sym("mnt", "var/mnt"),
		sym("srv", "var/srv"),
		dir("tmp", 0o1777),
		dir("usr/lib64", 0o755),

		dir("usr/lib/systemd/system-preset", 0o755),
		file("usr/lib/systemd/system-preset/40-coreos.preset", 0o644,
			"enable sshd.service\nenable sshd.socket\nenable zincati.service\nenable fstrim.timer\n"),
		file("usr/lib/systemd/system-preset/90-default.preset", 0o644,
			"enable chronyd.service\nenable NetworkManager.service\ndisable nfs-server.service\n"),
		file("usr/lib/systemd/system-preset/99-default.preset", 0o644, "disable *\n"),
		unit("multi-user.target", ""),
		sym("usr/lib/systemd/system/default.target", "multi-user.target"),
		unit("basic.target", ""),
		unit("sockets.target", ""),
		unit("timers.target", ""),
		unit("network-online.target", ""),
		unit("getty.target", ""),
		unit("sshd.service", "WantedBy=multi-user.target\n"),
		unit("sshd.socket", "WantedBy=sockets.target\n"),
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
	})
}

// merge returns base with each of more replacing the entry of its path in
// place, or appended when base has none.
func merge(base, more []Entry) []Entry {
	out := append([]Entry(nil), base...)
	at := map[string]int{}
	for i, e := range out {
		at[path.Clean(e.name)] = i
	}
	for _, e := range more {
		if i, ok := at[path.Clean(e.name)]; ok {
			out[i] = e
			continue
		}
		at[path.Clean(e.name)] = len(out)
		out = append(out, e)
	}
	return out
}

// WriteTree writes entries under root (made when missing) with their
// modes and owners.
func WriteTree(t testing.TB, root string, es []Entry) {
	t.Helper()
	for _, e := range es {
		p := filepath.Join(root, e.name)
		err := os.MkdirAll(filepath.Dir(p), 0o755)
		switch {
		case err != nil:
		case e.typ == tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case e.typ == tar.TypeSymlink:
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
			t.Fatalf("skeleton %s: %v", e.name, err)
		}
	}
}

// WriteBase writes entries as a one-layer OCI layout (tag "latest")
// labelled like an ostree-native base, the way oslayer finds FCOS.
func WriteBase(t testing.TB, dir string, es []Entry) {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := writeEntries(tw, es); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	l := TarLayer(t, buf.Bytes())
	diffID, err := l.DiffID()
	if err != nil {
		t.Fatal(err)
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.ConfigFile(img, &v1.ConfigFile{
		Architecture: "amd64", OS: "linux", Created: v1.Time{Time: Epoch},
		RootFS: v1.RootFS{Type: "layers"},
		Config: v1.Config{Labels: map[string]string{
			"containers.bootc":                 "1",
			"ostree.bootable":                  "1",
			"ostree.linux":                     KernelRelease,
			"ostree.final-diffid":              diffID.String(),
			"org.opencontainers.image.version": Version,
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	img, err = mutate.Append(img, mutate.Addendum{Layer: l, MediaType: types.OCILayer,
		History: v1.History{Created: v1.Time{Time: Epoch}, CreatedBy: "FCOS-shaped skeleton"}})
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
