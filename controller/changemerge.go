package controller

import (
	"slices"
	"strings"

	"github.com/oslayer/oslayer/api/v1alpha1"
	"github.com/oslayer/oslayer/diff"
)

// addedWhy is the rule of an architecture the published image lacks.
const addedWhy = "not in the published image: its nodes have no image to stay on"

// allPlatforms are the platforms predicted, in diff's order.
var allPlatforms = []string{diff.PlatformOpenShift, diff.PlatformOpenShiftImage, diff.PlatformBootc, diff.PlatformGardener}

// MergeChanges is the status form of a multi-platform change, one
// comparison per architecture of the built index: per platform the most
// disruptive action of the architectures (its why prefixed with the
// architectures when they differ), the overall action the most disruptive
// of theirs, the download summed (and per architecture in
// Architectures), the paths the union (the first maxChangedPaths, by
// path), and a kernel argument, base or package change of any. An
// architecture the published image lacks reboots.
func MergeChanges(from, to string, results []ArchResult) *v1alpha1.ImageChange {
	ch := &v1alpha1.ImageChange{From: from, To: to, Action: string(diff.None)}
	var paths []diff.PathChange
	for _, ar := range results {
		ac := archChange(ar)
		ch.Architectures = append(ch.Architectures, ac)
		ch.Action = string(diff.Max(diff.Action(ch.Action), diff.Action(ac.Action)))
		ch.DownloadBytes += ac.DownloadBytes
		ch.DownloadLayers += ac.DownloadLayers
		if res := ar.Result; res != nil {
			ch.KernelArgs = ch.KernelArgs || res.KernelArgs.Changed
			ch.Base = ch.Base || res.Base.Changed
			ch.Packages = ch.Packages || res.Packages.Changed
			paths = unionPaths(paths, res.Paths)
		}
	}
	ch.PathsTotal = int32(len(paths))
	ch.Paths = changedPaths(paths)
	for _, name := range allPlatforms {
		if pa, ok := mergePlatform(name, results); ok {
			ch.Platforms = append(ch.Platforms, pa)
		}
	}
	return ch
}

// archChange is one architecture's entry of status.change.architectures.
func archChange(ar ArchResult) v1alpha1.ArchChange {
	ac := v1alpha1.ArchChange{Architecture: ar.Arch, Added: ar.Added}
	if ar.Added || ar.Result == nil {
		ac.Action, ac.DownloadBytes, ac.DownloadLayers = string(diff.Reboot), ar.AddedBytes, int32(ar.AddedLayers)
		return ac
	}
	ac.Action = string(ar.Result.Action)
	ac.DownloadBytes, ac.DownloadLayers = ar.Result.Download.Bytes, int32(ar.Result.Download.Layers)
	return ac
}

// unionPaths adds the paths of add that have no entry in paths, keeping
// them ordered by path.
func unionPaths(paths, add []diff.PathChange) []diff.PathChange {
	for _, pc := range add {
		if !slices.ContainsFunc(paths, func(o diff.PathChange) bool { return o.Path == pc.Path }) {
			paths = append(paths, pc)
		}
	}
	slices.SortStableFunc(paths, func(a, b diff.PathChange) int { return strings.Compare(a.Path, b.Path) })
	return paths
}
