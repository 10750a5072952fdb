package preflight

import (
	"context"
	"fmt"
	"sort"
	"strings"
)

// maxRuleFindings bounds the findings of one content rule in one layer; the
// rest are summed up in one more finding.
const maxRuleFindings = 20

// contentCheck mirrors `bootc container lint` on the added layers: what
// ostree drops, masks or refuses when it imports the layers on a node.
// Rule names follow bootc's lint names where one exists. Each rule is a
// function of one entry (entryRules); the kernel rule looks at the whole
// image (kernels).
type contentCheck struct{}

func (contentCheck) Name() string       { return "content" }
func (contentCheck) Severity() Severity { return Error }
func (contentCheck) Needs() Needs       { return NeedAdded }

// entryRule checks one entry of an added layer and reports through r.
type entryRule func(r *ruleCollector, e *Entry)

// entryRules run on every entry in this order (the order of the findings
// of one entry).
var entryRules = []entryRule{placementRule, typeRule, usrOwnerRule, selinuxRule, kargsRule, sysusersRule, injectedRule}

func (c contentCheck) Run(ctx context.Context, t *Target) ([]Finding, error) {
	var out []Finding
	kernels := newKernels(t)
	sevOf := map[string]Severity{}
	for _, l := range t.Added {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		rc := &ruleCollector{c: c, l: l, counts: map[string]int{}, sevOf: sevOf}
		for i := range l.Entries {
			e := &l.Entries[i]
			if e.Whiteout || e.Opaque {
				kernels.removed(e.Path)
				continue
			}
			if e.RawName != "" {
				rc.add("utf8", Error, strings.ToValidUTF8(e.Path, "\uFFFD"), fmt.Sprintf("name %q (or its link target) is not valid UTF-8: ostree refuses it; rename the file", e.RawName))
				continue
			}
			for _, rule := range entryRules {
				rule(rc, e)
			}
			kernels.added(l, e)
		}
		out = append(out, rc.finish()...)
	}
	if f, ok := kernels.finding(); ok {
		out = append(out, f)
	}
	return out, nil
}

// ruleCollector gathers the findings of one layer, at most
// maxRuleFindings per rule, and remembers each rule's severity for the
// summary finding.
type ruleCollector struct {
	c      Check
	l      *LayerContent
	counts map[string]int
	sevOf  map[string]Severity
	out    []Finding
}

func (rc *ruleCollector) add(rule string, sev Severity, p, msg string) {
	rc.sevOf[rule] = sev
	rc.counts[rule]++
	if rc.counts[rule] > maxRuleFindings {
		return
	}
	f := rc.l.Finding(rc.c, sev, p, msg)
	f.Rule = rule
	rc.out = append(rc.out, f)
}

// finish returns the layer's findings and one more per rule that had more
// than maxRuleFindings.
func (rc *ruleCollector) finish() []Finding {
	rules := make([]string, 0, len(rc.counts))
	for r := range rc.counts {
		rules = append(rules, r)
	}
	sort.Strings(rules)
	for _, r := range rules {
		if n := rc.counts[r] - maxRuleFindings; n > 0 {
			f := rc.l.Finding(rc.c, rc.sevOf[r], "", fmt.Sprintf("... and %d more %s findings in this layer", n, r))
			f.Rule = r
			rc.out = append(rc.out, f)
		}
	}
	return rc.out
}
