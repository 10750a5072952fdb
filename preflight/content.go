package preflight

import (
	"archive/tar"
	"context"
	"fmt"
	"path"
	"sort"
	"strings"
)

// maxRuleFindings bounds the findings of one content rule in one layer; the
// rest are summed up in one more finding.
const maxRuleFindings = 20

// contentCheck mirrors `bootc container lint` on the added layers: what
// ostree drops, masks or refuses when it imports the layers on a node.
// Rule names follow bootc's lint names where one exists.
type contentCheck struct{}

func (contentCheck) Name() string       { return "content" }
func (contentCheck) Severity() Severity { return Error }
func (contentCheck) Needs() Needs       { return NeedAdded }

// varLinks are the top-level directories that are symlinks into /var (or
// /run) on Fedora CoreOS and RHCOS.
var varLinks = map[string]string{"opt": "var/opt", "root": "var/roothome", "home": "var/home", "srv": "var/srv", "mnt": "var/mnt", "media": "run/media"}

// usrMerged are the top-level symlinks into /usr.
var usrMerged = map[string]bool{"bin": true, "sbin": true, "lib": true, "lib64": true}

// standardTop are the top-level directories a layer may name (content
// rules for each follow).
var standardTop = map[string]bool{"usr": true, "etc": true, "var": true, "boot": true, "run": true, "tmp": true, "proc": true, "sys": true, "dev": true, "sysroot": true}

// underDir reports whether p is strictly below dir.
func underDir(p, dir string) bool { return strings.HasPrefix(p, dir+"/") }

type ruleCollector struct {
	c      Check
	l      *LayerContent
	counts map[string]int
	out    []Finding
}

func (rc *ruleCollector) add(rule string, sev Severity, p, msg string) {
	rc.counts[rule]++
	if rc.counts[rule] > maxRuleFindings {
		return
	}
	f := rc.l.Finding(rc.c, sev, p, msg)
	f.Rule = rule
	rc.out = append(rc.out, f)
}

func (rc *ruleCollector) finish(sevOf map[string]Severity) []Finding {
	rules := make([]string, 0, len(rc.counts))
	for r := range rc.counts {
		rules = append(rules, r)
	}
	sort.Strings(rules)
	for _, r := range rules {
		if n := rc.counts[r] - maxRuleFindings; n > 0 {
			f := rc.l.Finding(rc.c, sevOf[r], "", fmt.Sprintf("... and %d more %s findings in this layer", n, r))
			f.Rule = r
			rc.out = append(rc.out, f)
		}
	}
	return rc.out
}

