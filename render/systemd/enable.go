package systemd

import (
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"
)

// Link is a symlink to create in the image: Path -> Target (absolute node
// paths).
type Link struct {
	Path   string `json:"path"`
	Target string `json:"target"`
}

// UnitFile is what the enabler knows about a unit.
type UnitFile struct {
	// Name is the unit's name; for an instance of a template it is the
	// instance name ("foo@bar.service") while Path is the template's file.
	Name string
	// Path is where the unit file lives on the node, e.g.
	// /etc/systemd/system/x.service or /usr/lib/systemd/system/x.service.
	// Enablement links point at it.
	Path string
	// Install is the unit file's [Install] section.
	Install Install
}

// Lookup finds a unit by name (for Also= and for units shipped by the OS);
// ok is false if the unit is unknown.
type Lookup func(name string) (UnitFile, bool)

// Chain returns a Lookup that asks each lookup in order (nil ones are
// skipped) and returns the first hit: e.g. the units the configuration
// writes, then the base image's.
func Chain(lookups ...Lookup) Lookup {
	return func(name string) (UnitFile, bool) {
		for _, l := range lookups {
			if l == nil {
				continue
			}
			if u, ok := l(name); ok {
				return u, true
			}
		}
		return UnitFile{}, false
	}
}

// MapLookup returns a Lookup over the given units (e.g. the ones a
// configuration writes): a name is found when a unit has it, and an
// instance name ("foo@bar.service") also when only its template
// ("foo@.service") is given, with the instance as Name and the template's
// Path and Install, as systemctl resolves it.
func MapLookup(units ...UnitFile) Lookup {
	m := make(map[string]UnitFile, len(units))
	for _, u := range units {
		m[u.Name] = u
	}
	return func(name string) (UnitFile, bool) {
		if u, ok := m[name]; ok {
			return u, true
		}
		if t, ok := TemplateOf(name); ok {
			if u, ok := m[t]; ok {
				u.Name = name
				return u, true
			}
		}
		return UnitFile{}, false
	}
}

// maxAlso bounds the number of units one enable may pull in through Also=.
const maxAlso = 1024

