// Package examples holds the inputs of the README's main command: a tiny
// ostree-native-shaped base image as an OCI layout (base/, written by the
// program in gen/), a Gardener worker OperatingSystemConfig (gardener/) and
// OpenShift worker MachineConfigs (openshift/).
//
//	go run ./cmd/oslayer build --base oci:examples/base --pool worker \
//	    --osc examples/gardener/worker-osc.yaml --push oci:out/worker:latest
package examples

//go:generate go run ./gen -out base
