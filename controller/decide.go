package controller

import (
	"fmt"
	"strings"

	"github.com/oslayer/oslayer/api/v1alpha1"
	"github.com/oslayer/oslayer/diff"
)

// Which image spec.publish hands on is decided here, from the newest
// build, the image published now, spec.pin and the predicted action of
// the change between them; nothing else decides it.

// Candidate is an image that may be published.
type Candidate struct {
	Image, InputsDigest, BaseDigest string
}

// PublishInput is what the decision reads.
type PublishInput struct {
	// Built is the newest good build (status.image).
	Built Candidate
	// Published is the image published now (nil: none yet).
	Published *v1alpha1.PublishedImage
	// Pin is spec.pin; History is status.builds.
	Pin     string
	History []v1alpha1.BuildRecord
	// LiveApply is set when the image goes to an OpenShift pool as its
	// osImageURL (spec.publish.machineConfig): a change the
	// machine-config daemon applies in place is then held back.
	LiveApply bool
	// Change is the change from Published to Built (nil: not analysed).
	Change *v1alpha1.ImageChange
	// Rollback is the rollback spec.rollback made (status.rollback): while
	// Built is the image whose rollout halted, the published image stays.
	Rollback *v1alpha1.RollbackStatus
}

// Decision is the image to publish and why.
type Decision struct {
	Candidate
	// Decision is one of v1alpha1.Decision*.
	Decision string
	Message  string
	// PinError, when set, refuses spec.pin: the published image stays.
	PinError string
}

// Decide chooses the image to publish.
func Decide(in PublishInput) Decision {
	if in.Pin != "" {
		return decidePin(in)
	}
	b := in.Built
	p := in.Published
	switch {
	case in.Rollback != nil && in.Rollback.From == b.Image && p != nil && p.Image == in.Rollback.Image:
		return keep(p, "", "") // rolled back: held until a newer build
	case b.Image == "":
		return keep(p, "", "nothing built yet")
	case p == nil || p.Image == "":
		return Decision{Candidate: b, Decision: v1alpha1.DecisionBuilt, Message: "the first image"}
	case p.Image == b.Image && p.Decision == v1alpha1.DecisionBuilt:
		return keep(p, "", "") // published for its reason, which stays
	case p.Image == b.Image:
		return Decision{Candidate: b, Decision: v1alpha1.DecisionBuilt, Message: "the newest build"}
	case b.InputsDigest != "" && b.InputsDigest == p.InputsDigest && b.BaseDigest == p.BaseDigest && !multiArch(in.Change, p.Image, b.Image):
		return keep(p, v1alpha1.DecisionNoNodeChange, fmt.Sprintf("%s has the inputs digest %s and the base of the published image: no node content changed", b.Image, b.InputsDigest))
	case noNodeChange(in.Change, p.Image, b.Image):
		return keep(p, v1alpha1.DecisionNoNodeChange, fmt.Sprintf("%s changes no node path, kernel argument, base or package of the published image (only what is delivered at runtime, or oslayer's records)", b.Image))
	case !in.LiveApply:
		return Decision{Candidate: b, Decision: v1alpha1.DecisionBuilt, Message: "the newest build"}
	}
	return decideLive(in)
}

// noNodeChange reports an analysed change from one image to the other
// that no node sees (of any architecture).
func noNodeChange(c *v1alpha1.ImageChange, from, to string) bool {
	return c != nil && c.From == from && c.To == to && c.Error == "" && c.PathsTotal == 0 && !c.KernelArgs && !c.Base && !c.Packages &&
		addedArch(c) == ""
}

// multiArch reports a change from one image to the other that compares a
// multi-platform image: the inputs and base digests of the status name
// the first platform's only, so they cannot say that no node changed.
func multiArch(c *v1alpha1.ImageChange, from, to string) bool {
	return c != nil && c.From == from && c.To == to && len(c.Architectures) > 0
}

// addedArch is the first architecture of the change that the published
// image lacks ("": none).
func addedArch(c *v1alpha1.ImageChange) string {
	for _, a := range c.Architectures {
		if a.Added {
			return a.Architecture
		}
	}
	return ""
}

