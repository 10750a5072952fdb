package sign

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	configv1 "github.com/openshift/api/config/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// TrustClusterImagePolicyFile is the ClusterImagePolicy Trust writes with
// TrustOptions.ClusterImagePolicy.
const TrustClusterImagePolicyFile = "clusterimagepolicy.yaml"

// ClusterImagePolicy returns an OpenShift ClusterImagePolicy
// (config.openshift.io/v1) requiring a cosign signature by the public key
// pub for the images of repo, with the signature naming that repository
// (MatchRepository, what oslayer signs). On OpenShift the Machine Config
// Operator owns /etc/containers/policy.json and generates it from these
// objects, so this replaces baking the policy into the pool image there.
func ClusterImagePolicy(repo string, pub []byte) ([]byte, error) {
	scope, err := PolicyScope(repo)
	if err != nil {
		return nil, err
	}
	if _, err := ParsePublicKey("public key", pub); err != nil {
		return nil, err
	}
	h := sha256.Sum256([]byte(scope))
	p := configv1.ClusterImagePolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: configv1.GroupVersion.String(), Kind: "ClusterImagePolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: "oslayer-" + hex.EncodeToString(h[:])[:12]},
		Spec: configv1.ClusterImagePolicySpec{
			Scopes: []configv1.ImageScope{configv1.ImageScope(scope)},
			Policy: configv1.Policy{
				RootOfTrust: configv1.PolicyRootOfTrust{
					PolicyType: configv1.PublicKeyRootOfTrust,
					PublicKey:  &configv1.PublicKey{KeyData: pub},
				},
				SignedIdentity: &configv1.PolicyIdentity{MatchPolicy: configv1.IdentityMatchPolicyMatchRepository},
			},
		},
	}
	b, err := yaml.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("ClusterImagePolicy for %s: %w", scope, err)
	}
	return b, nil
}
