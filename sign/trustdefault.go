package sign

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/google/go-containerregistry/pkg/name"
)

// NodeDefault is the default requirement of the node policy Trust writes.
// ostree-rs-ext refuses to pull ostree-image-signed (rpm-ostree rebase,
// bootc switch --enforce-container-sigpolicy) when policy.json's default
// is insecureAcceptAnything, whatever the repository's own entry says
// (bootc-dev/bootc crates/ostree-ext/src/container/skopeo.rs,
// ContainerPolicy::is_default_insecure, checked by store.rs
// ImageImporter::prepare_internal and unencapsulate_base). So the default
// rejects, and the images the node still pulls unsigned are named
// (TrustOptions.AcceptImages).
const NodeDefault = "reject"

// nodeDefault is the policy's default: raw as it is, unless it only
// accepts anything (or is missing), then NodeDefault.
func nodeDefault(raw json.RawMessage) (json.RawMessage, error) {
	if raw == nil {
		return nil, fmt.Errorf("base policy: no \"default\" requirement (containers-policy.json needs one)")
	}
	var reqs []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &reqs); err != nil {
		return nil, fmt.Errorf("base policy: default: %v", err)
	}
	for _, r := range reqs {
		var ty string
		if err := json.Unmarshal(r["type"], &ty); err != nil || ty != "insecureAcceptAnything" {
			return raw, nil
		}
	}
	return json.RawMessage(`[{"type":"` + NodeDefault + `"}]`), nil
}

// acceptScopes are the policy scopes (repositories) of images, sorted and
// distinct; none may be the signed repository's scope.
func acceptScopes(signed string, images []string) ([]string, error) {
	set := map[string]bool{}
	for _, img := range images {
		ref, err := name.ParseReference(img)
		if err != nil {
			return nil, fmt.Errorf("accepted image %q: %v", img, err)
		}
		scope, err := PolicyScope(ref.Context().Name())
		if err != nil {
			return nil, fmt.Errorf("accepted image %q: %v", img, err)
		}
		if scope == signed {
			return nil, fmt.Errorf("accepted image %q: is in the signed repository %s, whose images must be signed", img, signed)
		}
		set[scope] = true
	}
	out := make([]string, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	sort.Strings(out)
	return out, nil
}
