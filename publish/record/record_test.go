package record_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/oslayer/oslayer/assemble"
	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/publish/record"
	"github.com/oslayer/oslayer/test/regtest"
)

// The record stage writes a record Debian's docker-registry accepts (an
// OCI manifest with the record as config and no layers) under
// "sha256-HEX.rec", Read reads it back, and the image is untouched.
func TestStageWritesRecord(t *testing.T) {
	regtest.Require(t, "docker-registry")
	r := regtest.Start(t, regtest.Config{})
	repo, err := name.NewRepository(r.Host+"/os/pools", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	img, _ := random.Image(32, 1)
	h, _ := img.Digest()
	d := repo.Digest(h.String())
	if err := remote.Write(d, img); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 28, 9, 0, 0, 123, time.UTC)
	s := &record.Stage{Registry: &registry.Options{}, Version: "v1.2.3", Now: func() time.Time { return at }}
	p := &assemble.Published{Ref: d.String(), Digest: &d}
	b := &assemble.Built{Digest: h, Pool: "worker", InputsDigest: "sha256:in", Base: assemble.Base{Digest: v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("b", 64)}}}
	out, err := s.Run(context.Background(), b, p)
	if err != nil {
		t.Fatal(err)
	}
	res := out.(*record.Result)
	if res.Tag != repo.Tag("sha256-"+h.Hex+".rec").String() || p.Record == nil || p.Record.Digest.String() != res.Digest {
		t.Fatalf("result %+v, published record %+v", res, p.Record)
	}
	got, rd, err := record.Read(context.Background(), &registry.Options{}, repo, h)
	if err != nil || got == nil {
		t.Fatalf("read: %v %v", got, err)
	}
	want := record.Record{Image: h, Time: at, Builder: "oslayer", Version: "v1.2.3", Pool: "worker", InputsDigest: "sha256:in", BaseDigest: "sha256:" + strings.Repeat("b", 64)}
	if *got != want || rd != p.Record.Digest {
		t.Errorf("read %+v (%s), want %+v (%s)", *got, rd, want, p.Record.Digest)
	}
	if after, _ := img.Digest(); after != h {
		t.Errorf("image digest changed")
	}
	// No record: nothing, no error.
	if got, _, err := record.Read(context.Background(), &registry.Options{}, repo, v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("c", 64)}); got != nil || err != nil {
		t.Errorf("missing record: %v %v", got, err)
	}
}

// An OCI layout target gets no record (prune dates a layout's images by
// their manifest's write time).
func TestStageLayoutNoRecord(t *testing.T) {
	out, err := (&record.Stage{}).Run(context.Background(), &assemble.Built{}, &assemble.Published{Ref: "oci:x@sha256:" + strings.Repeat("a", 64)})
	if out != nil || err != nil {
		t.Errorf("%v %v", out, err)
	}
}

// Parse refuses what is not a record, naming what is wrong.
func TestParseRefuses(t *testing.T) {
	for _, c := range []struct{ mf, want string }{
		{`{"schemaVersion":2,"config":{"mediaType":"application/vnd.oci.image.config.v1+json"}}`, "artifactType"},
		{`{"artifactType":"` + record.ArtifactType + `","annotations":{"io.oslayer.record.image":"sha256:x"}}`, "io.oslayer.record.image"},
		{`{"artifactType":"` + record.ArtifactType + `","annotations":{"io.oslayer.record.image":"sha256:` + strings.Repeat("a", 64) + `","io.oslayer.record.time":"yesterday"}}`, "io.oslayer.record.time"},
		{`[`, "build record"},
	} {
		if _, err := record.Parse([]byte(c.mf)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.mf, err, c.want)
		}
	}
}
