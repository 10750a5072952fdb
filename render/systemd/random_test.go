package systemd

import (
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/oslayer/oslayer/test/regtest"
)

// randomCase builds a unit with a random [Install] section from small pools
// of valid and invalid values (templates, instances, specifiers, aliases of
// every kind, Also= chains).
func randomCase(r *rand.Rand) enableCase {
	pick := func(pool []string) string { return pool[r.IntN(len(pool))] }
	targets := []string{"multi-user.target", "foo@.target", "bar@x.target", "%p-%i.target", "%N.target", "bad", "a.target b.target", "",
		"\"q.target\"", "'s p.target'", "%j.target", "c.target \\\n d.target"}
	aliases := []string{"ga.service", "ga@.service", "ga@y.service", "g.service", "g@.service", "x.target.wants/g.service",
		"x.target.wants/g@i.service", "ga.socket", "%p-alias.service", "%p-alias@.service", "y.wants/g.service"}
	also := []string{"h.service", "missing.service", "g.service", "h@.service", "h@z.service", "bad", "%p-also.service", "h@%i.service", "'h.service'"}
	defaults := []string{"d", "%p", "bad/inst", ""}
	files := map[string]string{
		"etc/systemd/system/h.service":      svc + "[Install]\nWantedBy=h.target\nAlias=ha.service\n",
		"usr/lib/systemd/system/h@.service": svc + "[Install]\nWantedBy=hh.target hi@.target\nDefaultInstance=k\nAlso=h.service\n",
		"etc/systemd/system/g-also.service": svc + "[Install]\nRequiredBy=ga.target\nUpheldBy=up.target\n",
	}
	section := func(lines int) string {
		var b strings.Builder
		b.WriteString("[Install]\n")
		for range lines {
			switch r.IntN(7) {
			case 0:
				fmt.Fprintf(&b, "WantedBy=%s\n", pick(targets))
			case 1:
				fmt.Fprintf(&b, "RequiredBy=%s\n", pick(targets))
			case 2:
				fmt.Fprintf(&b, "Alias=%s\n", pick(aliases))
			case 3:
				fmt.Fprintf(&b, "Also=%s\n", pick(also))
			case 4:
				fmt.Fprintf(&b, "DefaultInstance=%s\n", pick(defaults))
			case 5:
				fmt.Fprintf(&b, "WantedBy=%s %s\n", pick(targets), pick(targets))
			case 6:
				fmt.Fprintf(&b, "UpheldBy=%s\n", pick(targets))
			}
		}
		return b.String()
	}
	// The unit draws its section as the drop-ins do (same random sequence).
	install := section(r.IntN(6) + 1)
	c := enableCase{files: files}
	unit := "g.service"
	switch r.IntN(3) {
	case 0:
		c.enable = "g.service"
	case 1:
		unit, c.enable = "g@.service", "g@.service"
	case 2:
		unit, c.enable = "g@.service", "g@i.service"
	}
	files["etc/systemd/system/"+unit] = svc + install
	// Sometimes drop-ins, in both directories, some with the same name.
	if r.IntN(3) == 0 {
		for range r.IntN(3) + 1 {
			dir := pick([]string{"etc/systemd/system/", "usr/lib/systemd/system/"})
			name := pick([]string{"10.conf", "20.conf", "05.conf", "x.txt"})
			owner := unit
			if c.enable == "g@i.service" && r.IntN(2) == 0 {
				owner = "g@i.service"
			}
			files[dir+owner+".d/"+name] = section(r.IntN(3) + 1)
		}
	}
	return c
}

// TestOracleRandom compares EnableLinks with systemctl on generated units
// (fixed seed, bounded count). Host-dependent specifiers (%H, ...), which
// EnableLinks refuses on purpose, are left out.
func TestOracleRandom(t *testing.T) {
	bin := regtest.Require(t, "systemctl")
	n := 150
	if testing.Short() {
		n = 50
	}
	r := rand.New(rand.NewPCG(2, 52))
	for i := range n {
		c := randomCase(r)
		dir := t.TempDir()
		writeTree(t, dir, c.files)
		got, err := ours252(dir, c.enable)
		want, out, failed := systemctlEnable(t, bin, dir, c.enable)
		unit := dumpTree(c.files)
		if failed != (err != nil) {
			t.Errorf("case %d: enable %s\n%s\nsystemctl failed=%v, EnableLinks err=%v\n%s", i, c.enable, unit, failed, err, out)
			continue
		}
		if !equalLinks(got, want) {
			t.Errorf("case %d: enable %s\n%s\n ours      %v\n systemctl %v\n%s", i, c.enable, unit, got, want, out)
		}
	}
}

// ours252 is EnableLinks as systemctl 252 behaves: without UpheldBy=, a key
// it does not know (EnableLinks supports it on purpose, see the package
// comment).
func ours252(dir, name string) ([]Link, error) {
	fsys := os.DirFS(dir)
	strip := func(u UnitFile) UnitFile {
		u.Install.UpheldBy = nil
		return u
	}
	u, err := LoadFromFS(fsys, name)
	if err != nil {
		return nil, err
	}
	look := FSLookup(fsys)
	return EnableLinks(strip(u), func(n string) (UnitFile, bool) {
		u, ok := look(n)
		return strip(u), ok
	})
}

func dumpTree(files map[string]string) string {
	var names []string
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		if strings.HasPrefix(n, "etc/systemd/system/h.service") || strings.HasPrefix(n, "usr/lib/systemd/system/h@") || strings.HasPrefix(n, "etc/systemd/system/g-also") {
			continue
		}
		fmt.Fprintf(&b, "--- %s\n%s", n, files[n])
	}
	return b.String()
}
