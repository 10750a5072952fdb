package preflight

import (
	"context"
	"fmt"
	"strings"
)

// Version labels of ostree-native images.
const (
	LabelOCIVersion  = "org.opencontainers.image.version"
	LabelVersion     = "version" // older RHCOS
	LabelOstreeLinux = "ostree.linux"
)

// versionCheck: the OS version and kernel release labels must match
// --expect-version and the base's ("rhcos version ... not compatible").
type versionCheck struct{}

func (versionCheck) Name() string       { return "version" }
func (versionCheck) Severity() Severity { return Error }
func (versionCheck) Needs() Needs       { return 0 }

// ImageVersion returns the OS version label of labels and its key.
func ImageVersion(labels map[string]string) (string, string) {
	if v := labels[LabelOCIVersion]; v != "" {
		return v, LabelOCIVersion
	}
	if v := labels[LabelVersion]; v != "" {
		return v, LabelVersion
	}
	return "", ""
}

// versionMatches reports whether have is want or starts with want followed
// by "." or "-" (so "9.6" matches "9.6.20250101-0").
func versionMatches(have, want string) bool {
	return have == want || strings.HasPrefix(have, want+".") || strings.HasPrefix(have, want+"-")
}

func (c versionCheck) Run(_ context.Context, t *Target) ([]Finding, error) {
	var out []Finding
	v, key := ImageVersion(t.Labels)
	if want := t.Options.ExpectVersion; want != "" {
		switch {
		case v == "":
			out = append(out, Finding{Field: "preflight.expectVersion", Message: fmt.Sprintf("image has no %s (or %s) label, expected version %s (preflight.expectVersion)", LabelOCIVersion, LabelVersion, want)})
		case !versionMatches(v, want):
			out = append(out, Finding{Field: "preflight.expectVersion", Message: fmt.Sprintf("image version %s=%s is not compatible with the expected %s (preflight.expectVersion): rebuild on the %s base", key, v, want, want)})
		}
	}
	_, bc, ref := t.base()
	if bc == nil {
		return out, nil
	}
	bl := bc.Config.Labels
	if bv, bkey := ImageVersion(bl); bv != "" && bv != v {
		out = append(out, Finding{Severity: Warning, Message: fmt.Sprintf("image version %q differs from its base %s (%s=%s): the image claims another OS version than it carries", v, ref, bkey, bv)})
	}
	if bk := bl[LabelOstreeLinux]; bk != "" && t.Labels[LabelOstreeLinux] != bk {
		out = append(out, Finding{Message: fmt.Sprintf("image kernel label %s=%q differs from its base %s (%q): the label must name the kernel the image boots", LabelOstreeLinux, t.Labels[LabelOstreeLinux], ref, bk)})
	}
	return out, nil
}
