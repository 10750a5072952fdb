package preflight

import (
	"archive/tar"
	"context"
	"fmt"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/oslayer/oslayer/test/synth"
)

func cleanLayer(t testing.TB) v1.Layer {
	return tarLayer(t, dir("usr/"), dir("usr/bin/"), file("usr/bin/hello", "#!/bin/sh\necho hi\n"),
		dir("etc/"), file("etc/sysctl.d/99-k8s.conf", "net.ipv4.ip_forward = 1\n"))
}

func TestBaseLayersPresent(t *testing.T) {
	b := newBase(t, 6, 1, fcosLabels)
	added := cleanLayer(t)
	ok := derive(t, b.img, added)
	c := baseLayersCheck{}
	t.Run("pass", func(t *testing.T) {
		rep := run(t, Target{Image: ok, Base: b.img, BaseRef: "base"}, only(c, Options{}))
		assertFindings(t, rep.Findings, nil)
		if rep.Checks[0].Status != "passed" {
			t.Errorf("status %q", rep.Checks[0].Status)
		}
	})
	d := func(i int) string { return mustDigest(t, b.layers[i]) }
	sh := func(i int) string { return d(i)[:19] }
	rebuild := func(layers ...v1.Layer) v1.Image {
		var adds []mutate.Addendum
		for _, l := range layers {
			adds = append(adds, mutate.Addendum{Layer: l, History: v1.History{CreatedBy: "x"}})
		}
		return derive(t, b.assemble(t, fcosLabels, adds), added)
	}
	L := b.layers
	other := tarLayer(t, file("usr/share/other", "x"))
	cases := []struct {
		name string
		img  v1.Image
		want []Finding
	}{
		{"dropped", rebuild(L[0], L[1], L[3], L[4], L[5]), []Finding{{Check: c.Name(), Severity: Error, Layer: d(2),
			Message: fmt.Sprintf("base layer 2 of base (%s, diff_id %s) is missing from the image", sh(2), diffShort(t, L[2]))}}},
		{"reordered", rebuild(L[0], L[1], L[3], L[2], L[4], L[5]), []Finding{
			{Check: c.Name(), Severity: Error, Layer: d(2), Message: fmt.Sprintf("base layer 2 of base (%s) moved to index 3 of the image", sh(2))},
			{Check: c.Name(), Severity: Error, Layer: d(3), Message: fmt.Sprintf("base layer 3 of base (%s) moved to index 2 of the image", sh(3))}}},
		{"replaced", rebuild(L[0], L[1], other, L[3], L[4], L[5]), []Finding{{Check: c.Name(), Severity: Error, Layer: mustDigest(t, other),
			Message: fmt.Sprintf("base layer 2 of base (%s) was replaced: the image has %s at index 2", sh(2), mustDigest(t, other)[:19])}}},
		{"inserted", rebuild(L[0], L[1], other, L[2], L[3], L[4], L[5]), []Finding{{Check: c.Name(), Severity: Error, Layer: mustDigest(t, other),
			Message: fmt.Sprintf("image layer 2 (%s) is not a layer of base but sits among its layers: the base layers must come first, unbroken", mustDigest(t, other)[:19])}}},
		{"rebuilt base", derive(t, newBase(t, 6, 2, fcosLabels).img, added), []Finding{{Check: c.Name(), Severity: Error,
			Field: "base", Message: "none of the 6 layers of base (base) are in the image: it was built from a different or rebuilt base; rebuild it FROM base"}}},
		{"truncated", rebuild(L[0], L[1]), []Finding{
			{Check: c.Name(), Severity: Error, Layer: d(2), Message: fmt.Sprintf("base layer 2 of base (%s, diff_id %s) is missing from the image", sh(2), diffShort(t, L[2]))},
			{Check: c.Name(), Severity: Error, Layer: d(3), Message: fmt.Sprintf("base layer 3 of base (%s, diff_id %s) is missing from the image", sh(3), diffShort(t, L[3]))},
			{Check: c.Name(), Severity: Error, Layer: d(4), Message: fmt.Sprintf("base layer 4 of base (%s, diff_id %s) is missing from the image", sh(4), diffShort(t, L[4]))},
			{Check: c.Name(), Severity: Error, Layer: d(5), Message: fmt.Sprintf("base layer 5 of base (%s, diff_id %s) is missing from the image", sh(5), diffShort(t, L[5]))}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rep := run(t, Target{Image: tc.img, Base: b.img, BaseRef: "base"}, only(c, Options{}))
			assertFindings(t, rep.Findings, tc.want)
		})
	}
	t.Run("require-base", func(t *testing.T) {
		official := b
		customer := derive(t, official.img, tarLayer(t, file("usr/share/customer", "c")))
		pool := derive(t, customer, added)
		rep := run(t, Target{Image: pool, Base: customer, BaseRef: "customer", Require: official.img, RequireRef: "official"}, only(c, Options{}))
		assertFindings(t, rep.Findings, nil)
		forged := derive(t, rebuild(L[0], L[1], L[2], L[3], L[4]), added)
		rep = run(t, Target{Image: forged, Require: official.img, RequireRef: "official"}, only(c, Options{}))
		assertFindings(t, rep.Findings, []Finding{{Check: c.Name(), Severity: Error, Layer: d(5),
			Message: fmt.Sprintf("base layer 5 of official (%s, diff_id %s) is missing from the image", sh(5), diffShort(t, L[5]))}})
	})
	if n := b.reads.Load(); n != 0 {
		t.Errorf("base layer blobs read %d times", n)
	}
}

