package controller_test

import (
	"bytes"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/oslayer/oslayer/api/v1alpha1"
	"github.com/oslayer/oslayer/controller"
)

// TestPoolImageRef: poolimage:NS/NAME@N and @published parse, anything
// else is refused naming the form; an index resolves to its history
// entry, and one past the history, a failed build or nothing published
// is an error naming the PoolImage and the field.
func TestPoolImageRef(t *testing.T) {
	for _, bad := range []string{"poolimage:ns/name", "poolimage:name@0", "poolimage:/name@0", "poolimage:ns/@0", "poolimage:ns/name@-1", "poolimage:ns/name@x", "ns/name@0"} {
		if _, err := controller.ParsePoolImageRef(bad); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
	ref, err := controller.ParsePoolImageRef("poolimage:ns/name@2")
	if err != nil || ref.Key.Namespace != "ns" || ref.Key.Name != "name" || ref.Index != 2 {
		t.Fatalf("%+v, %v", ref, err)
	}
	if ref, err = controller.ParsePoolImageRef("poolimage:ns/name@published"); err != nil || ref.Index != -1 {
		t.Fatalf("%+v, %v", ref, err)
	}
	pi := historyPoolImage()
	for _, tc := range []struct {
		index int
		want  string // the image, or a part of the error
	}{
		{0, "r.example/os/w@sha256:3333"},
		{2, "r.example/os/w@sha256:1111"},
		{-1, "r.example/os/w@sha256:1111"},
		{1, "PoolImage ns/w: status.builds[1] is a Failed build without an image: render: bad"},
		{3, "PoolImage ns/w: status.builds[3]: the history has 3 entries (0 to 2)"},
	} {
		got, err := controller.HistoryImage(pi, tc.index)
		if err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("index %d: %q, want %q", tc.index, got, tc.want)
		}
	}
	pi.Status.Published = nil
	if _, err := controller.HistoryImage(pi, -1); err == nil || !strings.Contains(err.Error(), "status.published: nothing published yet") {
		t.Errorf("nothing published: %v", err)
	}
}

func historyPoolImage() *v1alpha1.PoolImage {
	now := metav1.Now()
	return &v1alpha1.PoolImage{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w"},
		Status: v1alpha1.PoolImageStatus{Image: "r.example/os/w@sha256:3333",
			Published: &v1alpha1.PublishedImage{Image: "r.example/os/w@sha256:1111", Decision: v1alpha1.DecisionLiveApplied, Message: "held"},
			Builds: []v1alpha1.BuildRecord{
				{Image: "r.example/os/w@sha256:3333", InputsDigest: "sha256:in3", Result: "Succeeded", Time: now},
				{Result: "Failed", Message: "render: bad", Time: now},
				{Image: "r.example/os/w@sha256:1111", InputsDigest: "sha256:in1", Result: "Succeeded", Time: now},
			}}}
}

// TestWriteHistory: the table marks the built and the published entry,
// a failed build says why, and the pin command names the newest good
// build that is not published (the unpin command once pinned).
func TestWriteHistory(t *testing.T) {
	pi := historyPoolImage()
	var b bytes.Buffer
	if err := controller.WriteHistory(&b, pi); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"0  Succeeded", "sha256:3333", "built\n", "1  Failed", "render: bad", "sha256:1111  sha256:in1  published",
		"published: r.example/os/w@sha256:1111 (LiveApplied: held)",
		`kubectl -n ns patch poolimage w --type merge -p '{"spec":{"pin":"sha256:3333"}}'`} {
		if !strings.Contains(out, want) {
			t.Errorf("history does not say %q:\n%s", want, out)
		}
	}
	pi.Spec.Pin = "sha256:1111"
	b.Reset()
	if err := controller.WriteHistory(&b, pi); err != nil {
		t.Fatal(err)
	}
	if out := b.String(); !strings.Contains(out, "published, pinned") || !strings.Contains(out, `'{"spec":{"pin":null}}'`) {
		t.Errorf("pinned history:\n%s", out)
	}
}
