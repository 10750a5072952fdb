package controller

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/oslayer/oslayer/api/v1alpha1"
)

// PoolImageRefPrefix starts a reference to an image of a PoolImage's
// history: poolimage:NAMESPACE/NAME@N (N: the index in status.builds, 0
// the newest) or poolimage:NAMESPACE/NAME@published.
const PoolImageRefPrefix = "poolimage:"

// PoolImageRef is a parsed poolimage: reference.
type PoolImageRef struct {
	Key types.NamespacedName
	// Index is the history entry (-1: the published image).
	Index int
}

// ParsePoolImageRef parses poolimage:NAMESPACE/NAME@N or @published.
func ParsePoolImageRef(s string) (PoolImageRef, error) {
	rest, ok := strings.CutPrefix(s, PoolImageRefPrefix)
	name, sel, hasSel := strings.Cut(rest, "@")
	ns, n, hasNS := strings.Cut(name, "/")
	if !ok || !hasSel || !hasNS || ns == "" || n == "" {
		return PoolImageRef{}, fmt.Errorf("%q: want %sNAMESPACE/NAME@N (N: the index in status.builds, 0 the newest) or %sNAMESPACE/NAME@published", s, PoolImageRefPrefix, PoolImageRefPrefix)
	}
	ref := PoolImageRef{Key: types.NamespacedName{Namespace: ns, Name: n}, Index: -1}
	if sel == "published" {
		return ref, nil
	}
	i, err := strconv.Atoi(sel)
	if err != nil || i < 0 {
		return PoolImageRef{}, fmt.Errorf("%q: history index %q: want 0 (the newest build) or more, or published", s, sel)
	}
	ref.Index = i
	return ref, nil
}

// Resolve reads the PoolImage and returns the digested image its
// reference names; an index past the history, a failed build or nothing
// published is an error naming the PoolImage.
func (ref PoolImageRef) Resolve(ctx context.Context, c client.Reader) (string, error) {
	var pi v1alpha1.PoolImage
	if err := c.Get(ctx, ref.Key, &pi); err != nil {
		return "", fmt.Errorf("PoolImage %s: %w", ref.Key, err)
	}
	return HistoryImage(&pi, ref.Index)
}

// HistoryImage is the image of status.builds[index] (index -1:
// status.published).
func HistoryImage(pi *v1alpha1.PoolImage, index int) (string, error) {
	name := pi.Namespace + "/" + pi.Name
	if index < 0 {
		if p := pi.Status.Published; p != nil && p.Image != "" {
			return p.Image, nil
		}
		return "", fmt.Errorf("PoolImage %s: status.published: nothing published yet", name)
	}
	b := pi.Status.Builds
	if index >= len(b) {
		return "", fmt.Errorf("PoolImage %s: status.builds[%d]: the history has %d entries (0 to %d)", name, index, len(b), len(b)-1)
	}
	if b[index].Result != "Succeeded" || b[index].Image == "" {
		return "", fmt.Errorf("PoolImage %s: status.builds[%d] is a %s build without an image: %s", name, index, b[index].Result, b[index].Message)
	}
	return b[index].Image, nil
}

// WriteHistory writes a PoolImage's build history for people: one line per
// build (index, result, time, digest, inputs digest, which is built and
// published), the published image and why, and the command that pins a
// good build.
func WriteHistory(w io.Writer, pi *v1alpha1.PoolImage) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tRESULT\tTIME\tDIGEST\tINPUTS\tSTATE")
	pub := ""
	if p := pi.Status.Published; p != nil {
		pub = p.Image
	}
	pinnable := ""
	for i, b := range pi.Status.Builds {
		var state []string
		if b.Image != "" && b.Image == pi.Status.Image {
			state = append(state, "built")
		}
		if b.Image != "" && b.Image == pub {
			state = append(state, "published")
		}
		if d := digestOf(b.Image); d != "" && d == pi.Spec.Pin {
			state = append(state, "pinned")
		}
		if b.Result == "Succeeded" && b.Image != "" && b.Image != pub && pinnable == "" {
			pinnable = digestOf(b.Image)
		}
		what := digestOf(b.Image)
		if b.Result != "Succeeded" {
			state = append(state, strings.SplitN(b.Message, "\n", 2)[0])
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", i, b.Result, b.Time.UTC().Format("2006-01-02T15:04:05Z"), orDash(what), orDash(b.InputsDigest), strings.Join(state, ", "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return writePublished(w, pi, pinnable)
}

// writePublished writes the published image, why, and the pin commands.
func writePublished(w io.Writer, pi *v1alpha1.PoolImage, pinnable string) error {
	if p := pi.Status.Published; p != nil && p.Image != "" {
		fmt.Fprintf(w, "published: %s (%s: %s)\n", p.Image, p.Decision, p.Message)
	}
	if c := pi.Status.Change; c != nil {
		on := ""
		if c.ActionPlatform != "" {
			on = " on " + c.ActionPlatform
		}
		fmt.Fprintf(w, "last change: %s -> %s: action %s%s, %d bytes to download, %d paths\n", digestOf(c.From), digestOf(c.To), orDash(c.Action), on, c.DownloadBytes, c.PathsTotal)
	}
	kubectl := fmt.Sprintf("kubectl -n %s patch poolimage %s --type merge -p", pi.Namespace, pi.Name)
	if pi.Spec.Pin != "" {
		_, err := fmt.Fprintf(w, "pinned to %s; unpin:\n  %s '{\"spec\":{\"pin\":null}}'\n", pi.Spec.Pin, kubectl)
		return err
	}
	if pinnable == "" {
		return nil
	}
	_, err := fmt.Fprintf(w, "roll back (publish a good build and hold newer ones until unpinned):\n  %s '{\"spec\":{\"pin\":\"%s\"}}'\n", kubectl, pinnable)
	return err
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
