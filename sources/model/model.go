// Package model is the neutral description of a node configuration that every
// source (Gardener OperatingSystemConfig, OpenShift MachineConfig) decodes into
// and that the layer renderer consumes.
//
// A Config says what should exist on the node and where each item came from;
// it says nothing about ostree placement, tar layout or images. Sources fill it
// in, package layers turns it into a file tree and layers.
package model

import (
	"context"
	"fmt"

	"github.com/oslayer/oslayer/internal/field"
)

// Origin names the input document and the field inside it that produced an item.
// Every error, report line and provenance record carries one.
type Origin struct {
	// Document is the file the item was read from (as given on the command
	// line), or "Secret NAMESPACE/NAME" for content that came from a Secret.
	// The ownership manifest inside the image leaves file names out.
	Document string `json:"document,omitempty"`
	// Kind is the document's kind: "OperatingSystemConfig" or "MachineConfig".
	Kind string `json:"kind"`
	// Name is the object's metadata.name.
	Name string `json:"name,omitempty"`
	// Field is the path inside the object, e.g. "spec.files[3]" or
	// "spec.config.storage.files[2]".
	Field string `json:"field"`
}

// String renders the origin for error messages: "FILE (Kind NAME) FIELD".
func (o Origin) String() string {
	s := o.Document
	if o.Kind != "" || o.Name != "" {
		s += fmt.Sprintf(" (%s %s)", o.Kind, o.Name)
	}
	if o.Field != "" {
		s += " " + o.Field
	}
	return s
}

// File is a regular file with resolved content.
type File struct {
	Path string `json:"path"` // absolute, as the source wrote it
	Mode uint32 `json:"mode"` // permission bits incl. setuid/setgid/sticky (07777)
	UID  int    `json:"uid"`
	GID  int    `json:"gid"`
	Data []byte `json:"-"`
	// FromImage is set for content fetched from an image (Gardener imageRef):
	// the image reference with digest. Such content is large and stable and
	// goes to its own layer.
	FromImage string `json:"fromImage,omitempty"`
	// Secret is true when the content came from a Secret (secretRef) and was
	// baked because the user opted in.
	Secret bool `json:"secret,omitempty"`
	// Ignition is the SHA-256 of the merged Ignition file entry
	// (MachineConfigs only): the machine-config daemon compares the whole
	// entry, so a new data URL encoding, compression or overwrite flag of
	// the same content is a change to it.
	Ignition string `json:"ignition,omitempty"`
	Origin   Origin `json:"origin"`
}

// Dir is a directory the configuration asks for explicitly.
type Dir struct {
	Path   string `json:"path"`
	Mode   uint32 `json:"mode"`
	UID    int    `json:"uid"`
	GID    int    `json:"gid"`
	Origin Origin `json:"origin"`
}

// Link is a symbolic link, or a hard link when Hard is set.
type Link struct {
	Path   string `json:"path"`
	Target string `json:"target"`
	Hard   bool   `json:"hard,omitempty"`
	UID    int    `json:"uid"`
	GID    int    `json:"gid"`
	Origin Origin `json:"origin"`
}

// DropIn is a systemd drop-in for a unit: /etc/systemd/system/UNIT.d/NAME.
type DropIn struct {
	Name     string `json:"name"`
	Contents string `json:"-"`
	Origin   Origin `json:"origin"`
}

// Unit is a systemd unit the configuration writes, enables, disables or masks.
type Unit struct {
	Name string `json:"name"`
	// Contents is nil when the unit ships with the OS and only drop-ins or
	// enablement are configured.
	Contents *string `json:"-"`
	// Enabled: nil leaves enablement alone, true enables, false disables.
	Enabled *bool    `json:"enabled,omitempty"`
	Mask    bool     `json:"mask,omitempty"`
	DropIns []DropIn `json:"dropIns,omitempty"`
	// FileMode is the mode of the unit file and its drop-ins; 0 means 0644
	// (Ignition). gardener-node-agent writes them 0600.
	FileMode uint32 `json:"fileMode,omitempty"`
	// StartOnApply is set when the source's agent starts (restarts) the
	// unit whenever it applies the configuration (gardener-node-agent does
	// for every unit it does not stop). Such a unit runs on the agent's
	// nodes even without enablement links; the image starts it at boot.
	StartOnApply bool `json:"startOnApply,omitempty"`
	// ClearDropIns is set when the source's agent removes the unit's
	// drop-in directory /etc/systemd/system/NAME.d because the unit has no
	// drop-ins (gardener-node-agent does): drop-ins the base ships there
	// are gone on the node.
	ClearDropIns bool   `json:"clearDropIns,omitempty"`
	Origin       Origin `json:"origin"`
}

