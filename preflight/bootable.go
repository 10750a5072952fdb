package preflight

import "context"

// The labels that make an image bootable (presence, not value: Fedora
// CoreOS uses "1", RHCOS "true").
const (
	LabelOstreeBootable = "ostree.bootable"
	LabelBootc          = "containers.bootc"
)

// bootableCheck: nodes refuse an image without ostree.bootable or containers.bootc.
type bootableCheck struct{}

func (bootableCheck) Name() string       { return "bootable" }
func (bootableCheck) Severity() Severity { return Error }
func (bootableCheck) Needs() Needs       { return 0 }

func (c bootableCheck) Run(_ context.Context, t *Target) ([]Finding, error) {
	_, a := t.Labels[LabelOstreeBootable]
	_, b := t.Labels[LabelBootc]
	if a || b {
		return nil, nil
	}
	return []Finding{{Message: "config has neither label " + LabelOstreeBootable + " nor " + LabelBootc +
		": nodes refuse to boot it; build FROM an ostree-native base image (Fedora CoreOS, RHCOS, a bootc image) and keep its labels"}}, nil
}
