package machineconfig

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"

	igntypes "github.com/coreos/ignition/v2/config/v3_6_experimental/types"
	"github.com/oslayer/oslayer/internal/field"
)

// Where Ignition finds users and groups in the root it writes to: through
// the root's NSS, which on Fedora CoreOS and RHCOS reads /etc/passwd, then
// the nss-altfiles databases in /usr/lib (most system users and groups,
// and the "core" user, live there). /usr/etc is ostree's copy of the
// image's /etc and is read when the base has no /etc copy of a file.
var (
	passwdFiles = [][]string{{"etc/passwd", "usr/etc/passwd"}, {"usr/lib/passwd"}}
	groupFiles  = [][]string{{"etc/group", "usr/etc/group"}, {"usr/lib/group"}}
)

// assumedIDs are the ids of Fedora CoreOS and RHCOS used for names when no
// base tree can be read (render without a base, --base-index=off, or a
// base tree without any passwd/group file): root is 0, and the "core"
// user and group are 1000 on both.
var assumedIDs = map[string]int{"root": 0, "core": 1000}

// owners resolves Ignition user and group names to numeric ids through the
// base's user database, as ignition-apply does in the image root.
type owners struct {
	base     fs.FS
	baseName string
	users    map[string]int // nil until loaded; empty when the base has none
	groups   map[string]int
	loadErr  error
	assumed  map[string]bool // "user core" etc., reported once
	warnings []string
}

func newOwners(base fs.FS, baseName string) *owners {
	if baseName == "" {
		baseName = "the base image"
	}
	return &owners{base: base, baseName: baseName, assumed: map[string]bool{}}
}

func (o *owners) load() {
	if o.users != nil || o.loadErr != nil {
		return
	}
	o.users, o.groups = map[string]int{}, map[string]int{}
	if o.base == nil {
		return
	}
	if err := readIDs(o.base, passwdFiles, 2, o.users); err != nil {
		o.loadErr = err
		return
	}
	if err := readIDs(o.base, groupFiles, 2, o.groups); err != nil {
		o.loadErr = err
	}
}

// readIDs reads name → id (field idx, 0-based) from the first existing file
// of each alternative set, earlier sets winning for a name, as NSS does.
func readIDs(fsys fs.FS, sets [][]string, idx int, into map[string]int) error {
	for _, alts := range sets {
		for _, p := range alts {
			data, err := fs.ReadFile(fsys, p)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return fmt.Errorf("reading /%s: %v", p, err)
			}
			sc := bufio.NewScanner(bytes.NewReader(data))
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				line := sc.Text()
				if line == "" || strings.HasPrefix(line, "#") {
					continue
				}
				f := strings.Split(line, ":")
				if len(f) <= idx || f[0] == "" {
					continue
				}
				id, err := strconv.Atoi(f[idx])
				if err != nil || id < 0 {
					continue
				}
				if _, ok := into[f[0]]; !ok {
					into[f[0]] = id
				}
			}
			if err := sc.Err(); err != nil {
				return fmt.Errorf("reading /%s: %v", p, err)
			}
			break
		}
	}
	return nil
}

// resolve returns the ids of an Ignition user and group: an id when given,
// else the name looked up in the base (unset means root, as in Ignition).
// Errors name the field inside the item ("user.name") and the base.
func (o *owners) resolve(u igntypes.NodeUser, g igntypes.NodeGroup) (int, int, error) {
	uid, err := o.ident("user", u.ID, u.Name)
	if err != nil {
		return 0, 0, err
	}
	gid, err := o.ident("group", g.ID, g.Name)
	if err != nil {
		return 0, 0, err
	}
	return uid, gid, nil
}

func (o *owners) ident(what string, id *int, name *string) (int, error) {
	if id != nil {
		if *id < 0 {
			return 0, fmt.Errorf("%s.id %d is negative", what, *id)
		}
		return *id, nil
	}
	if name == nil || *name == "" {
		return 0, nil
	}
	n := *name
	o.load()
	if o.loadErr != nil {
		return 0, fmt.Errorf("%s.name %q: %s: %v", what, n, o.baseName, o.loadErr)
	}
	db, file := o.users, "/etc/passwd or /usr/lib/passwd"
	if what == "group" {
		db, file = o.groups, "/etc/group or /usr/lib/group"
	}
	if len(db) > 0 {
		if v, ok := db[n]; ok {
			return v, nil
		}
		if n == "root" {
			return 0, nil
		}
		return 0, fmt.Errorf("%s.name %q: no such %s in %s of %s", what, n, what, file, o.baseName)
	}
	v, ok := assumedIDs[n]
	if !ok {
		if o.base == nil {
			return 0, field.Errorf("%s.name %q: no base image tree to resolve it through (build with %v); give a numeric id", what, n, field.Name("base"))
		}
		return 0, fmt.Errorf("%s.name %q: %s has no %s to resolve it through; give a numeric id", what, n, o.baseName, file)
	}
	if key := what + " " + n; n != "root" && !o.assumed[key] {
		o.assumed[key] = true
		why := "no base image tree was read"
		if o.base != nil {
			why = fmt.Sprintf("%s has no %s", o.baseName, file)
		}
		o.warnings = append(o.warnings, fmt.Sprintf("%s %q resolved to %d as on Fedora CoreOS and RHCOS: %s", what, n, v, why))
	}
	return v, nil
}
