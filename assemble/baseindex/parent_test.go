package baseindex

import (
	"archive/tar"
	"context"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/oslayer/oslayer/test/synth"
)

// An image built on another (a package base on its official base) is
// indexed from the parent's index plus its own layers: the same index as
// reading every layer, with only the added layers read. A parent that is
// not a prefix is ignored; a hardlink into the ostree object store the
// parent's tree leaves out fails Build, and Resolve then reads every layer.
func TestBuildFromParent(t *testing.T) {
	const u = "usr/lib/systemd/system/"
	parentImg := image(t,
		[]te{
			{name: u + "a.service", data: unit, typ: tar.TypeReg},
			{name: "usr/bin/tool", data: "x", typ: tar.TypeReg},
			{name: "etc/passwd", data: "root:x:0:0::/root:/bin/sh\n", typ: tar.TypeReg},
		},
	)
	added := []te{
		{name: u + ".wh.a.service", typ: tar.TypeReg},
		{name: u + "agent.service", data: unit, typ: tar.TypeReg},
		{name: "etc/passwd", data: "root:x:0:0::/root:/bin/sh\nagent:x:990:990::/:/sbin/nologin\n", typ: tar.TypeReg},
	}
	child, err := mutate.AppendLayers(parentImg, synth.TarLayer(t, tarBytes(t, added...)))
	if err != nil {
		t.Fatal(err)
	}
	parent := build(t, parentImg)
	full := build(t, child)
	ix, st, err := Build(context.Background(), child, Options{Parent: parent})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := child.Manifest()
	if ix.Digest != full.Digest || st.Layers != 1 || st.BytesRead != m.Layers[1].Size {
		t.Fatalf("from the parent: index %s (full %s), stats %+v", ix.Digest, full.Digest, st)
	}
	// Not a prefix: every layer is read.
	other := build(t, image(t, []te{{name: "x", data: "x", typ: tar.TypeReg}}))
	if ix, st, err := Build(context.Background(), child, Options{Parent: other}); err != nil || ix.Digest != full.Digest || st.Layers != 2 {
		t.Fatalf("unrelated parent: %v %+v", err, st)
	}
	// A hardlink into the object store the parent's index leaves out.
	ost := image(t, []te{
		{name: "sysroot/ostree/repo/objects/ab/cdef.file", data: "obj", typ: tar.TypeReg},
		{name: "usr/bin/obj", link: "sysroot/ostree/repo/objects/ab/cdef.file", typ: tar.TypeLink},
	})
	ostChild, err := mutate.AppendLayers(ost, synth.TarLayer(t, tarBytes(t,
		te{name: "usr/bin/obj2", link: "sysroot/ostree/repo/objects/ab/cdef.file", typ: tar.TypeLink})))
	if err != nil {
		t.Fatal(err)
	}
	ostParent := build(t, ost)
	if _, _, err := Build(context.Background(), ostChild, Options{Parent: ostParent}); err == nil || !strings.Contains(err.Error(), "hardlink") {
		t.Fatalf("hardlink into the parent's object store: %v", err)
	}
	res, err := (&Resolver{Build: Options{Parent: ostParent}}).Resolve(context.Background(), ostChild)
	if err != nil || res.Stats.Layers != 2 {
		t.Fatalf("resolve falls back to every layer: %+v %v", res, err)
	}
	if e, ok := res.Index.Lookup("usr/bin/obj2"); !ok || e.Type != TypeFile {
		t.Fatalf("usr/bin/obj2: %+v", e)
	}
}
