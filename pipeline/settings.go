package pipeline

import (
	"errors"
	"fmt"

	"github.com/oslayer/oslayer/pipeline/settings"
	"github.com/oslayer/oslayer/preflight"
)

// SetSettings maps the wire settings every front-end embeds onto s, the
// one mapping of them: bakeSecrets, strict and allowTopLevel onto Inputs,
// baseIndex onto BaseIndex, preflight onto Preflight (unset: the zero
// options, whose defaults New applies). An error is an *Error naming the
// JSON field (preflight.maxAddedBytes); Check validates the rest.
func (s *Spec) SetSettings(w settings.Settings) error {
	s.Inputs.BakeSecrets = settings.True(w.BakeSecrets)
	s.Inputs.Strict = settings.True(w.Strict)
	s.Inputs.AllowTopLevel = w.AllowTopLevel
	s.BaseIndex = w.BaseIndex
	s.RequestJobs = int(w.RequestJobs)
	s.Preflight = Preflight{}
	pf := w.Preflight
	if pf == nil {
		return nil
	}
	s.Preflight = Preflight{
		Skip: pf.Skip, ExpectVersion: pf.ExpectVersion, FatalWarnings: settings.True(pf.FatalWarnings),
		DenyUsrOverride: settings.True(pf.DenyUsrOverride), RequireBase: pf.RequireBase, AllowSecrets: pf.AllowSecrets,
		WarnLayers: int(pf.WarnLayers), MaxLayers: int(pf.MaxLayers),
	}
	if pf.MaxAddedBytes != "" {
		n, err := preflight.ParseBytes(pf.MaxAddedBytes)
		if err != nil {
			return inputErr("preflight", "preflight.maxAddedBytes", fmt.Errorf("%q: %v", pf.MaxAddedBytes, err))
		}
		s.Preflight.MaxAddedBytes = n
	}
	return nil
}

// CheckSettings validates what w holds on its own, as Check does (errors
// are *Error naming the field), except the relation of
// preflight.warnLayers and maxLayers, which is the whole specification's:
// a fleet plan's level may set one and another level the other.
func CheckSettings(w settings.Settings) error {
	// Check's other fields are left out: the target is a placeholder.
	s := Spec{Target: "settings"}
	err := s.SetSettings(w) // the other fields are set even so
	s.Preflight.WarnLayers, s.Preflight.MaxLayers = 0, 0
	return errors.Join(err, s.Check())
}

// CheckPreflight validates preflight options as Check does.
func CheckPreflight(pf Preflight) error { return errors.Join(pf.check()...) }
