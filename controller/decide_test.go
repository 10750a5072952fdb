package controller_test

import (
	"strings"
	"testing"

	"github.com/oslayer/oslayer/api/v1alpha1"
	"github.com/oslayer/oslayer/controller"
)

// TestDecide is the table of which image spec.publish hands on: the
// newest build, the published image held for a change the machine-config
// daemon applies in place or that changes no node content, spec.pin, and
// the image spec.rollback published again.
func TestDecide(t *testing.T) {
	const (
		dA = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		dB = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
		dC = "sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
		dX = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
	)
	a, b, c := "r.example/os/w@"+dA, "r.example/os/w@"+dB, "r.example/os/w@"+dC
	built := controller.Candidate{Image: b, InputsDigest: "in-b", BaseDigest: "base-1"}
	pubA := &v1alpha1.PublishedImage{Image: a, InputsDigest: "in-a", BaseDigest: "base-1", Decision: v1alpha1.DecisionBuilt}
	history := []v1alpha1.BuildRecord{
		{Image: b, InputsDigest: "in-b", BaseDigest: "base-1", Result: "Succeeded"},
		{Image: c, Result: "Failed", Message: "preflight: secrets"},
		{Image: a, InputsDigest: "in-a", BaseDigest: "base-1", Result: "Succeeded"},
	}
	rolledBack := &v1alpha1.PublishedImage{Image: a, InputsDigest: "in-a", BaseDigest: "base-1", Decision: v1alpha1.DecisionRolledBack,
		Message: "spec.rollback: the rollout of " + b + " halted"}
	change := func(action string, mod func(*v1alpha1.ImageChange)) *v1alpha1.ImageChange {
		ch := &v1alpha1.ImageChange{From: a, To: b, PathsTotal: 1, Platforms: []v1alpha1.PlatformAction{
			{Platform: "openshift", Action: action, Applies: true, Why: "/var/lib/kubelet/config.json: policy"},
			{Platform: "openshift-image", Action: "reboot", Applies: true}}}
		if mod != nil {
			mod(ch)
		}
		return ch
	}
	for _, tc := range []struct {
		name     string
		in       controller.PublishInput
		image    string
		decision string
		msg      string // a part of the message
		pinErr   string // a part of the refusal
	}{
		{"first image", controller.PublishInput{Built: built}, b, v1alpha1.DecisionBuilt, "first", ""},
		{"same image, was pinned", controller.PublishInput{Built: built, Published: &v1alpha1.PublishedImage{Image: b, Decision: v1alpha1.DecisionPinned}}, b, v1alpha1.DecisionBuilt, "newest", ""},
		{"same image: its reason stays", controller.PublishInput{Built: built, Published: &v1alpha1.PublishedImage{Image: b, Decision: v1alpha1.DecisionBuilt,
			Message: "published at once: the kernel arguments changed"}}, b, v1alpha1.DecisionBuilt, "kernel arguments", ""},
		{"nothing built", controller.PublishInput{}, "", "", "nothing built", ""},
		{"no live apply: newest", controller.PublishInput{Built: built, Published: pubA, Change: change("none", nil)}, b, v1alpha1.DecisionBuilt, "newest", ""},
		{"same inputs and base: held", controller.PublishInput{Built: controller.Candidate{Image: b, InputsDigest: "in-a", BaseDigest: "base-1"}, Published: pubA},
			a, v1alpha1.DecisionNoNodeChange, "no node content changed", ""},
		{"no node path changed: held", controller.PublishInput{Built: built, Published: pubA,
			Change: &v1alpha1.ImageChange{From: a, To: b, DownloadBytes: 900, Platforms: []v1alpha1.PlatformAction{{Platform: "bootc", Action: "soft-reboot"}}}},
			a, v1alpha1.DecisionNoNodeChange, "changes no node path", ""},
		{"no node path changed but kernel arguments", controller.PublishInput{Built: built, Published: pubA,
			Change: &v1alpha1.ImageChange{From: a, To: b, KernelArgs: true}}, b, v1alpha1.DecisionBuilt, "newest", ""},
		{"a path changed, no live apply: newest", controller.PublishInput{Built: built, Published: pubA,
			Change: &v1alpha1.ImageChange{From: a, To: b, PathsTotal: 1}}, b, v1alpha1.DecisionBuilt, "newest", ""},
		{"same inputs, new base: newest", controller.PublishInput{Built: controller.Candidate{Image: b, InputsDigest: "in-a", BaseDigest: "base-2"}, Published: pubA, LiveApply: true,
			Change: change("reboot", func(c *v1alpha1.ImageChange) { c.Base = true })}, b, v1alpha1.DecisionBuilt, "base image changed", ""},
		{"live: none held", controller.PublishInput{Built: built, Published: pubA, LiveApply: true, Change: change("none", nil)},
			a, v1alpha1.DecisionLiveApplied, "applies the change in place (action none: /var/lib/kubelet/config.json", ""},
		{"live: reload held", controller.PublishInput{Built: built, Published: pubA, LiveApply: true, Change: change("reload", nil)}, a, v1alpha1.DecisionLiveApplied, "action reload", ""},
		{"live: drain held", controller.PublishInput{Built: built, Published: pubA, LiveApply: true, Change: change("drain", nil)}, a, v1alpha1.DecisionLiveApplied, "action drain", ""},
		{"live: reboot published", controller.PublishInput{Built: built, Published: pubA, LiveApply: true, Change: change("reboot", nil)}, b, v1alpha1.DecisionBuilt, "reboots for it", ""},
		{"live: kernel arguments", controller.PublishInput{Built: built, Published: pubA, LiveApply: true,
			Change: change("none", func(c *v1alpha1.ImageChange) { c.KernelArgs = true })}, b, v1alpha1.DecisionBuilt, "kernel arguments", ""},
		{"live: packages", controller.PublishInput{Built: built, Published: pubA, LiveApply: true,
			Change: change("none", func(c *v1alpha1.ImageChange) { c.Packages = true })}, b, v1alpha1.DecisionBuilt, "package stage", ""},
		{"live: analysis failed", controller.PublishInput{Built: built, Published: pubA, LiveApply: true,
			Change: change("none", func(c *v1alpha1.ImageChange) { c.Error = "reading the published image: 404" })}, b, v1alpha1.DecisionBuilt, "could not be analysed: reading", ""},
		{"live: stale analysis", controller.PublishInput{Built: built, Published: pubA, LiveApply: true,
			Change: change("none", func(c *v1alpha1.ImageChange) { c.From = c.To })}, b, v1alpha1.DecisionBuilt, "not analysed", ""},
		{"live: no openshift prediction", controller.PublishInput{Built: built, Published: pubA, LiveApply: true,
			Change: change("none", func(c *v1alpha1.ImageChange) { c.Platforms = c.Platforms[1:] })}, b, v1alpha1.DecisionBuilt, "no prediction", ""},
		{"multi-arch, same first-platform inputs and base, another architecture's base changed: newest", controller.PublishInput{
			Built: controller.Candidate{Image: b, InputsDigest: "in-a", BaseDigest: "base-1"}, Published: pubA,
			Change: &v1alpha1.ImageChange{From: a, To: b, Base: true, Architectures: []v1alpha1.ArchChange{{Architecture: "amd64", Action: "none"}, {Architecture: "arm64", Action: "reboot"}}}},
			b, v1alpha1.DecisionBuilt, "newest", ""},
		{"multi-arch, no architecture changed: held", controller.PublishInput{
			Built: controller.Candidate{Image: b, InputsDigest: "in-a", BaseDigest: "base-1"}, Published: pubA,
			Change: &v1alpha1.ImageChange{From: a, To: b, Architectures: []v1alpha1.ArchChange{{Architecture: "amd64", Action: "none"}, {Architecture: "arm64", Action: "none"}}}},
			a, v1alpha1.DecisionNoNodeChange, "changes no node path", ""},
		{"multi-arch, analysis failed: newest", controller.PublishInput{
			Built: controller.Candidate{Image: b, InputsDigest: "in-a", BaseDigest: "base-1"}, Published: pubA,
			Change: &v1alpha1.ImageChange{From: a, To: b, Error: "arm64: reading the built image: 404", Architectures: []v1alpha1.ArchChange{{Architecture: "amd64"}, {Architecture: "arm64"}}}},
			b, v1alpha1.DecisionBuilt, "newest", ""},
		{"multi-arch, an architecture added: newest", controller.PublishInput{
			Built: controller.Candidate{Image: b, InputsDigest: "in-a", BaseDigest: "base-1"}, Published: pubA,
			Change: &v1alpha1.ImageChange{From: a, To: b, Architectures: []v1alpha1.ArchChange{{Architecture: "amd64", Action: "none"}, {Architecture: "arm64", Action: "reboot", Added: true}}}},
			b, v1alpha1.DecisionBuilt, "newest", ""},
		{"live: multi-arch, an architecture added", controller.PublishInput{Built: built, Published: pubA, LiveApply: true,
			Change: change("none", func(c *v1alpha1.ImageChange) {
				c.PathsTotal, c.Architectures = 0, []v1alpha1.ArchChange{{Architecture: "amd64", Action: "none"}, {Architecture: "arm64", Action: "reboot", Added: true}}
			})}, b, v1alpha1.DecisionBuilt, "no image for arm64", ""},
		{"pin an older good build", controller.PublishInput{Built: built, Published: &v1alpha1.PublishedImage{Image: b}, Pin: dA, History: history},
			a, v1alpha1.DecisionPinned, "newer build " + b + " is held back", ""},
		{"pin the newest", controller.PublishInput{Built: built, Published: pubA, Pin: dB, History: history}, b, v1alpha1.DecisionPinned, "spec.pin publishes " + b, ""},
		{"pin a failed build", controller.PublishInput{Built: built, Published: pubA, Pin: dC, History: history}, a, v1alpha1.DecisionBuilt, "", "is a failed build of status.builds (preflight: secrets)"},
		{"pin an unknown digest", controller.PublishInput{Built: built, Published: pubA, Pin: dX, History: history}, a, v1alpha1.DecisionBuilt, "", "spec.pin " + dX + " is no build of status.builds"},
		{"pin gone from the history but published", controller.PublishInput{Built: built, Pin: dX, History: history,
			Published: &v1alpha1.PublishedImage{Image: "r.example/os/w@" + dX, Decision: v1alpha1.DecisionPinned}}, "r.example/os/w@" + dX, v1alpha1.DecisionPinned, "held back", ""},
		{"pin refused, nothing published", controller.PublishInput{Built: built, Pin: dX, History: history}, "", "", "", "no build"},
		{"rolled back: held while the halted image is the newest", controller.PublishInput{Built: built, Published: rolledBack,
			Rollback: &v1alpha1.RollbackStatus{From: b, Image: a}}, a, v1alpha1.DecisionRolledBack, "halted", ""},
		{"rolled back, a newer build: published", controller.PublishInput{Built: controller.Candidate{Image: c, InputsDigest: "in-c"}, Published: rolledBack,
			Rollback: &v1alpha1.RollbackStatus{From: b, Image: a}}, c, v1alpha1.DecisionBuilt, "newest", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := controller.Decide(tc.in)
			if d.Image != tc.image || d.Decision != tc.decision || !strings.Contains(d.Message, tc.msg) ||
				(tc.pinErr == "") != (d.PinError == "") || !strings.Contains(d.PinError, tc.pinErr) {
				t.Errorf("got image %q decision %q message %q pin error %q\nwant image %q decision %q message ~%q pin error ~%q",
					d.Image, d.Decision, d.Message, d.PinError, tc.image, tc.decision, tc.msg, tc.pinErr)
			}
			if d.Image == a && d.Decision != v1alpha1.DecisionPinned && (d.InputsDigest != "in-a" || d.BaseDigest != "base-1") {
				t.Errorf("kept %s with inputs %q base %q", a, d.InputsDigest, d.BaseDigest)
			}
		})
	}
}
