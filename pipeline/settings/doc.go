// Package settings is the one wire type of a pool's build settings: the
// fields every front-end writes the same way and embeds inline (a
// PoolImage's spec, a fleet plan's levels, the Gardener extension's
// providerConfig), and the table oslayer build registers its flags from.
// pipeline.Spec.SetSettings is the one mapping onto the build
// specification; defaults and validation are pipeline's.
//
// The package imports nothing of oslayer, so the API types can embed it.
//
// +kubebuilder:object:generate=true
package settings

//go:generate go run sigs.k8s.io/controller-tools/cmd/controller-gen@v0.23.0 object paths=./...