// EnableLinks returns the links `systemctl --root=DIR enable NAME` creates
// for u, sorted by Path, all under /etc/systemd/system and pointing at the
// unit file's Path (also for units under /usr/lib/systemd/system, as
// systemctl does):
//
//   - Alias=: SystemDir/ALIAS. Aliases must have the unit's type; a
//     template's alias is a template or an instance; a template alias of an
//     instance gets the instance ("foo@bar" with Alias=baz@.service makes
//     baz@bar.service); an alias equal to the name is ignored. The legacy
//     form "x.target.wants/NAME" is accepted.
//   - WantedBy=/RequiredBy=/UpheldBy=: SystemDir/TARGET.wants/NAME
//     (.requires, .upholds). For a template, NAME is the DefaultInstance=
//     instance; a template without DefaultInstance= is linked only into
//     template or instance targets ("x@.target.wants/foo@.service"); a plain
//     target is an error, as systemctl reports it.
//   - A linked unit, whose Path is not directly in one of UnitDirs(), gets
//     SystemDir/NAME -> Path (systemctl links it into the search path).
//   - Also=: each named unit, found with lookup, is enabled the same way,
//     recursively and once each. An Also= unit that lookup does not know is
//     skipped, as systemctl does ("Failed to enable auxiliary unit ...,
//     ignoring").
//   - DefaultInstance= counts only for a template name (systemctl ignores
//     it elsewhere); every value is checked in order and an invalid one
//     makes the unit fail to load: then no link at all is returned.
//   - Specifiers %n %N %p %P %i %I %j %J %% are resolved (%i of a template
//     is its default instance; in Also= it is the one known at that line,
//     as systemctl expands Also= while parsing); host-dependent ones (%H,
//     %m, %u, ...) are an error: an image cannot know the node.
//
// A unit without installation config gives no links and no error.
//
// Errors name the unit and the value. Like systemctl, which creates the
// valid links and then exits non-zero, EnableLinks returns the valid links
// together with the joined errors; callers that treat the error as fatal
// should ignore the links.
//
// The oracle tests compare EnableLinks with systemctl 252 on every unit of
// the fixtures, on hand-written edge cases and on 150 generated ones.
func EnableLinks(u UnitFile, lookup Lookup) ([]Link, error) {
	if Classify(u.Name) == Invalid {
		return nil, fmt.Errorf("enable: %q is not a valid unit name", u.Name)
	}
	if !path.IsAbs(u.Path) || path.Clean(u.Path) != u.Path {
		return nil, fmt.Errorf("enable %s: unit path %q is not absolute and clean", u.Name, u.Path)
	}
	e := &enabler{links: map[string]string{}}
	seen := map[string]bool{u.Name: true}
	queue := []UnitFile{u}
	for n := 0; len(queue) > 0; n++ {
		if n > maxAlso {
			e.errs = append(e.errs, fmt.Errorf("enable %s: more than %d units through Also=", u.Name, maxAlso))
			break
		}
		cur := queue[0]
		queue = queue[1:]
		steps, err := defaultInstance(cur)
		if err != nil {
			// systemctl cannot load the unit: for the unit being enabled
			// nothing is created at all.
			if n == 0 {
				return nil, fmt.Errorf("enable %s: %w", cur.Name, err)
			}
			e.errs = append(e.errs, fmt.Errorf("enable %s (Also=): %w", cur.Name, err))
			continue
		}
		def := steps[len(steps)-1]
		also, err := alsoNames(cur, steps)
		if err != nil {
			// An invalid Also= fails the unit's load, like DefaultInstance=.
			if n == 0 {
				return nil, fmt.Errorf("enable %s: %w", cur.Name, err)
			}
			e.errs = append(e.errs, fmt.Errorf("enable %s (Also=): %w", cur.Name, err))
			continue
		}
		e.apply(cur, def)
		for _, name := range also {
			a := name
			if seen[name] {
				continue
			}
			seen[name] = true
			if lookup == nil {
				continue
			}
			au, ok := lookup(name)
			if !ok {
				continue
			}
			if Classify(au.Name) == Invalid || !path.IsAbs(au.Path) {
				e.errs = append(e.errs, fmt.Errorf("enable %s: Also=%s: lookup returned unit %q at %q", cur.Name, a, au.Name, au.Path))
				continue
			}
			seen[au.Name] = true
			queue = append(queue, au)
		}
	}
	out := make([]Link, 0, len(e.links))
	for p, t := range e.links {
		out = append(out, Link{Path: p, Target: t})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, errors.Join(e.errs...)
}

// alsoNames expands and checks a unit's Also= values; steps are its
// default instances by line (see defaultInstance).
func alsoNames(u UnitFile, steps []string) ([]string, error) {
	var names []string
	for i, a := range u.Install.Also {
		def := steps[len(steps)-1]
		if i < len(u.Install.alsoAt) && u.Install.alsoAt[i] < len(steps) {
			def = steps[u.Install.alsoAt[i]]
		}
		name, err := expand(a, u.Name, def)
		if err == nil && Classify(name) == Invalid {
			err = fmt.Errorf("%q is not a valid unit name", name)
		}
		if err != nil {
			return nil, fmt.Errorf("Also=%s: %w", a, err)
		}
		names = append(names, name)
	}
	return names, nil
}

type enabler struct {
	links map[string]string
	errs  []error
}

func (e *enabler) add(u UnitFile, p string) {
	if t, ok := e.links[p]; ok && t != u.Path {
		e.errs = append(e.errs, fmt.Errorf("enable %s: %s already links to %s, not %s", u.Name, p, t, u.Path))
		return
	}
	e.links[p] = u.Path
}

func (e *enabler) fail(u UnitFile, format string, args ...any) {
	e.errs = append(e.errs, fmt.Errorf("enable %s: %s", u.Name, fmt.Sprintf(format, args...)))
}

// defaultInstance resolves DefaultInstance= as systemctl 252 does when it
// loads the unit: only for a template name (elsewhere it is ignored), each
// value in order, specifiers expanded, an empty value resets, an invalid
// one fails the unit.
//
// steps[k] is the default instance after the first k values; the last one
// is the unit's.
func defaultInstance(u UnitFile) (steps []string, err error) {
	vals := u.Install.defaults
	if vals == nil && u.Install.DefaultInstance != "" {
		vals = []string{u.Install.DefaultInstance} // an Install built by hand
	}
	steps = make([]string, len(vals)+1)
	if Classify(u.Name) != Template {
		return steps, nil
	}
	cur := ""
	for i, v := range vals {
		x, err := expand(v, u.Name, cur)
		if err != nil {
			return nil, fmt.Errorf("DefaultInstance=%s: %w", v, err)
		}
		if x != "" && !validInstance(x) {
			return nil, fmt.Errorf("invalid DefaultInstance= value %q", x)
		}
		cur = x
		steps[i+1] = cur
	}
	return steps, nil
}

func (e *enabler) apply(u UnitFile, def string) {
	in := u.Install
	// A linked unit (its file is outside the unit directories) is linked
	// into SystemDir under its name.
	if !inSearchPath(u.Path) {
		e.add(u, SystemDir+"/"+u.Name)
	}
	for _, a := range in.Alias {
		dst, err := expand(a, u.Name, def)
		if err != nil {
			e.fail(u, "Alias=%s: %v", a, err)
			continue
		}
		dst, skip, err := verifyAlias(u.Name, dst)
		if err != nil {
			e.fail(u, "Alias=%s: %v", a, err)
			continue
		}
		if !skip {
			e.add(u, SystemDir+"/"+dst)
		}
	}
	name := u.Name
	if def != "" {
		name = withInstance(name, def)
	}
	for _, l := range []struct {
		key, suffix string
		list        []string
	}{
		{"WantedBy", ".wants", in.WantedBy},
		{"RequiredBy", ".requires", in.RequiredBy},
		{"UpheldBy", ".upholds", in.UpheldBy},
	} {
		for _, w := range l.list {
			dst, err := expand(w, u.Name, def)
			if err != nil {
				e.fail(u, "%s=%s: %v", l.key, w, err)
				continue
			}
			k := Classify(dst)
			if k == Invalid {
				e.fail(u, "%s=%s: %q is not a valid unit name", l.key, w, dst)
				continue
			}
			if k == Plain && Classify(name) == Template {
				e.fail(u, "%s=%s: destination unit %s is a non-template unit and %s has no DefaultInstance=", l.key, w, dst, name)
				continue
			}
			e.add(u, SystemDir+"/"+dst+l.suffix+"/"+name)
		}
	}
}

// verifyAlias checks an Alias= value for unit name (after specifier
// expansion) the way systemctl 252 does, returning the link name relative to
// SystemDir; skip is true for an alias equal to the name.
func verifyAlias(name, dst string) (link string, skip bool, err error) {
	if slash := strings.LastIndexByte(dst, '/'); slash >= 0 {
		dir, base := dst[:slash], dst[slash+1:]
		var target string
		switch {
		case strings.HasSuffix(dir, ".wants"):
			target = strings.TrimSuffix(dir, ".wants")
		case strings.HasSuffix(dir, ".requires"):
			target = strings.TrimSuffix(dir, ".requires")
		default:
			return "", false, fmt.Errorf("invalid unit reference %q", dst)
		}
		if Classify(target) == Invalid {
			return "", false, fmt.Errorf("invalid unit reference %q", dst)
		}
		ok := base == name
		if !ok && Classify(name) == Template && Classify(base) == Instance {
			t, _ := TemplateOf(base)
			ok = t == name
		}
		if !ok {
			return "", false, fmt.Errorf("cannot alias %s as %s", name, dst)
		}
		return dst, false, nil
	}
	nk, dk := Classify(name), Classify(dst)
	if dk == Invalid {
		return "", false, fmt.Errorf("cannot alias %s as %s: not a valid unit name", name, dst)
	}
	if dk == Template && nk == Instance {
		dst = withInstance(dst, instanceOf(name))
		dk = Instance
	}
	if dst == name {
		return "", true, nil
	}
	if unitType(dst) != unitType(name) {
		return "", false, fmt.Errorf("cannot alias %s as %s: unit types differ", name, dst)
	}
	switch {
	case nk == Plain && dk == Plain,
		nk == Template && (dk == Template || dk == Instance),
		nk == Instance && dk == Instance && instanceOf(dst) == instanceOf(name):
		return dst, false, nil
	}
	return "", false, fmt.Errorf("cannot alias %s (%s) as %s (%s)", name, nk, dst, dk)
}

// MaskLink is the link that masks a unit: /etc/systemd/system/NAME ->
// /dev/null.
func MaskLink(name string) Link {
	return Link{Path: SystemDir + "/" + name, Target: "/dev/null"}
}
