package nodeside

import (
	"regexp"
	"sort"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
)

// Where the images a node pulls are named.
const (
	// InitScript is gardener-node-init's script; it pulls the node agent's
	// image (gardener pkg/component/extensions/operatingsystemconfig/
	// nodeinit: PathInitScript, templates/scripts/init.tpl.sh, line
	// `image="{{ .image }}"`).
	InitScript = "/var/lib/gardener-node-agent/init.sh"
	// DefaultSandboxImage is containerd's own sandbox (pause) image, used
	// when the OSC names none (`containerd config default` of containerd
	// 2.0.2, as gardener's node-agent tests record it:
	// pkg/nodeagent/controller/operatingsystemconfig/testfiles/
	// containerd-config.toml-v3).
	DefaultSandboxImage = "registry.k8s.io/pause:3.10"
)

// initImageRE is the node agent's image line of InitScript.
var initImageRE = regexp.MustCompile(`(?m)^image="([^"$\x60\\]+)"$`)

// NodeImages are the images a node of the OSCs pulls besides the pool
// image, sorted and distinct: kubelet's pause image (the CRI config's
// sandboxImage, else DefaultSandboxImage), the node agent's (from
// gardener-node-init's script), and every file the OSC takes from an
// image (content.imageRef: kubelet, the node agent, ...). The node's
// signature policy accepts them unsigned (sign.TrustOptions.AcceptImages),
// since its default rejects. Contents that do not decode are skipped: the
// user data refuses them with their field named.
func NodeImages(oscs ...*extensionsv1alpha1.OperatingSystemConfig) []string {
	set := map[string]bool{}
	sandbox := false
	for _, osc := range oscs {
		if c := osc.Spec.CRIConfig; c != nil && c.Containerd != nil && c.Containerd.SandboxImage != "" {
			set[c.Containerd.SandboxImage] = true
			sandbox = true
		}
		for _, f := range osc.Spec.Files {
			switch {
			case f.Content.ImageRef != nil && f.Content.ImageRef.Image != "":
				set[f.Content.ImageRef.Image] = true
			case f.Path == InitScript && f.Content.Inline != nil:
				b, err := fileContent("", f.Content, nil)
				if m := initImageRE.FindSubmatch(b); err == nil && m != nil {
					set[string(m[1])] = true
				}
			}
		}
	}
	if !sandbox {
		set[DefaultSandboxImage] = true
	}
	out := make([]string, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}
