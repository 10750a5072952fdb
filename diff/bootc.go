package diff

import (
	"strings"
)

// selinuxDirs hold the SELinux policy: a change there needs a full
// reboot on bootc.
var selinuxDirs = []string{"/etc/selinux/", "/usr/etc/selinux/", "/usr/share/selinux/"}

// predictBootc says whether `bootc switch|upgrade --apply
// --soft-reboot=auto` can soft-reboot: kernel, initramfs, kernel
// arguments and SELinux policy unchanged.
func predictBootc(r *Result) Prediction {
	pr := Prediction{Platform: PlatformBootc, Action: None}
	if r.Identical {
		return pr
	}
	pr.Action = SoftReboot
	if r.Base.Changed {
		why := "the base changed: kernel and initramfs may differ"
		if r.Base.OldKernel != "" && r.Base.OldKernel == r.Base.NewKernel {
			why = "the base changed (same kernel " + r.Base.OldKernel + "): the initramfs may differ"
		}
		pr.rule(Reboot, "base", why)
	}
	if r.Packages.Changed {
		pr.rule(Reboot, "package stage", "the package stage changed: the kernel or initramfs may differ")
	}
	if r.KernelArgs.Changed {
		pr.rule(Reboot, "kernelArguments", "kernel arguments changed")
	}
	for _, pc := range r.Paths {
		for _, d := range selinuxDirs {
			if strings.HasPrefix(pc.Path, d) {
				pr.rule(Reboot, pc.Path, "SELinux policy changed")
				break
			}
		}
	}
	if pr.Action == SoftReboot {
		pr.Rules = append(pr.Rules, Rule{Item: "image", Rule: "same kernel, initramfs, kernel arguments and SELinux policy: soft reboot eligible (bootc --soft-reboot=auto; not the default)"})
	}
	pr.Drain = true
	return pr
}
