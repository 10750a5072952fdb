// Package v1alpha1 holds the oslayer.dev/v1alpha1 API: PoolImage, the
// in-cluster build service's request for one pool's image (where its
// configuration comes from, the base, the target, signing and preflight)
// and what the controller recorded about it (status).
//
// The CRD under config/crd is generated from these types by controller-gen
// (go generate ./api/...); edit the types, not the YAML.
//
// +kubebuilder:object:generate=true
// +groupName=oslayer.dev
package v1alpha1

//go:generate go run sigs.k8s.io/controller-tools/cmd/controller-gen@v0.23.0 object paths=./... crd:crdVersions=v1 output:crd:dir=../../config/crd
