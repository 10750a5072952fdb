// Package nodeside is what oslayer's Gardener OS extension puts on a
// node, independent of the extension library that drives it: the
// provision user data (Ignition v3) that boots a new machine and pivots
// it onto the pool image, the extension files and units a reconcile adds
// (the pool-image record and the in-place update command), and the
// status.inPlaceUpdates.osUpdate command gardener-node-agent runs.
//
// The controller (the extension module's actuator, built on Gardener's
// extension library) builds the pool image with the shared pipeline and
// calls this package for the node side. docs/extension-node.md describes
// what lands on a node and the update command's contract.
package nodeside