func diffShort(t testing.TB, l v1.Layer) string {
	h, err := l.DiffID()
	if err != nil {
		t.Fatal(err)
	}
	return h.String()[:19]
}

func withLabels(t testing.TB, img v1.Image, set map[string]string, del ...string) v1.Image {
	t.Helper()
	return synth.WithConfig(t, img, func(cf *v1.ConfigFile) {
		for k, v := range set {
			cf.Config.Labels[k] = v
		}
		for _, k := range del {
			delete(cf.Config.Labels, k)
		}
	})
}

func TestBootable(t *testing.T) {
	b := newBase(t, 2, 1, fcosLabels)
	img := derive(t, b.img, cleanLayer(t))
	c := bootableCheck{}
	rep := run(t, Target{Image: img}, only(c, Options{}))
	assertFindings(t, rep.Findings, nil)
	rep = run(t, Target{Image: withLabels(t, img, nil, "ostree.bootable")}, only(c, Options{}))
	assertFindings(t, rep.Findings, nil) // containers.bootc alone is enough
	rep = run(t, Target{Image: withLabels(t, img, nil, "ostree.bootable", "containers.bootc")}, only(c, Options{}))
	assertFindings(t, rep.Findings, []Finding{{Check: "bootable", Severity: Error, Message: "config has neither label ostree.bootable nor containers.bootc: nodes refuse to boot it; build FROM an ostree-native base image (Fedora CoreOS, RHCOS, a bootc image) and keep its labels"}})
}

func withArch(t testing.TB, img v1.Image, arch string) v1.Image {
	t.Helper()
	return synth.WithConfig(t, img, func(cf *v1.ConfigFile) { cf.Architecture = arch })
}

func TestPlatform(t *testing.T) {
	b := newBase(t, 2, 1, fcosLabels)
	img := derive(t, b.img, cleanLayer(t))
	c := platformCheck{}
	rep := run(t, Target{Image: img, Base: b.img, BaseRef: "base"}, only(c, Options{Arch: "x86_64"}))
	assertFindings(t, rep.Findings, nil)
	rep = run(t, Target{Image: img, Base: b.img, BaseRef: "base"}, only(c, Options{Arch: "arm64"}))
	assertFindings(t, rep.Findings, []Finding{{Check: "platform", Severity: Error, Field: "arch", Message: "image is linux/amd64 but nodes are arm64 (arch arm64): build from the arm64 variant of the base"}})
	rep = run(t, Target{Image: withArch(t, img, "arm64"), Base: b.img, BaseRef: "base"}, only(c, Options{}))
	assertFindings(t, rep.Findings, []Finding{{Check: "platform", Severity: Error, Message: "image is linux/arm64 but its base base is linux/amd64"}})
}

func TestVersion(t *testing.T) {
	b := newBase(t, 2, 1, fcosLabels)
	img := derive(t, b.img, cleanLayer(t))
	c := versionCheck{}
	rep := run(t, Target{Image: img, Base: b.img, BaseRef: "base"}, only(c, Options{ExpectVersion: "43"}))
	assertFindings(t, rep.Findings, nil)
	rep = run(t, Target{Image: img}, only(c, Options{ExpectVersion: "43.20260301.20.dev1"}))
	assertFindings(t, rep.Findings, nil)
	rep = run(t, Target{Image: img}, only(c, Options{ExpectVersion: "42"}))
	assertFindings(t, rep.Findings, []Finding{{Check: "version", Severity: Error, Message: "image version org.opencontainers.image.version=43.20260301.20.dev1 is not compatible with the expected 42 (preflight.expectVersion): rebuild on the 42 base", Field: "preflight.expectVersion"}})
	rhcos := withLabels(t, img, map[string]string{"version": "9.6.20250101-0"}, "org.opencontainers.image.version")
	rep = run(t, Target{Image: rhcos}, only(c, Options{ExpectVersion: "9.6"}))
	assertFindings(t, rep.Findings, nil)
	rep = run(t, Target{Image: withLabels(t, img, map[string]string{"ostree.linux": "6.19.0-100.fc43.x86_64"}), Base: b.img, BaseRef: "base"}, only(c, Options{}))
	assertFindings(t, rep.Findings, []Finding{{Check: "version", Severity: Error, Message: `image kernel label ostree.linux="6.19.0-100.fc43.x86_64" differs from its base base ("6.18.13-200.fc43.x86_64"): the label must name the kernel the image boots`}})
	rep = run(t, Target{Image: withLabels(t, img, nil, "org.opencontainers.image.version")}, only(c, Options{ExpectVersion: "43"}))
	assertFindings(t, rep.Findings, []Finding{{Check: "version", Severity: Error, Message: "image has no org.opencontainers.image.version (or version) label, expected version 43 (preflight.expectVersion)", Field: "preflight.expectVersion"}})
}

