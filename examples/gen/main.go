// Command gen writes the example base image of the oslayer repository: a
// tiny OCI image layout shaped like an ostree-native OS image (Fedora
// CoreOS): a /usr tree with a kernel under usr/lib/modules/KVER/, systemd
// units with [Install] sections, sysroot/, the ostree symlinks (/ostree,
// /opt -> var/opt, /usr/local -> ../var/usrlocal), the labels nodes and
// tools look for (containers.bootc, ostree.bootable, ostree.final-diffid,
// ostree.linux, org.opencontainers.image.version), three gzip layers and
// fixed times. It boots nothing: it is the smallest base that oslayer build,
// preflight, skopeo and umoci treat like the real thing.
//
// The output is a pure function of this file (the gzip implementation is
// pinned in go.mod), so the committed layout can be checked byte for byte:
//
//	go run ./examples/gen -out examples/base
package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/klauspost/compress/gzip"
)

// KernelRelease is the kernel the example base ships (label ostree.linux).
const KernelRelease = "6.15.9-201.fc42.x86_64"

// Version is the example base's org.opencontainers.image.version.
const Version = "42.20250901.3.0"

// Tag is the tag of the image in the layout's index.json.
const Tag = "latest"

// epoch is the time of every tar entry, history entry and the config.
var epoch = time.Date(2025, 9, 1, 0, 0, 0, 0, time.UTC)

