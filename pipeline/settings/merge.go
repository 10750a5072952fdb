package settings

// Inherit is s with what o (an inner level of a fleet plan) sets on top:
// a string, number or boolean o sets replaces s's; lists (allowTopLevel,
// preflight.skip, preflight.allowSecrets) add up, s's first. Neither is
// changed.
func (s Settings) Inherit(o Settings) Settings { return merge(s, o, true, false) }

// Refine is s (the Gardener extension's default) refined by o (an OSC's
// providerConfig): a string or number o sets replaces s's; a list o sets
// replaces s's; a boolean is true when either sets it. Neither is
// changed.
func (s Settings) Refine(o Settings) Settings { return merge(s, o, false, true) }

// merge is o on top of s: lists add up (addLists) or replace, booleans
// are true when either is (orBools) or o's when set.
func merge(s, o Settings, addLists, orBools bool) Settings {
	list := func(a, b []string) []string {
		switch {
		case len(b) == 0:
			return a
		case addLists:
			return append(append([]string(nil), a...), b...)
		}
		return append([]string(nil), b...)
	}
	flag := func(a, b *bool) *bool {
		if orBools && (True(a) || True(b)) {
			return Bool(true)
		}
		if b != nil {
			return Bool(*b)
		}
		return a
	}
	r := Settings{
		BaseIndex:     str(s.BaseIndex, o.BaseIndex),
		BakeSecrets:   flag(s.BakeSecrets, o.BakeSecrets),
		Strict:        flag(s.Strict, o.Strict),
		AllowTopLevel: list(s.AllowTopLevel, o.AllowTopLevel),
		RequestJobs:   num(s.RequestJobs, o.RequestJobs),
	}
	if s.Preflight == nil && o.Preflight == nil {
		return r
	}
	a, b := Preflight{}, Preflight{}
	if s.Preflight != nil {
		a = *s.Preflight
	}
	if o.Preflight != nil {
		b = *o.Preflight
	}
	r.Preflight = &Preflight{
		Skip:            list(a.Skip, b.Skip),
		ExpectVersion:   str(a.ExpectVersion, b.ExpectVersion),
		FatalWarnings:   flag(a.FatalWarnings, b.FatalWarnings),
		DenyUsrOverride: flag(a.DenyUsrOverride, b.DenyUsrOverride),
		MaxAddedBytes:   str(a.MaxAddedBytes, b.MaxAddedBytes),
		RequireBase:     str(a.RequireBase, b.RequireBase),
		WarnLayers:      num(a.WarnLayers, b.WarnLayers),
		MaxLayers:       num(a.MaxLayers, b.MaxLayers),
		AllowSecrets:    list(a.AllowSecrets, b.AllowSecrets),
	}
	return r
}

func str(a, b string) string {
	if b != "" {
		return b
	}
	return a
}

func num(a, b int32) int32 {
	if b != 0 {
		return b
	}
	return a
}

// Set lists the fields s sets, by JSON name (preflight's as
// preflight.NAME): a boolean counts when true, as Refine reads it.
func (s *Settings) Set() map[string]bool {
	m := map[string]bool{
		"baseIndex": s.BaseIndex != "", "bakeSecrets": True(s.BakeSecrets), "strict": True(s.Strict),
		"allowTopLevel": len(s.AllowTopLevel) > 0, "requestJobs": s.RequestJobs != 0,
	}
	if p := s.Preflight; p != nil {
		for k, v := range map[string]bool{
			"skip": len(p.Skip) > 0, "expectVersion": p.ExpectVersion != "", "fatalWarnings": True(p.FatalWarnings),
			"denyUsrOverride": True(p.DenyUsrOverride), "requireBase": p.RequireBase != "", "allowSecrets": len(p.AllowSecrets) > 0,
			"maxAddedBytes": p.MaxAddedBytes != "", "warnLayers": p.WarnLayers != 0, "maxLayers": p.MaxLayers != 0,
		} {
			m["preflight."+k] = v
		}
	}
	return m
}