func TestFormat(t *testing.T) {
	b := newBase(t, 3, 1, fcosLabels)
	c := formatCheck{}
	img := derive(t, b.img, cleanLayer(t))
	rep := run(t, Target{Image: img}, only(c, Options{}))
	assertFindings(t, rep.Findings, nil)

	zl := static.NewLayer([]byte("not really zstd"), types.OCILayerZStd)
	rep = run(t, Target{Image: derive(t, b.img, zl)}, only(c, Options{}))
	assertFindings(t, rep.Findings, []Finding{{Check: "format", Severity: Warning, Layer: mustDigest(t, zl), Message: "layer 3 is zstd-compressed (application/vnd.oci.image.layer.v1.tar+zstd): older nodes cannot pull it; use gzip"}})

	rep = run(t, Target{Image: mutate.MediaType(img, types.DockerManifestSchema1Signed)}, only(c, Options{}))
	assertFindings(t, rep.Findings, []Finding{{Check: "format", Severity: Error, Message: "manifest is Docker schema1 (application/vnd.docker.distribution.manifest.v1+prettyjws): nodes cannot pull it; push it again as OCI (skopeo copy --format oci)"}})

}

// TestLayers: the layer count against the default and the configured
// limits, and one history entry per layer.
func TestLayers(t *testing.T) {
	b := newBase(t, 3, 1, fcosLabels)
	c := layersCheck{}
	img := derive(t, b.img, cleanLayer(t))
	rep := run(t, Target{Image: img}, only(c, Options{}))
	assertFindings(t, rep.Findings, nil)
	if want := (LayerCount{Layers: 4, History: 4, WarnAbove: 127, ErrorAt: 500}); rep.Layers != want {
		t.Errorf("layer count %+v, want %+v", rep.Layers, want)
	}

	trunc := synth.WithConfig(t, img, func(cf *v1.ConfigFile) { cf.History = cf.History[:2] })
	rep = run(t, Target{Image: trunc}, only(c, Options{}))
	assertFindings(t, rep.Findings, []Finding{{Check: "layers", Severity: Error, Rule: "history", Message: `config history has 2 non-empty entries for 4 layers: bootc refuses it ("Truncated history"); add a history entry for every layer`}})
	extra := synth.WithConfig(t, img, func(cf *v1.ConfigFile) { cf.History = append(cf.History, v1.History{CreatedBy: "LABEL a=b"}) })
	rep = run(t, Target{Image: extra}, only(c, Options{}))
	assertFindings(t, rep.Findings, []Finding{{Check: "layers", Severity: Warning, Rule: "history", Message: "config history has 5 non-empty entries for 4 layers: tools that pair history entries with layers describe the wrong layers; mark entries without a layer empty_layer"}})

	var many []v1.Layer
	for i := 0; i < 125; i++ {
		many = append(many, tarLayer(t, file(fmt.Sprintf("usr/share/l%d", i), "x")))
	}
	img = derive(t, b.img, many...) // 128 layers
	rep = run(t, Target{Image: img}, only(c, Options{}))
	assertFindings(t, rep.Findings, []Finding{{Check: "layers", Severity: Warning, Rule: "count", Message: "image has 128 layers, more than 127 (preflight.warnLayers): docker pull and other clients limited to 127 layers fail on it; bootc and rpm-ostree pull it", Field: "preflight.warnLayers"}})
	rep = run(t, Target{Image: derive(t, b.img, many[:124]...)}, only(c, Options{})) // 127 layers
	assertFindings(t, rep.Findings, nil)
	rep = run(t, Target{Image: img}, only(c, Options{MaxLayers: 128}))
	assertFindings(t, rep.Findings, []Finding{{Check: "layers", Severity: Error, Rule: "count", Message: "image has 128 layers, at or above the limit of 128 (preflight.maxLayers): containers-storage cannot store it; use a base with fewer layers (rechunk it with a lower maximum)", Field: "preflight.maxLayers"}})
	rep = run(t, Target{Image: img}, only(c, Options{WarnLayers: 128, MaxLayers: 129}))
	assertFindings(t, rep.Findings, nil)
	if rep.Layers.WarnAbove != 128 || rep.Layers.ErrorAt != 129 {
		t.Errorf("configured limits reported as %+v", rep.Layers)
	}
}

func TestSize(t *testing.T) {
	b := newBase(t, 2, 1, fcosLabels)
	l := cleanLayer(t)
	img := derive(t, b.img, l)
	sz, _ := l.Size()
	c := sizeCheck{}
	rep := run(t, Target{Image: img, Base: b.img}, only(c, Options{MaxAddedBytes: sz}))
	assertFindings(t, rep.Findings, nil)
	rep = run(t, Target{Image: img, Base: b.img}, only(c, Options{MaxAddedBytes: sz - 1}))
	assertFindings(t, rep.Findings, []Finding{{Check: "size", Severity: Error, Message: fmt.Sprintf("the 1 added layers are %d bytes compressed, over the budget of %d (preflight.maxAddedBytes): move large content out of the image or raise the budget", sz, sz-1), Field: "preflight.maxAddedBytes"}})
}

// contentFinding is a content finding in layer l.
func cf(l v1.Layer, t testing.TB, rule string, sev Severity, path, msg string) Finding {
	return Finding{Check: "content", Severity: sev, Rule: rule, Layer: mustDigest(t, l), Path: path, Message: msg}
}

