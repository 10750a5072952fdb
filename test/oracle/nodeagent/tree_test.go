package nodeagent

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// node is what a node sees at one path: type, permission bits (with
// setuid, setgid and sticky), owner, and content digest or link target.
type node struct {
	Type byte // 'd', 'f', 'l' or '?'
	Mode uint32
	UID  int
	GID  int
	Sum  string // regular files
	Link string // symlinks
}

func (n node) String() string {
	switch n.Type {
	case 'l':
		return "symlink -> " + n.Link
	case 'd':
		return fmt.Sprintf("dir %04o %d:%d", n.Mode, n.UID, n.GID)
	case 'f':
		return fmt.Sprintf("file %04o %d:%d", n.Mode, n.UID, n.GID)
	}
	return "other"
}

// skipTop are the API file systems and runtime directories a node never
// takes from an image or a config (and ostree's sysroot).
var skipTop = map[string]bool{"proc": true, "sys": true, "dev": true, "run": true, "tmp": true, "sysroot": true, "boot": true}

// snapshot records every path under root without following symlinks.
func snapshot(root string) (map[string]node, error) {
	out := map[string]node{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		if top, _, _ := strings.Cut(rel, string(filepath.Separator)); skipTop[top] && rel != top {
			return filepath.SkipDir
		}
		n, err := stat(p)
		if err != nil {
			return err
		}
		out["/"+filepath.ToSlash(rel)] = n
		return nil
	})
	return out, err
}

func stat(p string) (node, error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return node{}, err
	}
	st, _ := fi.Sys().(*syscall.Stat_t)
	n := node{Type: '?'}
	if st != nil {
		n.Mode = st.Mode & 0o7777
		n.UID, n.GID = int(st.Uid), int(st.Gid)
	}
	switch {
	case fi.Mode().IsDir():
		n.Type = 'd'
	case fi.Mode().IsRegular():
		n.Type = 'f'
		f, err := os.Open(p)
		if err != nil {
			return node{}, err
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return node{}, err
		}
		n.Sum = hex.EncodeToString(h.Sum(nil))
	case fi.Mode()&fs.ModeSymlink != 0:
		n.Type = 'l'
		n.Mode, n.UID, n.GID = 0, 0, 0
		if n.Link, err = os.Readlink(p); err != nil {
			return node{}, err
		}
	}
	return n, nil
}

// resolve follows symlinks of p inside root (absolute targets are taken
// relative to root, as on the booted node) and returns the root-relative
// path it ends at.
func resolve(root, p string) (string, error) {
	todo := strings.Split(strings.Trim(path.Clean(p), "/"), "/")
	cur := "/"
	for hops := 0; len(todo) > 0; {
		c := todo[0]
		todo = todo[1:]
		if c == "" || c == "." {
			continue
		}
		if c == ".." {
			cur = path.Dir(cur)
			continue
		}
		next := path.Join(cur, c)
		fi, err := os.Lstat(filepath.Join(root, next))
		if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		if hops++; hops > 40 {
			return "", fmt.Errorf("%s: too many levels of symbolic links", p)
		}
		t, err := os.Readlink(filepath.Join(root, next))
		if err != nil {
			return "", err
		}
		if strings.HasPrefix(t, "/") {
			cur = "/"
		}
		todo = append(strings.Split(strings.Trim(t, "/"), "/"), todo...)
	}
	return cur, nil
}

// delta lists the paths whose node differs between before and after
// (added, changed or removed), sorted.
func delta(before, after map[string]node) []string {
	var out []string
	for p, n := range after {
		if b, ok := before[p]; !ok || b != n {
			out = append(out, p)
		}
	}
	for p := range before {
		if _, ok := after[p]; !ok {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// copyTree copies src to dst preserving modes, owners (when permitted) and
// symlinks.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		switch {
		case fi.IsDir():
			if err := os.MkdirAll(to, 0o700); err != nil {
				return err
			}
		case fi.Mode()&fs.ModeSymlink != 0:
			t, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(t, to)
		case fi.Mode().IsRegular():
			in, err := os.Open(p)
			if err != nil {
				return err
			}
			defer in.Close()
			out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o600)
			if err != nil {
				return err
			}
			if _, err := io.Copy(out, in); err != nil {
				out.Close()
				return err
			}
			if err := out.Close(); err != nil {
				return err
			}
		default:
			return nil
		}
		if os.Geteuid() == 0 {
			if err := os.Lchown(to, int(st.Uid), int(st.Gid)); err != nil {
				return err
			}
		}
		return os.Chmod(to, os.FileMode(st.Mode&0o777)|modeBits(st.Mode))
	})
}

// modeBits converts the setuid, setgid and sticky bits of a stat mode into
// Go's FileMode flags.
func modeBits(m uint32) os.FileMode {
	var fm os.FileMode
	if m&syscall.S_ISUID != 0 {
		fm |= os.ModeSetuid
	}
	if m&syscall.S_ISGID != 0 {
		fm |= os.ModeSetgid
	}
	if m&syscall.S_ISVTX != 0 {
		fm |= os.ModeSticky
	}
	return fm
}
