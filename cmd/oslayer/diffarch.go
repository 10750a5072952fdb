package main

import (
	"context"
	"fmt"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/oslayer/oslayer/diff"
	"github.com/oslayer/oslayer/internal/registry"
)

// archResult is one architecture's diff of two multi-platform images.
type archResult struct {
	arch string
	res  *diff.Result
}

// compareArches compares OLD and NEW image references (args) for every
// platform of NEW that OLD has, when no --arch is given and NEW is a
// multi-platform index, and returns the result of the architecture with
// the most disruptive action (after --platform; the first of the index
// on a tie), saying on stderr which architectures were compared, their
// actions and those NEW alone has. ok is false when there is nothing of
// that kind to compare (one image, one platform, no platform in common,
// a reference that does not resolve, input sets given): the caller
// diffs as given.
func (f *diffFlags) compareArches(ctx context.Context, g *globals, ro *registry.Options, args []string, opts diff.Options) (res *diff.Result, ok bool, err error) {
	if len(args) != 2 || f.arch != "" || len(f.oldMCs)+len(f.oldOSC)+len(f.newMCs)+len(f.newOSC) > 0 {
		return nil, false, nil
	}
	newPs, err := diff.ImagePlatforms(ctx, ro, args[1])
	if err != nil || len(newPs) < 2 {
		return nil, false, nil
	}
	oldPs, err := diff.Platforms(ctx, ro, args[0])
	if err != nil {
		return nil, false, nil
	}
	var results []archResult
	var added []string
	for _, p := range newPs {
		o, found := diff.FindPlatform(oldPs, p)
		if !found {
			added = append(added, diff.ArchName(p))
			continue
		}
		r, err := f.compareArch(ctx, ro, args, &o, &p, opts)
		if err != nil {
			return nil, true, fmt.Errorf("%s: %w", diff.ArchName(p), err)
		}
		results = append(results, archResult{diff.ArchName(p), r})
	}
	if len(results) == 0 {
		return nil, false, nil
	}
	shown := results[0]
	for _, r := range results[1:] {
		if !shown.res.Action.AtLeast(r.res.Action) {
			shown = r
		}
	}
	g.warn(archNote(results, shown, added))
	shown.res.Architectures = archActions(results, shown, added)
	return shown.res, true, nil
}

// archActions lists each architecture's action for -o json: the compared
// ones in NEW's order, then those NEW alone has.
func archActions(results []archResult, shown archResult, added []string) []diff.ArchAction {
	var out []diff.ArchAction
	for _, r := range results {
		out = append(out, diff.ArchAction{Architecture: r.arch, Action: r.res.Action,
			DownloadBytes: r.res.Download.Bytes, Shown: r.arch == shown.arch})
	}
	for _, a := range added {
		out = append(out, diff.ArchAction{Architecture: a, Added: true})
	}
	return out
}

// compareArch diffs platform oldP of OLD with platform newP of NEW.
func (f *diffFlags) compareArch(ctx context.Context, ro *registry.Options, args []string, oldP, newP *v1.Platform, opts diff.Options) (*diff.Result, error) {
	old, err := diff.LoadImage(ctx, ro, args[0], oldP)
	if err != nil {
		return nil, fmt.Errorf("OLD %w", err)
	}
	new, err := diff.LoadImage(ctx, ro, args[1], newP)
	if err != nil {
		return nil, fmt.Errorf("NEW %w", err)
	}
	res, err := diff.Compare(old, new, opts)
	if err != nil {
		return nil, err
	}
	return res, f.selectPlatforms(res)
}

// archNote says which architectures were compared and which one's
// result is shown.
func archNote(results []archResult, shown archResult, added []string) string {
	parts := make([]string, len(results))
	for i, r := range results {
		parts[i] = r.arch + " " + string(r.res.Action)
	}
	msg := fmt.Sprintf("NEW is a multi-platform image: compared each architecture OLD has too (%s); shown: %s, the most disruptive (give --arch to show another)",
		strings.Join(parts, ", "), shown.arch)
	if len(added) > 0 {
		msg += "; not compared, NEW alone has " + strings.Join(added, ", ") + " (their nodes have no OLD image to stay on)"
	}
	return msg
}