func TestContent(t *testing.T) {
	b := newBase(t, 2, 1, fcosLabels)
	c := contentCheck{}
	t.Run("pass", func(t *testing.T) {
		l := tarLayer(t, dir("usr/"), file("usr/bin/hello", "x"), dir("run/"), dir("tmp/"), dir("var/"), dir("var/lib/"), dir("var/lib/kubelet/"),
			file("etc/hostname", "node1\n"), file("usr/lib/bootc/kargs.d/10-pool.toml", "# pool\nkargs = [\"console=ttyS0\", 'nosmt']\nmatch-architectures = [\n  \"x86_64\",\n]\n"),
			ent{name: "usr/bin/hello2", typ: tar.TypeLink, link: "usr/bin/hello"}, symlink("var/run", "../run"))
		rep := run(t, Target{Image: derive(t, b.img, l), Base: b.img}, only(c, Options{}))
		assertFindings(t, rep.Findings, nil)
	})
	t.Run("fail", func(t *testing.T) {
		l := tarLayer(t,
			file("run/.containerenv", ""),
			file("tmp/build.log", "x"),
			file("boot/vmlinuz", "x"),
			dir("sysroot/"),
			file("usr/etc/foo.conf", "x"),
			dir("proc/"), file("proc/x", "y"),
			file("var/lib/kubelet/config.yaml", "x"),
			file("var/log/dnf.log", "x"),
			file("usr/share/caf\xe9", "x"),
			ent{name: "usr/share/fifo", typ: tar.TypeFifo, mode: 0o644},
			ent{name: "usr/share/dev0", typ: tar.TypeChar, mode: 0o644},
			ent{name: "usr/bin/kubectl", typ: tar.TypeLink, link: "usr/bin/kubelet"},
			ent{name: "usr/bin/tool", typ: tar.TypeReg, mode: 0o755, uid: 1000, gid: 1000},
			ent{name: "usr/bin/labelled", typ: tar.TypeReg, mode: 0o755, pax: map[string]string{"SCHILY.xattr.security.selinux": "system_u:object_r:bin_t:s0"}},
			file("usr/lib/modules/6.19.0-100.fc43.x86_64/vmlinuz", "kernel"),
			file("usr/lib/bootc/kargs.d/10-bad.toml", "kargs = [\"a\"]\nfoo = 1\n"),
			file("usr/lib/bootc/kargs.d/20-bad.toml", "kargs = \"nosmt\"\n"),
			file("etc/resolv.conf", ""),
			file("etc/hostname", ""),
		)
		rep := run(t, Target{Image: derive(t, b.img, l), Base: b.img}, only(c, Options{}))
		want := []Finding{
			cf(l, t, "nonempty-run-tmp", Warning, "run/.containerenv", "run/ is a tmpfs on the node: this entry is dropped; remove it from the layer (create it at runtime with a tmpfiles.d rule)"),
			cf(l, t, "nonempty-run-tmp", Warning, "tmp/build.log", "tmp/ is a tmpfs on the node: this entry is dropped; remove it from the layer (create it at runtime with a tmpfiles.d rule)"),
			cf(l, t, "nonempty-boot", Warning, "boot/vmlinuz", "boot/ content of a layer is masked on the node: it is never installed; remove it"),
			cf(l, t, "sysroot", Error, "sysroot", "sysroot/ must never appear in a layer: it is the physical root of the node; remove it"),
			cf(l, t, "etc-usretc", Error, "usr/etc/foo.conf", "usr/etc/ is where ostree keeps the image's /etc: never write it; put the file under etc/"),
			cf(l, t, "api-base-directories", Error, "proc/x", "proc/ is an API filesystem: content under it is dropped; remove it from the layer"),
			cf(l, t, "var-tmpfiles", Warning, "var/lib/kubelet/config.yaml", "var/ content only lands on the first deployment and is never updated; ship it under usr/ and create it with a usr/lib/tmpfiles.d rule (L+ or C)"),
			cf(l, t, "var-log", Warning, "var/log/dnf.log", "var/log content only lands on the first deployment and mixes with the node's logs; remove it"),
			cf(l, t, "utf8", Error, "usr/share/caf\uFFFD", `name "usr/share/caf\xe9" (or its link target) is not valid UTF-8: ostree refuses it; rename the file`),
			cf(l, t, "special-files", Error, "usr/share/fifo", "FIFO entries are refused by ostree: only directories, regular files and symlinks; remove it"),
			cf(l, t, "special-files", Error, "usr/share/dev0", "character device entries are refused by ostree: only directories, regular files and symlinks; remove it"),
			cf(l, t, "hardlinks", Error, "usr/bin/kubectl", `hard link to "usr/bin/kubelet", which is not an earlier entry of this layer: ostree cannot import it; copy the file or use a symlink`),
			cf(l, t, "usr-owner", Warning, "usr/bin/tool", "owned by 1000:1000: files under usr/ should be root-owned; fix the owner (COPY --chown=0:0) or use usr/lib/sysusers.d and tmpfiles.d"),
			cf(l, t, "selinux-xattr", Warning, "usr/bin/labelled", "carries a security.selinux xattr: labels come from the node's policy; build without --preserve xattrs"),
			cf(l, t, "bootc-kargs", Error, "usr/lib/bootc/kargs.d/10-bad.toml", `invalid kernel arguments file: line 2: unknown key "foo" (only kargs and match-architectures); bootc refuses to deploy it`),
			cf(l, t, "bootc-kargs", Error, "usr/lib/bootc/kargs.d/20-bad.toml", "invalid kernel arguments file: line 1: kargs must be an array of strings; bootc refuses to deploy it"),
			cf(l, t, "buildah-injected", Warning, "etc/resolv.conf", "empty file left by the build tool (buildah/podman inject it during RUN): remove it, it would hide the node's own"),
			cf(l, t, "buildah-injected", Warning, "etc/hostname", "empty file left by the build tool (buildah/podman inject it during RUN): remove it, it would hide the node's own"),
			cf(l, t, "kernel", Error, "usr/lib/modules/6.19.0-100.fc43.x86_64/vmlinuz", "the image has 2 kernels under usr/lib/modules (6.18.13-200.fc43.x86_64, 6.19.0-100.fc43.x86_64): exactly one is allowed; remove the base kernel (usr/lib/modules/6.18.13-200.fc43.x86_64) when installing another"),
		}
		assertFindings(t, rep.Findings, want)
	})
	t.Run("symlinked and unknown top-level dirs", func(t *testing.T) {
		l := tarLayer(t,
			symlink("opt", "var/opt"),
			dir("opt/"), file("opt/bin/kubelet", "x"),
			file("usr/local/bin/tool", "x"),
			file("root/.bashrc", "x"),
			file("bin/helper", "x"),
			symlink("lib", "usr/lib"),
			file("data/blob", "x"),
			dir("."),
		)
		rep := run(t, Target{Image: derive(t, b.img, l), Base: b.img}, only(c, Options{}))
		want := []Finding{
			cf(l, t, "var-symlinks", Warning, "opt", "/opt is a symlink to /var/opt on Fedora CoreOS and RHCOS: this entry replaces the link or only lands on the first deployment; ship it under usr/ (e.g. usr/lib/NAME, usr/bin) instead"),
			cf(l, t, "var-symlinks", Warning, "opt/bin/kubelet", "/opt is a symlink to /var/opt on Fedora CoreOS and RHCOS: this entry replaces the link or only lands on the first deployment; ship it under usr/ (e.g. usr/lib/NAME, usr/bin) instead"),
			cf(l, t, "var-symlinks", Warning, "usr/local/bin/tool", "/usr/local is a symlink to /var/usrlocal on Fedora CoreOS and RHCOS: this entry replaces the link or only lands on the first deployment; ship it under usr/ (e.g. usr/lib/NAME, usr/bin) instead"),
			cf(l, t, "var-symlinks", Warning, "root/.bashrc", "/root is a symlink to /var/roothome on Fedora CoreOS and RHCOS: this entry replaces the link or only lands on the first deployment; ship it under usr/ (e.g. usr/lib/NAME, usr/bin) instead"),
			cf(l, t, "usrmerge", Error, "bin/helper", "/bin is a symlink to /usr/bin: write the entry under usr/bin instead"),
			cf(l, t, "toplevel", Warning, "data/blob", "top-level directory /data only survives on composefs bases; put the content under usr/"),
		}
		assertFindings(t, rep.Findings, want)
	})
	t.Run("sysusers", func(t *testing.T) {
		l := tarLayer(t, file("etc/passwd", "root:x:0:0::/root:/bin/bash\nkube:x:1000:1000::/var/home/kube:/bin/bash\n"), file("usr/lib/sysusers.d/kube.conf", "u kube 1000\n"))
		rep := run(t, Target{Image: derive(t, b.img, l), Base: b.img}, only(c, Options{}))
		assertFindings(t, rep.Findings, []Finding{cf(l, t, "sysusers", Warning, "etc/passwd", "users and groups added by editing /etc/passwd or /etc/group do not merge with the node's own (ostree 3-way merge keeps the local file); declare them in usr/lib/sysusers.d/*.conf")})
	})
	t.Run("kernel replaced", func(t *testing.T) {
		l := tarLayer(t, file("usr/lib/modules/.wh.6.18.13-200.fc43.x86_64", ""), file("usr/lib/modules/6.19.0-100.fc43.x86_64/vmlinuz", "kernel"))
		rep := run(t, Target{Image: derive(t, b.img, l), Base: b.img}, only(c, Options{}))
		assertFindings(t, rep.Findings, nil)
	})
	t.Run("cap", func(t *testing.T) {
		var ents []ent
		for i := 0; i < 25; i++ {
			ents = append(ents, file(fmt.Sprintf("var/cache/dnf/f%02d", i), "x"))
		}
		l := tarLayer(t, ents...)
		rep := run(t, Target{Image: derive(t, b.img, l), Base: b.img}, only(c, Options{}))
		if len(rep.Findings) != 21 || rep.Findings[20].Message != "... and 5 more var-tmpfiles findings in this layer" {
			t.Errorf("got %d findings, last %+v", len(rep.Findings), rep.Findings[len(rep.Findings)-1])
		}
	})
}

