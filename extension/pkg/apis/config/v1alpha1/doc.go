// Package v1alpha1 is the versioned providerConfig of oslayer's Gardener
// OS extension: spec.providerConfig of an OperatingSystemConfig of the
// extension's type (the worker pool's machine image providerConfig) is an
// OperatingSystemConfiguration, and status.providerStatus the
// OperatingSystemConfigurationStatus the extension records there.
//
// +groupName=oslayer.os.extensions.gardener.cloud
package v1alpha1
