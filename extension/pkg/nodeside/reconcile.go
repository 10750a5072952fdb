package nodeside

import (
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
)

// Modes of the files a reconcile adds.
const (
	poolImageMode     = 0o644
	updateCommandMode = 0o755
)

func extensionFiles(r Reconcile) []extensionsv1alpha1.File {
	return []extensionsv1alpha1.File{
		inlineFile(PoolImageFile, poolImageMode, r.Image+"\n"),
		inlineFile(UpdateCommand, updateCommandMode, updateScript),
	}
}

// extensionUnits is the staging unit. (The update itself runs from
// gardener-node-agent: status.inPlaceUpdates.osUpdate.)
func extensionUnits(Reconcile) []extensionsv1alpha1.Unit {
	enable := true
	content := stageUnit
	return []extensionsv1alpha1.Unit{{
		Name:    StageUnit,
		Enable:  &enable,
		Content: &content,
		// The node agent restarts it when the pool image changes.
		FilePaths: []string{PoolImageFile},
	}}
}

// stageUnit stages the pool image for the node's next boot, at every boot
// and whenever gardener-node-agent writes another pool image: a node that
// joined on the plain base, or on an older image, boots the pool image at
// its next reboot, without a reboot of its own. It does nothing on a
// node that runs the image. Type=simple: the node agent waits for no
// download; --retry outlasts a registry outage. The update command's lock
// keeps it from racing an in-place update. ($$ is systemd's literal $.)
const stageUnit = `[Unit]
Description=oslayer: stage the pool image for the next boot
ConditionPathExists=` + PoolImageFile + `
Wants=network-online.target
After=network-online.target

[Service]
Type=simple
ExecStart=/bin/sh -c 'exec ` + UpdateCommand + ` --retry --stage "$$(cat ` + PoolImageFile + `)"'

[Install]
WantedBy=multi-user.target
`

// inlineFile is an OSC file with plain inline content.
func inlineFile(path string, mode uint32, content string) extensionsv1alpha1.File {
	return extensionsv1alpha1.File{
		Path:        path,
		Permissions: &mode,
		Content:     extensionsv1alpha1.FileContent{Inline: &extensionsv1alpha1.FileContentInline{Data: content}},
	}
}