const testPEM = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n"

func TestSecrets(t *testing.T) {
	b := newBase(t, 2, 1, fcosLabels)
	c := secretsCheck{}
	t.Run("pass", func(t *testing.T) {
		l := tarLayer(t, file("etc/ssh/sshd_config.d/10.conf", "PasswordAuthentication no\n"),
			file("usr/share/doc/readme", "set token: in your kubeconfig\n"),
			file("etc/containers/auth.json", `{"auths":{}}`),
			file("etc/pki/tls/certs/ca.pem", "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"))
		rep := run(t, Target{Image: derive(t, b.img, l), Base: b.img}, only(c, Options{}))
		assertFindings(t, rep.Findings, nil)
	})
	t.Run("fail", func(t *testing.T) {
		l := tarLayer(t,
			file("root/.ssh/id_ed25519", testPEM),
			file("etc/kubernetes/kubelet.kubeconfig", "apiVersion: v1\nkind: Config\nusers:\n- name: kubelet\n  user:\n    token: abc.def\n"),
			file("var/lib/kubelet/auth.json", `{"auths":{"quay.io":{"auth":"dXNlcjpwYXNz"}}}`),
			file("root/.aws/credentials", "[default]\naws_access_key_id = AKIAEXAMPLE\naws_secret_access_key = abc\n"),
			file("etc/gcp/sa.json", `{"type": "service_account", "private_key": "-----BEGIN PRIVATE KEY-----\nabc\n-----END PRIVATE KEY-----\n"}`),
			file("etc/pki/tls/private/server.key", "-----BEGIN RSA PRIVATE KEY-----\nabc\n-----END RSA PRIVATE KEY-----\n"),
			// Relocated by oslayer: allowed by their node paths, as
			// configured (/opt/x is /var/opt/x on the node), by a glob,
			// or by the path in the image; or not allowed.
			file("usr/lib/oslayer/var/var/lib/kubelet/config.json", `{"auths":{"quay.io":{"auth":"dXNlcjpwYXNz"}}}`),
			file("usr/lib/oslayer/var/var/opt/agent/key.pem", testPEM),
			file("usr/lib/oslayer/var/var/lib/a/b.key", testPEM),
			file("usr/lib/oslayer/var/var/lib/c/d.key", testPEM),
			file("usr/lib/oslayer/var/var/lib/e/f.key", testPEM),
		)
		rep := run(t, Target{Image: derive(t, b.img, l), Base: b.img}, only(c, Options{AllowSecrets: []string{"/etc/pki/tls/private/*.key",
			"/var/lib/kubelet/config.json", "/opt/agent/key.pem", "var/lib/a/*.key", "/usr/lib/oslayer/var/var/lib/c/d.key"}}))
		msg := func(kind, p string) string {
			return "holds " + kind + ": everyone who can pull the image can read it; deliver it at runtime (a Secret, ignition) or allow it with preflight.allowSecrets /" + p
		}
		dg := mustDigest(t, l)
		want := []Finding{
			{Check: "secrets", Severity: Error, Layer: dg, Path: "root/.ssh/id_ed25519", Field: "preflight.allowSecrets", Message: msg("an OpenSSH private key", "root/.ssh/id_ed25519")},
			{Check: "secrets", Severity: Error, Layer: dg, Path: "etc/kubernetes/kubelet.kubeconfig", Field: "preflight.allowSecrets", Message: msg("a kubeconfig with credentials (token or client-key-data)", "etc/kubernetes/kubelet.kubeconfig")},
			{Check: "secrets", Severity: Error, Layer: dg, Path: "var/lib/kubelet/auth.json", Field: "preflight.allowSecrets", Message: msg("registry credentials (auths for quay.io)", "var/lib/kubelet/auth.json")},
			{Check: "secrets", Severity: Error, Layer: dg, Path: "root/.aws/credentials", Field: "preflight.allowSecrets", Message: msg("AWS credentials (aws_secret_access_key)", "root/.aws/credentials")},
			{Check: "secrets", Severity: Error, Layer: dg, Path: "etc/gcp/sa.json", Field: "preflight.allowSecrets", Message: msg("a GCP service account key", "etc/gcp/sa.json")},
			{Check: "secrets", Severity: Info, Layer: dg, Path: "etc/pki/tls/private/server.key", Message: "holds a PEM private key, allowed by preflight.allowSecrets /etc/pki/tls/private/*.key", Field: "preflight.allowSecrets"},
			{Check: "secrets", Severity: Info, Layer: dg, Path: "usr/lib/oslayer/var/var/lib/kubelet/config.json", Message: "holds registry credentials (auths for quay.io), allowed by preflight.allowSecrets /var/lib/kubelet/config.json (its node path /var/lib/kubelet/config.json)", Field: "preflight.allowSecrets"},
			{Check: "secrets", Severity: Info, Layer: dg, Path: "usr/lib/oslayer/var/var/opt/agent/key.pem", Message: "holds an OpenSSH private key, allowed by preflight.allowSecrets /opt/agent/key.pem (its node path /var/opt/agent/key.pem)", Field: "preflight.allowSecrets"},
			{Check: "secrets", Severity: Info, Layer: dg, Path: "usr/lib/oslayer/var/var/lib/a/b.key", Message: "holds an OpenSSH private key, allowed by preflight.allowSecrets var/lib/a/*.key (its node path /var/lib/a/b.key)", Field: "preflight.allowSecrets"},
			{Check: "secrets", Severity: Info, Layer: dg, Path: "usr/lib/oslayer/var/var/lib/c/d.key", Message: "holds an OpenSSH private key, allowed by preflight.allowSecrets /usr/lib/oslayer/var/var/lib/c/d.key", Field: "preflight.allowSecrets"},
			{Check: "secrets", Severity: Error, Layer: dg, Path: "usr/lib/oslayer/var/var/lib/e/f.key", Message: "holds an OpenSSH private key: everyone who can pull the image can read it; deliver it at runtime (a Secret, ignition) or allow it with preflight.allowSecrets /var/lib/e/f.key (its node path)", Field: "preflight.allowSecrets"},
		}
		assertFindings(t, rep.Findings, want)
	})
}