// Runtime is an input item that cannot be part of a per-pool image and must
// be delivered on the node at runtime (or is not representable at all). It is
// reported, never silently dropped.
type Runtime struct {
	// Item names what was skipped: a path, a unit, or a field such as
	// "spec.criConfig".
	Item   string `json:"item"`
	Reason string `json:"reason"`
	// SHA256 is the digest of a runtime-delivered file's content, when
	// the input has it, so that a change of it is seen.
	SHA256 string `json:"sha256,omitempty"`
	Origin Origin `json:"origin"`
}

// Input is one input document, recorded for the report and for provenance.
type Input struct {
	Path   string `json:"path"`
	Kind   string `json:"kind"`
	Name   string `json:"name,omitempty"`
	SHA256 string `json:"sha256"`
}

// Config is a decoded, merged node configuration for one pool.
type Config struct {
	Files []File `json:"files,omitempty"`
	Dirs  []Dir  `json:"dirs,omitempty"`
	Links []Link `json:"links,omitempty"`
	Units []Unit `json:"units,omitempty"`

	// KernelArgs accumulate over all MachineConfigs of the pool, in order.
	KernelArgs []string `json:"kernelArgs,omitempty"`
	// Extensions and KernelType need a package stage; render lists them as
	// required packages and build refuses them until that stage exists.
	Extensions []string `json:"extensions,omitempty"`
	KernelType string   `json:"kernelType,omitempty"`
	// OSImageURL is the MachineConfig pool's base image, if any was given.
	OSImageURL string `json:"osImageURL,omitempty"`

	Runtime  []Runtime `json:"runtime,omitempty"`
	Warnings []string  `json:"warnings,omitempty"`
	Inputs   []Input   `json:"inputs,omitempty"`
}

// ImageFiles reads single files out of container images. Gardener imageRef
// files use it. Implementations return what a container runtime unpacking
// the image leaves at the path (last tar entry wins, whiteouts, parents
// replaced in upper layers), and cache by image digest. The returned data
// must not be modified.
type ImageFiles interface {
	// ReadFile returns the content and mode of path inside image, and the
	// image reference pinned by digest ("REG/REPO@sha256:...").
	ReadFile(ctx context.Context, image, path string) (data []byte, mode uint32, pinned string, err error)
}

// Error is a problem with one input item. Sources and the renderer return it
// (possibly wrapped or joined) so that a user sees the document and the field.
type Error struct {
	Origin Origin
	Path   string // the node path concerned, if any
	Msg    string
	// msg is Msg naming specification fields (field.Name arguments),
	// for Spell; nil when Msg names none.
	msg *field.Error
}

func (e *Error) Error() string { return e.text(e.Msg) }

func (e *Error) text(msg string) string {
	if e.Path != "" {
		return fmt.Sprintf("%s: %s: %s", e.Origin, e.Path, msg)
	}
	return fmt.Sprintf("%s: %s", e.Origin, msg)
}

// Spell is the error with the specification fields its message names
// (field.Name arguments of Errorf: pool, secretsDir) spelled by spell.
func (e *Error) Spell(spell func(field.Name) string) string {
	if e.msg == nil {
		return e.Error()
	}
	return e.text(e.msg.Spell(spell))
}

// Errorf builds an *Error; field.Name arguments name specification
// fields (Spell).
func Errorf(o Origin, path, format string, args ...any) *Error {
	msg := field.Errorf(format, args...)
	e := &Error{Origin: o, Path: path, Msg: msg.Error()}
	if msg.Names() {
		e.msg = msg
	}
	return e
}
