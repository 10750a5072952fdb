// Package prune deletes the pool images a registry repository (or an OCI
// layout) no longer needs, with their signature, attestation and SBOM
// tags: it keeps the last N good images of every pool and every image
// still in use.
//
// An image is in use when a reference names its digest: a PoolImage's
// status (current image, build history) or its published ConfigMap, a
// MachineConfig's osImageURL that a MachineConfigPool or a Node still
// references, a Node's layered-image annotations, a bootc-operator
// BootcNode (booted, staged, rollback, desired) or BootcNodePool, a tag,
// a kept index (its platform images) or an image's base. References match
// by digest, whatever repository they name, so a mirror's or a copy's
// reference keeps the image too.
//
// The order of "newest" never comes from the image config's creation
// time, which reproducible builds fix: an image is dated by its build
// record (the "sha256-HEX.rec" artifact every build writes before
// anything else names the image, publish/record; a PoolImage's
// status.builds[].time, or status.lastBuildTime for status.image) or, in
// an OCI layout, by the time its manifest was written. An image nothing
// dates takes no place among the newest and is kept: nothing says it is
// older than a dated one, and digests say nothing of age
// (Policy.DeleteUndated deletes it when nothing uses it).
//
// The stages: Collect reads the references (Sources), List reads the
// repositories, Decide marks each image kept (with why) or deleted, and
// Apply deletes, probing first that the registry accepts DELETE and
// checking the references, the tags and the image's build record again
// right before each image (a build that published it again since the
// listing wrote a new record: the image is kept).
package prune