func TestUnits(t *testing.T) {
	b := newBase(t, 2, 1, fcosLabels)
	c := unitsCheck{}
	unit := "[Unit]\nDescription=kubelet\n# comment\n[Service]\nExecStart=/usr/bin/kubelet \\\n  --config=/etc/kubernetes/kubelet.yaml \\\n  --v=2\nRestart=always\n\n[Install]\nWantedBy=multi-user.target\n"
	t.Run("pass", func(t *testing.T) {
		l := tarLayer(t,
			file("etc/systemd/system/kubelet.service", unit),
			file("etc/systemd/system/containerd.service.d/10-opts.conf", "[Service]\nEnvironment=A=1\n"),
			symlink("etc/systemd/system/multi-user.target.wants/kubelet.service", "/etc/systemd/system/kubelet.service"),
			symlink("etc/systemd/system/multi-user.target.wants/containerd.service", "/usr/lib/systemd/system/containerd.service"),
			symlink("etc/systemd/system/getty.target.wants/serial-getty@ttyS0.service", "/usr/lib/systemd/system/serial-getty@.service"),
		)
		rep := run(t, Target{Image: derive(t, b.img, l), Base: b.img}, only(c, Options{}))
		assertFindings(t, rep.Findings, nil)
	})
	t.Run("fail", func(t *testing.T) {
		l := tarLayer(t,
			file("etc/systemd/system/bad.service", "ExecStart=/bin/true\n"),
			file("usr/lib/systemd/system/worse.service", "[Service]\nthis is not a key value\n"),
			file("etc/systemd/system/x.service.d/10.conf", "[Service\nA=1\n"),
			symlink("etc/systemd/system/multi-user.target.wants/missing.service", "/etc/systemd/system/missing.service"),
			symlink("etc/systemd/system/multi-user.target.wants/a.service", "/usr/lib/systemd/system/b.service"),
		)
		rep := run(t, Target{Image: derive(t, b.img, l), Base: b.img}, only(c, Options{}))
		dg := mustDigest(t, l)
		want := []Finding{
			{Check: "units", Severity: Error, Layer: dg, Path: "etc/systemd/system/bad.service", Message: "not a valid systemd unit file: line 1: ExecStart= before any [Section]; systemd ignores it"},
			{Check: "units", Severity: Error, Layer: dg, Path: "usr/lib/systemd/system/worse.service", Message: `not a valid systemd unit file: line 2: "this is not a key value" is not KEY=VALUE; systemd ignores it`},
			{Check: "units", Severity: Error, Layer: dg, Path: "etc/systemd/system/x.service.d/10.conf", Message: `not a valid systemd unit file: line 1: invalid section header "[Service"; systemd ignores it`},
			{Check: "units", Severity: Warning, Layer: dg, Path: "etc/systemd/system/multi-user.target.wants/missing.service", Message: "enables missing.service, but no added layer has etc/systemd/system/missing.service and base images do not ship units in /etc: add the unit or drop the link"},
			{Check: "units", Severity: Warning, Layer: dg, Path: "etc/systemd/system/multi-user.target.wants/a.service", Message: "enablement link a.service points to /usr/lib/systemd/system/b.service, a unit of another name"},
		}
		assertFindings(t, rep.Findings, want)
	})
}

