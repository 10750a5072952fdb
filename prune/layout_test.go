package prune_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/oslayer/oslayer/prune"
)

// An OCI layout is pruned too: images a moved tag left among its blobs
// are dated by their manifest's write time; the newest --keep, those
// younger than --grace and the tagged ones stay, the others' blobs go.
func TestOCILayout(t *testing.T) {
	dir := t.TempDir()
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	at := map[string]time.Duration{"tagged": 3 * time.Hour, "young1": 10 * time.Minute, "young2": 20 * time.Minute, "old1": 2 * time.Hour, "old2": 5 * time.Hour}
	imgs := map[string]v1.Image{}
	for n, age := range at {
		img := image(t, "worker")
		imgs[n] = img
		if n == "tagged" {
			err = p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": "worker", "kind": "dev.cosignproject.cosign/image"}))
		} else {
			err = p.WriteImage(img)
		}
		if err != nil {
			t.Fatal(err)
		}
		h, _ := img.Digest()
		if err := os.Chtimes(blobPath(dir, h), now.Add(-age), now.Add(-age)); err != nil {
			t.Fatal(err)
		}
	}
	sig := image(t, "")
	if err := p.AppendImage(sig, layout.WithAnnotations(map[string]string{"kind": "dev.cosignproject.cosign/sigs"})); err != nil {
		t.Fatal(err)
	}
	run := func() *prune.Result {
		res, err := prune.Run(context.Background(), prune.Options{Targets: []string{"oci:" + dir},
			Policy: prune.Policy{Keep: 1, Grace: time.Hour, Now: now}, Delete: true})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	res := run()
	want := map[string]string{"tagged": "tagged worker", "young1": "one of the last 1 good images", "young2": "younger than the grace period", "old1": "", "old2": ""}
	for n, why := range want {
		h, _ := imgs[n].Digest()
		im := findHash(t, res, h)
		switch {
		case why == "" && im.Action != prune.ActionDeleted:
			t.Errorf("%s: %s %q, want deleted", n, im.Action, im.Reasons)
		case why != "" && (im.Action != prune.ActionKeep || !strings.Contains(strings.Join(im.Reasons, "; "), why)):
			t.Errorf("%s: %s %q, want kept: %s", n, im.Action, im.Reasons, why)
		}
		_, statErr := os.Stat(blobPath(dir, h))
		if gone := os.IsNotExist(statErr); gone != (why == "") {
			t.Errorf("%s: manifest blob gone %v (stat: %v)", n, gone, statErr)
		}
		cf, _ := imgs[n].ConfigName()
		if _, err := os.Stat(blobPath(dir, cf)); os.IsNotExist(err) != (why == "") {
			t.Errorf("%s: config blob: %v", n, err)
		}
	}
	sh, _ := sig.Digest()
	if _, err := os.Stat(blobPath(dir, sh)); err != nil {
		t.Errorf("the tagged image's signatures: %v", err)
	}
	if res := run(); res.Deleted != 0 {
		t.Errorf("second run deleted %d", res.Deleted)
	}
}

func blobPath(dir string, h v1.Hash) string { return filepath.Join(dir, "blobs", h.Algorithm, h.Hex) }

func findHash(t *testing.T, res *prune.Result, h v1.Hash) *prune.Image {
	t.Helper()
	for _, im := range res.Images {
		if im.Digest == h {
			return im
		}
	}
	t.Fatalf("%s not listed: %v", h, digests(res))
	return nil
}