func (c contentCheck) Run(ctx context.Context, t *Target) ([]Finding, error) {
	var out []Finding
	baseKernel := t.Labels[LabelOstreeLinux]
	if _, bc, _ := t.base(); bc != nil && bc.Config.Labels[LabelOstreeLinux] != "" {
		baseKernel = bc.Config.Labels[LabelOstreeLinux]
	}
	// kernels: release → layer digest and path where it was added ("" for the base's).
	type kernelAt struct{ layer, path string }
	kernels := map[string]kernelAt{}
	if baseKernel != "" {
		kernels[baseKernel] = kernelAt{}
	}
	sevOf := map[string]Severity{}
	for _, l := range t.Added {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		rc := &ruleCollector{c: c, l: l, counts: map[string]int{}}
		add := func(rule string, sev Severity, p, msg string) {
			sevOf[rule] = sev
			rc.add(rule, sev, p, msg)
		}
		for i := range l.Entries {
			e := &l.Entries[i]
			p := e.Path
			if e.Whiteout || e.Opaque {
				if kv, ok := strings.CutPrefix(p, "usr/lib/modules/"); ok && !strings.Contains(kv, "/") {
					delete(kernels, kv)
				}
				continue
			}
			if e.RawName != "" {
				add("utf8", Error, strings.ToValidUTF8(p, "\uFFFD"), fmt.Sprintf("name %q (or its link target) is not valid UTF-8: ostree refuses it; rename the file", e.RawName))
				continue
			}
			top, _, _ := strings.Cut(p, "/")
			switch {
			case p == "":
			case varLinks[top] != "" || p == "usr/local" || underDir(p, "usr/local"):
				if !(e.IsSymlink() && (p == top || p == "usr/local")) {
					d, to := top, varLinks[top]
					if top == "usr" {
						d, to = "usr/local", "var/usrlocal"
					}
					add("var-symlinks", Warning, p, fmt.Sprintf("/%s is a symlink to /%s on Fedora CoreOS and RHCOS: this entry replaces the link or only lands on the first deployment; ship it under usr/ (e.g. usr/lib/NAME, usr/bin) instead", d, to))
				}
			case usrMerged[top]:
				if !(e.IsSymlink() && p == top) {
					add("usrmerge", Error, p, fmt.Sprintf("/%s is a symlink to /usr/%s: write the entry under usr/%s instead", top, top, top))
				}
			case !standardTop[top]:
				add("toplevel", Warning, p, fmt.Sprintf("top-level directory /%s only survives on composefs bases; put the content under usr/", top))
			case top == "sysroot":
				add("sysroot", Error, p, "sysroot/ must never appear in a layer: it is the physical root of the node; remove it")
			case top == "usr" && (p == "usr/etc" || underDir(p, "usr/etc")):
				add("etc-usretc", Error, p, "usr/etc/ is where ostree keeps the image's /etc: never write it; put the file under etc/")
			case top == "run" || top == "tmp":
				if p != top {
					add("nonempty-run-tmp", Warning, p, fmt.Sprintf("%s/ is a tmpfs on the node: this entry is dropped; remove it from the layer (create it at runtime with a tmpfiles.d rule)", top))
				}
			case top == "boot":
				if p != top {
					add("nonempty-boot", Warning, p, "boot/ content of a layer is masked on the node: it is never installed; remove it")
				}
			case top == "proc" || top == "sys" || top == "dev":
				if p != top {
					add("api-base-directories", Error, p, fmt.Sprintf("%s/ is an API filesystem: content under it is dropped; remove it from the layer", top))
				}
			case p == "var/run":
				if !e.IsSymlink() {
					add("var-run", Error, p, "var/run must stay a symlink to ../run; do not create it as a directory or file")
				}
			case top == "var" && (underDir(p, "var/log")) && !e.IsDir():
				add("var-log", Warning, p, "var/log content only lands on the first deployment and mixes with the node's logs; remove it")
			case top == "var" && p != "var" && !e.IsDir():
				add("var-tmpfiles", Warning, p, "var/ content only lands on the first deployment and is never updated; ship it under usr/ and create it with a usr/lib/tmpfiles.d rule (L+ or C)")
			}
			switch e.Type {
			case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
				kind := map[byte]string{tar.TypeChar: "character device", tar.TypeBlock: "block device", tar.TypeFifo: "FIFO"}[e.Type]
				add("special-files", Error, p, fmt.Sprintf("%s entries are refused by ostree: only directories, regular files and symlinks; remove it", kind))
			case tar.TypeLink:
				if !e.LinkInLayer {
					add("hardlinks", Error, p, fmt.Sprintf("hard link to %q, which is not an earlier entry of this layer: ostree cannot import it; copy the file or use a symlink", e.Linkname))
				}
			case tar.TypeReg, tar.TypeRegA, tar.TypeDir, tar.TypeSymlink:
			default:
				if e.Mode&0o140000 == 0o140000 {
					add("special-files", Error, p, "socket entries are refused by ostree; remove it")
				}
			}
			if top == "usr" && (e.UID != 0 || e.GID != 0) {
				add("usr-owner", Warning, p, fmt.Sprintf("owned by %d:%d: files under usr/ should be root-owned; fix the owner (COPY --chown=0:0) or use usr/lib/sysusers.d and tmpfiles.d", e.UID, e.GID))
			}
			if e.SELinux {
				add("selinux-xattr", Warning, p, "carries a security.selinux xattr: labels come from the node's policy; build without --preserve xattrs")
			}
			if kv, ok := strings.CutPrefix(p, "usr/lib/modules/"); ok && path.Base(p) == "vmlinuz" && path.Dir(kv) != "." && !strings.Contains(path.Dir(kv), "/") {
				kernels[path.Dir(kv)] = kernelAt{layer: l.Digest.String(), path: p}
			}
			if underDir(p, "usr/lib/bootc/kargs.d") && strings.HasSuffix(p, ".toml") && e.IsReg() {
				f, ok := l.Files[p]
				switch {
				case !ok || f.Truncated:
					add("bootc-kargs", Error, p, "kargs file too large to check (over the scan limit)")
				default:
					if _, _, err := ParseKargs(f.Data); err != nil {
						add("bootc-kargs", Error, p, fmt.Sprintf("invalid kernel arguments file: %v; bootc refuses to deploy it", err))
					}
				}
			}
			if (p == "etc/passwd" || p == "etc/group" || p == "etc/shadow" || p == "etc/gshadow") && e.IsReg() {
				add("sysusers", Warning, p, "users and groups added by editing /etc/passwd or /etc/group do not merge with the node's own (ostree 3-way merge keeps the local file); declare them in usr/lib/sysusers.d/*.conf")
			}
			if (p == "etc/hostname" || p == "etc/resolv.conf") && e.IsReg() && e.Size == 0 {
				add("buildah-injected", Warning, p, "empty file left by the build tool (buildah/podman inject it during RUN): remove it, it would hide the node's own")
			}
		}
		out = append(out, rc.finish(sevOf)...)
	}
	if len(kernels) > 1 {
		var rels []string
		for k := range kernels {
			rels = append(rels, k)
		}
		sort.Strings(rels)
		var f Finding
		for _, k := range rels {
			if kernels[k].layer != "" {
				f = Finding{Layer: kernels[k].layer, Path: kernels[k].path}
				break
			}
		}
		f.Rule = "kernel"
		f.Message = fmt.Sprintf("the image has %d kernels under usr/lib/modules (%s): exactly one is allowed; remove the base kernel (usr/lib/modules/%s) when installing another", len(rels), strings.Join(rels, ", "), baseKernel)
		out = append(out, f)
	}
	return out, nil
}