func TestParseKargs(t *testing.T) {
	k, a, err := ParseKargs([]byte("kargs = [\"a=\\\"b c\\\"\", 'x\\y'] # c\nmatch-architectures = [\"x86_64\", \"aarch64\",]\n"))
	if err != nil || strings.Join(k, "|") != `a="b c"|x\y` || strings.Join(a, "|") != "x86_64|aarch64" {
		t.Fatalf("got %q %q %v", k, a, err)
	}
	for in, want := range map[string]string{
		"":                                `missing key "kargs"`,
		"[section]\nkargs=[]":             "line 1: tables are not allowed (only the keys kargs and match-architectures)",
		"kargs = [1]":                     "line 1: kargs must be an array of strings",
		"kargs = [\"a\"]\nkargs = []":     `line 2: duplicate key "kargs"`,
		"kargs = [\"a\"":                  "line 1: unterminated array kargs",
		"kargs = [\"a\"] x":               `line 1: unexpected 'x' after the value of "kargs"`,
		"match-architectures = [\"x\"]\n": `missing key "kargs"`,
	} {
		if _, _, err := ParseKargs([]byte(in)); err == nil || err.Error() != want {
			t.Errorf("ParseKargs(%q) = %v, want %s", in, err, want)
		}
	}
}

func TestRunner(t *testing.T) {
	b := newBase(t, 3, 1, fcosLabels)
	l := tarLayer(t, file("var/lib/x", "x"))
	img := derive(t, b.img, l)
	t.Run("final-diffid without base", func(t *testing.T) {
		rep := run(t, Target{Image: img}, Options{})
		if len(rep.AddedLayers) != 1 || rep.AddedLayers[0].Index != 3 || rep.AddedLayers[0].Digest != mustDigest(t, l) {
			t.Fatalf("added layers %+v", rep.AddedLayers)
		}
		if rep.Errors != 0 || rep.Warnings != 1 || findingsOf(rep, "content")[0].Rule != "var-tmpfiles" {
			t.Errorf("report %+v", rep)
		}
		if b.reads.Load() != 0 {
			t.Errorf("base blobs read")
		}
	})
	t.Run("fatal warnings", func(t *testing.T) {
		rep := run(t, Target{Image: img}, Options{FatalWarnings: true})
		if rep.Errors != 1 || rep.Warnings != 0 || rep.Passed() {
			t.Errorf("errors %d warnings %d", rep.Errors, rep.Warnings)
		}
	})
	t.Run("skip", func(t *testing.T) {
		rep := run(t, Target{Image: img}, Options{Skip: []string{"content"}})
		if rep.Warnings != 0 {
			t.Errorf("warnings %d", rep.Warnings)
		}
		for _, cr := range rep.Checks {
			want := "passed"
			switch cr.Name {
			case "content":
				want = "skipped"
			case "base-layers-present", "usr-override":
				want = "skipped" // no base image, no base tree
			}
			if cr.Status != want {
				t.Errorf("%s: %s, want %s", cr.Name, cr.Status, want)
			}
		}
		if _, err := Run(context.Background(), Target{Image: img}, Options{Skip: []string{"nope"}}); err == nil || !strings.Contains(err.Error(), `preflight.skip[0]: "nope": no such check`) {
			t.Errorf("err %v", err)
		}
	})
	t.Run("unknown added layers", func(t *testing.T) {
		rep := run(t, Target{Image: withLabels(t, img, nil, LabelFinalDiffID)}, Options{})
		assertFindings(t, findingsOf(rep, "preflight"), []Finding{{Check: "preflight", Severity: Warning, Rule: "added-layers", Field: "base", Message: "no base image given, no ostree.final-diffid label and no layer oslayer added (config history): the added layers are unknown, content checks are skipped; give the base it was built on (base REF)"}})
		if b.reads.Load() != 0 {
			t.Errorf("base blobs read")
		}
	})
}

