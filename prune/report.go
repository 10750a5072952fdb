package prune

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// WriteTable writes r as a table (digest, age, pool, action and why) and a
// closing line with the counts, ending with dryRunHint in parentheses for
// a dry run (what the front-end's user does to delete); ages are measured
// from now.
func WriteTable(w io.Writer, r *Result, now time.Time, dryRunHint string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "REPOSITORY\tDIGEST\tAGE\tPOOL\tACTION\tWHY")
	for _, im := range r.Images {
		pool := im.Pool
		if pool == "" {
			pool = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", im.Repo, short(im.Digest), Age(im, now), pool, im.Action, summary(im.Reasons))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var err error
	if r.DryRun {
		_, err = fmt.Fprintf(w, "dry run: %d kept, %d to delete with their signature, attestation and SBOM tags (%s)\n", r.Kept, r.Delete, dryRunHint)
	} else {
		_, err = fmt.Fprintf(w, "%d kept, %d deleted with their signature, attestation and SBOM tags\n", r.Kept, r.Deleted)
	}
	return err
}

// Age is how old im is at now, rounded ("-" when nothing dates it).
func Age(im *Image, now time.Time) string {
	if im.Time.IsZero() {
		return "-"
	}
	d := now.Sub(im.Time)
	switch {
	case d < time.Minute:
		return d.Round(time.Second).String()
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}