func main() {
	out := flag.String("out", "examples/base", "directory to write the OCI layout to (replaced)")
	flag.Parse()
	if err := generate(*out); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

type entry struct {
	name, link, data string
	typ              byte
	mode             int64
}

func dir(n string, mode int64) entry { return entry{name: n + "/", typ: tar.TypeDir, mode: mode} }
func sym(n, t string) entry          { return entry{name: n, link: t, typ: tar.TypeSymlink, mode: 0o777} }
func file(n string, mode int64, data string) entry {
	return entry{name: n, data: data, typ: tar.TypeReg, mode: mode}
}

type layer struct {
	name    string
	entries []entry
}

const osRelease = `NAME="Fedora Linux"
VERSION="42.20250901.3.0 (CoreOS)"
ID=fedora
VERSION_ID=42
PLATFORM_ID="platform:f42"
PRETTY_NAME="Fedora CoreOS 42.20250901.3.0 (oslayer example base)"
HOME_URL="https://fedoraproject.org/coreos/"
VARIANT="CoreOS"
VARIANT_ID=coreos
OSTREE_VERSION='42.20250901.3.0'
`

func unit(desc, exec, install string) string {
	s := "[Unit]\nDescription=" + desc + "\n\n[Service]\nExecStart=" + exec + "\n"
	if install != "" {
		s += "\n[Install]\n" + install + "\n"
	}
	return s
}

func content() []layer {
	root := layer{name: "root filesystem skeleton", entries: []entry{
		sym("bin", "usr/bin"),
		dir("boot", 0o755),
		dir("dev", 0o755),
		dir("etc", 0o755),
		file("etc/hostname", 0o644, "localhost\n"),
		sym("etc/os-release", "../usr/lib/os-release"),
		dir("etc/sysctl.d", 0o755),
		dir("etc/systemd", 0o755),
		dir("etc/systemd/system", 0o755),
		sym("home", "var/home"),
		sym("lib", "usr/lib"),
		sym("lib64", "usr/lib64"),
		sym("media", "run/media"),
		sym("mnt", "var/mnt"),
		sym("opt", "var/opt"),
		sym("ostree", "sysroot/ostree"),
		dir("proc", 0o555),
		sym("root", "var/roothome"),
		dir("run", 0o755),
		sym("sbin", "usr/sbin"),
		sym("srv", "var/srv"),
		dir("sys", 0o555),
		dir("sysroot", 0o755),
		dir("sysroot/ostree", 0o755),
		dir("tmp", 0o1777),
		dir("usr", 0o755),
		dir("usr/bin", 0o755),
		dir("usr/lib", 0o755),
		file("usr/lib/os-release", 0o644, osRelease),
		dir("usr/lib/tmpfiles.d", 0o755),
		file("usr/lib/tmpfiles.d/ostree-var.conf", 0o644,
			"d /var/home 0755 root root -\nd /var/opt 0755 root root -\nd /var/roothome 0700 root root -\nd /var/srv 0755 root root -\nd /var/usrlocal 0755 root root -\nd /var/usrlocal/bin 0755 root root -\nd /var/mnt 0755 root root -\n"),
		dir("usr/lib64", 0o755),
		sym("usr/local", "../var/usrlocal"),
		dir("usr/sbin", 0o755),
		dir("usr/share", 0o755),
		dir("var", 0o755),
	}}
	system := layer{name: "systemd units and tools", entries: []entry{
		file("usr/bin/containerd", 0o755, "#!/bin/sh\necho 'containerd (example stub)'\n"),
		file("usr/bin/rpm-ostree", 0o755, "#!/bin/sh\necho 'rpm-ostree (example stub)'\n"),
		dir("usr/lib/systemd", 0o755),
		dir("usr/lib/systemd/system", 0o755),
		file("usr/lib/systemd/system/chronyd.service", 0o644, unit("NTP client/server", "/usr/sbin/chronyd -n", "WantedBy=multi-user.target")),
		file("usr/lib/systemd/system/containerd.service", 0o644,
			"[Unit]\nDescription=containerd container runtime\nAfter=network.target\n\n[Service]\nExecStart=/usr/bin/containerd\nDelegate=yes\nKillMode=process\nRestart=always\n\n[Install]\nWantedBy=multi-user.target\n"),
		file("usr/lib/systemd/system/crio.service", 0o644, unit("Container Runtime Interface for OCI (CRI-O)", "/usr/bin/crio", "WantedBy=multi-user.target")),
		file("usr/lib/systemd/system/multi-user.target", 0o644, "[Unit]\nDescription=Multi-User System\nRequires=basic.target\n"),
		file("usr/lib/systemd/system/sshd.service", 0o644, unit("OpenSSH server daemon", "/usr/sbin/sshd -D", "WantedBy=multi-user.target")),
		file("usr/lib/systemd/system/systemd-sysctl.service", 0o644, unit("Apply Kernel Variables", "/usr/lib/systemd/systemd-sysctl", "")),
		dir("usr/lib/sysctl.d", 0o755),
		file("usr/lib/sysctl.d/50-default.conf", 0o644, "kernel.sysrq = 16\nnet.ipv4.conf.default.rp_filter = 2\n"),
	}}
	kernel := layer{name: "kernel " + KernelRelease, entries: []entry{
		dir("usr/lib/modules", 0o755),
		dir("usr/lib/modules/"+KernelRelease, 0o755),
		file("usr/lib/modules/"+KernelRelease+"/initramfs.img", 0o644, "example initramfs for "+KernelRelease+"\n"),
		file("usr/lib/modules/"+KernelRelease+"/vmlinuz", 0o755, "example kernel "+KernelRelease+"\n"),
	}}
	return []layer{root, system, kernel}
}

type desc struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int               `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

func tarGzip(l layer) (gz []byte, diffID string, err error) {
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	for _, e := range l.entries {
		h := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: e.mode,
			Size: int64(len(e.data)), ModTime: epoch, Format: tar.FormatUSTAR}
		if err := tw.WriteHeader(h); err != nil {
			return nil, "", fmt.Errorf("%s: %w", e.name, err)
		}
		if _, err := tw.Write([]byte(e.data)); err != nil {
			return nil, "", err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, "", err
	}
	var zb bytes.Buffer
	zw, err := gzip.NewWriterLevel(&zb, gzip.BestCompression)
	if err != nil {
		return nil, "", err
	}
	if _, err := zw.Write(tb.Bytes()); err != nil {
		return nil, "", err
	}
	if err := zw.Close(); err != nil {
		return nil, "", err
	}
	return zb.Bytes(), digest(tb.Bytes()), nil
}

// hist is one config history entry.
type hist struct {
	Created   string `json:"created"`
	CreatedBy string `json:"created_by"`
}

// blobSet holds the layout's blobs by digest.
type blobSet map[string][]byte

// add stores b and returns its digest.
func (bs blobSet) add(b []byte) string {
	d := digest(b)
	bs[d] = b
	return d
}

// generate writes the layout into out (removing what was there).
func generate(out string) error {
	blobs := blobSet{}
	var layerDescs []desc
	var diffIDs []string
	var history []hist
	for _, l := range content() {
		gz, diffID, err := tarGzip(l)
		if err != nil {
			return fmt.Errorf("layer %q: %w", l.name, err)
		}
		layerDescs = append(layerDescs, desc{MediaType: "application/vnd.oci.image.layer.v1.tar+gzip", Digest: blobs.add(gz), Size: len(gz)})
		diffIDs = append(diffIDs, diffID)
		history = append(history, hist{Created: epoch.Format(time.RFC3339), CreatedBy: "examples/gen: " + l.name})
	}
	cfg, err := json.Marshal(imageConfig(diffIDs, history))
	if err != nil {
		return err
	}
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        desc{MediaType: "application/vnd.oci.image.config.v1+json", Digest: blobs.add(cfg), Size: len(cfg)},
		"layers":        layerDescs,
	})
	if err != nil {
		return err
	}
	index, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.index.v1+json",
		"manifests": []desc{{MediaType: "application/vnd.oci.image.manifest.v1+json", Digest: blobs.add(manifest), Size: len(manifest),
			Annotations: map[string]string{"org.opencontainers.image.ref.name": Tag}}},
	})
	if err != nil {
		return err
	}
	return writeLayout(out, index, blobs)
}

// imageConfig is the base's image config: an ostree-native OS image's
// labels, the layers' diff IDs and history.
func imageConfig(diffIDs []string, history []hist) map[string]any {
	commit := sha256.Sum256([]byte("oslayer example base " + Version))
	return map[string]any{
		"architecture": "amd64",
		"os":           "linux",
		"created":      epoch.Format(time.RFC3339),
		"config": map[string]any{
			"Env": []string{"container=oci", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin"},
			"Cmd": []string{"/sbin/init"},
			"Labels": map[string]string{
				"containers.bootc":                 "1",
				"ostree.bootable":                  "true",
				"ostree.commit":                    hex.EncodeToString(commit[:]),
				"ostree.final-diffid":              diffIDs[len(diffIDs)-1],
				"ostree.linux":                     KernelRelease,
				"org.opencontainers.image.version": Version,
				"org.opencontainers.image.title":   "oslayer example base (ostree-native shape, boots nothing)",
				"com.coreos.osname":                "fedora-coreos",
			},
		},
		"rootfs":  map[string]any{"type": "layers", "diff_ids": diffIDs},
		"history": history,
	}
}

// writeLayout replaces out with the layout: oci-layout, index.json and
// the blobs.
func writeLayout(out string, index []byte, blobs blobSet) error {
	if err := os.RemoveAll(out); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(out, "blobs", "sha256"), 0o755); err != nil {
		return err
	}
	files := map[string][]byte{
		"oci-layout": []byte(`{"imageLayoutVersion":"1.0.0"}` + "\n"),
		"index.json": append(index, '\n'),
	}
	for d, b := range blobs {
		files[filepath.Join("blobs", "sha256", d[len("sha256:"):])] = b
	}
	for n, b := range files {
		if err := os.WriteFile(filepath.Join(out, n), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