func TestScanLimits(t *testing.T) {
	b := newBase(t, 2, 1, fcosLabels)
	var ents []ent
	for i := 0; i < 10; i++ {
		ents = append(ents, file(fmt.Sprintf("usr/share/f%d", i), "x"))
	}
	l := tarLayer(t, ents...)
	rep := run(t, Target{Image: derive(t, b.img, l), Base: b.img}, Options{Scan: ScanLimits{MaxEntries: 4}})
	if rep.AddedLayers[0].Entries != 4 {
		t.Errorf("entries %d, want 4", rep.AddedLayers[0].Entries)
	}
	assertFindings(t, findingsOf(rep, "preflight"), []Finding{{Check: "preflight", Severity: Warning, Rule: "scan-limits", Layer: mustDigest(t, l),
		Message: "the layer has more entries or secret-like content than the scan keeps: some content checks saw only part of it"}})
}

func TestUsrOverride(t *testing.T) {
	b := newBase(t, 2, 1, fcosLabels)
	c := usrOverrideCheck{}
	tree := fstest.MapFS{
		"usr/lib/sysctl.d/50-default.conf": {Data: []byte("kernel.x = 1\n")},
		"usr/bin/crio":                     {Data: []byte("#!/bin/sh\n"), Mode: 0o755},
		"usr/lib/oslayer/manifest.json":    {Data: []byte("{}\n")},
		"usr/lib/systemd/system":           {Mode: fs.ModeDir | 0o755},
	}
	l := tarLayer(t,
		file("usr/lib/sysctl.d/50-default.conf", "kernel.x = 2\n"),
		file("usr/lib/sysctl.d/99-new.conf", "kernel.y = 2\n"),
		symlink("usr/bin/crio", "/usr/local/bin/crio"),
		file("usr/lib/oslayer/manifest.json", "{\"version\":1}\n"),
		dir("usr/lib/systemd/system"),
		file("etc/sysctl.d/99-k8s.conf", "kernel.z = 1\n"),
	)
	img := derive(t, b.img, l)
	dg := mustDigest(t, l)
	want := func(sev Severity) []Finding {
		return []Finding{
			{Check: "usr-override", Severity: sev, Layer: dg, Path: "usr/lib/sysctl.d/50-default.conf", Message: "replaces the base image's file (13 bytes) /usr/lib/sysctl.d/50-default.conf: an OS update no longer changes it"},
			{Check: "usr-override", Severity: sev, Layer: dg, Path: "usr/bin/crio", Message: "replaces the base image's file (10 bytes) /usr/bin/crio: an OS update no longer changes it"},
		}
	}
	rep := run(t, Target{Image: img, Base: b.img, BaseTree: tree}, only(c, Options{}))
	assertFindings(t, rep.Findings, want(Warning))
	rep = run(t, Target{Image: img, Base: b.img, BaseTree: tree}, only(c, Options{DenyUsrOverride: true}))
	assertFindings(t, rep.Findings, want(Error))
	if rep.Passed() {
		t.Error("DenyUsrOverride: the report passed")
	}
	rep = run(t, Target{Image: img, Base: b.img}, only(c, Options{}))
	if len(rep.Findings) != 0 || rep.Checks[0].Status != "skipped" {
		t.Errorf("without a base tree: %+v %+v", rep.Checks, rep.Findings)
	}
}
