package preflight

import (
	"fmt"
	"strings"
)

// usrOwnerRule warns about files under usr/ that are not root-owned.
func usrOwnerRule(r *ruleCollector, e *Entry) {
	if (e.Path == "usr" || underDir(e.Path, "usr")) && (e.UID != 0 || e.GID != 0) {
		r.add("usr-owner", Warning, e.Path, fmt.Sprintf("owned by %d:%d: files under usr/ should be root-owned; fix the owner (COPY --chown=0:0) or use usr/lib/sysusers.d and tmpfiles.d", e.UID, e.GID))
	}
}

// selinuxRule warns about security.selinux xattrs: the node's policy
// labels files.
func selinuxRule(r *ruleCollector, e *Entry) {
	if e.SELinux {
		r.add("selinux-xattr", Warning, e.Path, "carries a security.selinux xattr: labels come from the node's policy; build without --preserve xattrs")
	}
}

// kargsRule parses bootc's kernel argument files as bootc would.
func kargsRule(r *ruleCollector, e *Entry) {
	p := e.Path
	if !underDir(p, "usr/lib/bootc/kargs.d") || !strings.HasSuffix(p, ".toml") || !e.IsReg() {
		return
	}
	f, ok := r.l.Files[p]
	if !ok || f.Truncated {
		r.add("bootc-kargs", Error, p, "kargs file too large to check (over the scan limit)")
		return
	}
	if _, _, err := ParseKargs(f.Data); err != nil {
		r.add("bootc-kargs", Error, p, fmt.Sprintf("invalid kernel arguments file: %v; bootc refuses to deploy it", err))
	}
}

// sysusersRule warns about users and groups added by editing the account
// files, which do not merge with the node's own.
func sysusersRule(r *ruleCollector, e *Entry) {
	switch e.Path {
	case "etc/passwd", "etc/group", "etc/shadow", "etc/gshadow":
		if e.IsReg() {
			r.add("sysusers", Warning, e.Path, "users and groups added by editing /etc/passwd or /etc/group do not merge with the node's own (ostree 3-way merge keeps the local file); declare them in usr/lib/sysusers.d/*.conf")
		}
	}
}

// injectedRule warns about the empty files buildah and podman leave
// behind from RUN.
func injectedRule(r *ruleCollector, e *Entry) {
	if (e.Path == "etc/hostname" || e.Path == "etc/resolv.conf") && e.IsReg() && e.Size == 0 {
		r.add("buildah-injected", Warning, e.Path, "empty file left by the build tool (buildah/podman inject it during RUN): remove it, it would hide the node's own")
	}
}
