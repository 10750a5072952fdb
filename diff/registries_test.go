package diff

import "testing"

// TestSafeRegistriesChangeRules checks every rule of the daemon's
// isSafeContainerRegistryConfChanges (openshift/machine-config-operator @
// 7ff337a4ffac, pkg/daemon/drain.go), each with the answer its code gives.
func TestSafeRegistriesChangeRules(t *testing.T) {
	const search = "unqualified-search-registries = ['a.io', 'b.io']\n"
	reg := func(body string) string { return "[[registry]]\n" + body + "\n" }
	const quay = "location = 'quay.io/x'\n"
	m1 := "[[registry.mirror]]\nlocation = 'm1.io/x'\n"
	m1d := "[[registry.mirror]]\nlocation = 'm1.io/x'\npull-from-mirror = 'digest-only'\n"
	m2 := "[[registry.mirror]]\nlocation = 'm2.io/x'\n"
	m2d := "[[registry.mirror]]\nlocation = 'm2.io/x'\npull-from-mirror = 'digest-only'\n"
	old := search + reg(quay+m1)
	for _, c := range []struct {
		name     string
		old, new string
		safe     bool
	}{
		{"identical", old, old, true},
		{"search entry appended", old, "unqualified-search-registries = ['a.io', 'b.io', 'c.io']\n" + reg(quay+m1), true},
		{"search entry removed", old, "unqualified-search-registries = ['a.io']\n" + reg(quay+m1), false},
		{"search entries reordered", old, "unqualified-search-registries = ['b.io', 'a.io']\n" + reg(quay+m1), false},
		{"registry removed", old, search, false},
		{"prefix set on the same scope", old, search + reg("prefix = 'quay.io/x'\n"+quay+m1), false},
		{"location changed under a prefix", search + reg("prefix = 'p.io'\n"+quay), search + reg("prefix = 'p.io'\nlocation = 'quay.io/y'\n"), false},
		{"blocked", old, search + reg(quay+"blocked = true\n"+m1), false},
		{"insecure", old, search + reg(quay+"insecure = true\n"+m1), false},
		{"mirror removed", search + reg(quay+m1+m2), old, false},
		{"mirror added, digest-only", old, search + reg(quay+m1+m2d), true},
		{"mirror added, registry mirror-by-digest-only", old, search + reg(quay+"mirror-by-digest-only = true\n"+m1+m2), true},
		{"mirror added, tags too", old, search + reg(quay+m1+m2), false},
		{"mirror made digest-only", old, search + reg(quay+m1d), true},
		{"mirror digest-only unset", search + reg(quay+m1d), old, false},
		{"registry added, mirrors digest-only", search, search + reg(quay+m1d+m2d), true},
		{"registry added, a mirror with tags", search, search + reg(quay+m1d+m2), false},
		{"registry added, no mirror, mirror-by-digest-only", search, search + reg(quay+"mirror-by-digest-only = true\n"), true},
		{"registry added, no mirror", search, search + reg(quay), false},
		{"file added", "", search, true},
		{"file removed", search, "", false},
	} {
		got, err := SafeRegistriesChange([]byte(c.old), []byte(c.new))
		if err != nil || got != c.safe {
			t.Errorf("%s: safe %v (%v), the MCO: %v", c.name, got, err, c.safe)
		}
	}
}