// decideLive holds a newer build back when the machine-config daemon
// applies the change in place.
func decideLive(in PublishInput) Decision {
	b, p, c := in.Built, in.Published, in.Change
	now := func(why string) Decision {
		return Decision{Candidate: b, Decision: v1alpha1.DecisionBuilt, Message: "the newest build, published at once: " + why}
	}
	switch {
	case c == nil || c.From != p.Image || c.To != b.Image:
		return now("the change from " + p.Image + " is not analysed")
	case c.Error != "":
		return now("the change could not be analysed: " + c.Error)
	case addedArch(c) != "":
		return now("the published image has no image for " + addedArch(c) + " (its nodes have none to stay on)")
	case c.Base:
		return now("the base image changed (a new OS: the node reboots)")
	case c.KernelArgs:
		return now("the kernel arguments changed (the machine-config daemon reboots)")
	case c.Packages:
		return now("the package stage changed (extensions, kernel type or Containerfile: the machine-config daemon reboots)")
	}
	pa := platformAction(c, diff.PlatformOpenShift)
	if pa == nil {
		return now("no prediction of the machine-config daemon's action")
	}
	a, err := diff.ParseAction(pa.Action)
	if err != nil || a.AtLeast(diff.SoftReboot) {
		return now("the machine-config daemon reboots for it (" + pa.Why + ")")
	}
	msg := fmt.Sprintf("built %s; the machine-config daemon applies the change in place (action %s", b.Image, pa.Action)
	if pa.Why != "" {
		msg += ": " + pa.Why
	}
	msg += "): it is published with the next change that reboots"
	return keep(p, v1alpha1.DecisionLiveApplied, msg)
}

// decidePin publishes spec.pin when it is a good build of the history
// (or the image already published for it).
func decidePin(in PublishInput) Decision {
	for _, r := range in.History {
		if digestOf(r.Image) != in.Pin {
			continue
		}
		if r.Result != "Succeeded" {
			return pinRefused(in, fmt.Sprintf("spec.pin %s is a failed build of status.builds (%s): pin a Succeeded one", in.Pin, r.Message))
		}
		return Decision{Candidate: Candidate{Image: r.Image, InputsDigest: r.InputsDigest, BaseDigest: r.BaseDigest},
			Decision: v1alpha1.DecisionPinned, Message: pinMessage(in, r.Image)}
	}
	if p := in.Published; p != nil && p.Decision == v1alpha1.DecisionPinned && digestOf(p.Image) == in.Pin {
		// Pinned before and since gone from the short history: it stays.
		return Decision{Candidate: Candidate{Image: p.Image, InputsDigest: p.InputsDigest, BaseDigest: p.BaseDigest},
			Decision: v1alpha1.DecisionPinned, Message: pinMessage(in, p.Image)}
	}
	return pinRefused(in, fmt.Sprintf("spec.pin %s is no build of status.builds (the last %d builds): pin the digest of a Succeeded one (oslayer history)", in.Pin, keepBuilds))
}

func pinMessage(in PublishInput, image string) string {
	if in.Built.Image != "" && in.Built.Image != image {
		return fmt.Sprintf("spec.pin publishes %s; the newer build %s is held back until spec.pin is removed", image, in.Built.Image)
	}
	return fmt.Sprintf("spec.pin publishes %s", image)
}

func pinRefused(in PublishInput, msg string) Decision {
	d := keep(in.Published, "", "")
	d.PinError = msg
	return d
}

// keep is the published image again, with a new decision and message
// (decision "" keeps the old one).
func keep(p *v1alpha1.PublishedImage, decision, msg string) Decision {
	if p == nil {
		return Decision{Decision: decision, Message: msg}
	}
	d := Decision{Candidate: Candidate{Image: p.Image, InputsDigest: p.InputsDigest, BaseDigest: p.BaseDigest}, Decision: decision, Message: msg}
	if decision == "" {
		d.Decision, d.Message = p.Decision, p.Message
	}
	return d
}

func platformAction(c *v1alpha1.ImageChange, name string) *v1alpha1.PlatformAction {
	for i := range c.Platforms {
		if c.Platforms[i].Platform == name {
			return &c.Platforms[i]
		}
	}
	return nil
}

// digestOf is the digest of a digested reference (REPO@sha256:...).
func digestOf(ref string) string {
	if i := strings.LastIndex(ref, "@"); i >= 0 {
		return ref[i+1:]
	}
	return ""
}
