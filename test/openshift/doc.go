// Package openshift holds tests of what oslayer writes for OpenShift
// against OpenShift's own API definitions (github.com/openshift/api at the
// version the main module pins). It is a separate module so the
// Kubernetes API server packages stay out of the main module.
package openshift
