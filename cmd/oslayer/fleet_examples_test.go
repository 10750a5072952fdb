package main

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// parseFleetArgs parses args with oslayer's own command line, as the
// container would run it.
func parseFleetArgs(t *testing.T, args []string) *fleetFlags {
	t.Helper()
	root := newRootCmd()
	cmd, rest, err := root.Find(args)
	if err != nil || cmd.Name() != "build" || cmd.Parent().Name() != "fleet" {
		t.Fatalf("%v does not run oslayer fleet build: %v", args, err)
	}
	if err := cmd.ParseFlags(rest); err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	if err := cmd.Args(cmd, cmd.Flags().Args()); err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	// Read back the flags the example sets.
	f := &fleetFlags{}
	f.shard, _ = cmd.Flags().GetString("shard")
	f.shards, _ = cmd.Flags().GetInt("shards")
	f.summary, _ = cmd.Flags().GetString("summary")
	f.reg.authfile, _ = cmd.Flags().GetString("authfile")
	f.results, _ = cmd.Flags().GetString("tekton-results")
	return f
}

// TestExampleIndexedJob decodes examples/fleet/job.yaml strictly as a
// batch/v1 Job and checks that it runs the shards as oslayer expects: an
// Indexed Job whose completions are the --shards count, a per-index
// backoff, bad input (exit code 2) failing the index without retries,
// and every path the arguments name mounted (the summary writable).
func TestExampleIndexedJob(t *testing.T) {
	b, err := os.ReadFile(example(t, "fleet", "job.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var job batchv1.Job
	if err := yaml.UnmarshalStrict(b, &job); err != nil {
		t.Fatalf("job.yaml is not a batch/v1 Job: %v", err)
	}
	s := job.Spec
	if job.APIVersion != "batch/v1" || job.Kind != "Job" {
		t.Errorf("apiVersion %s kind %s", job.APIVersion, job.Kind)
	}
	if s.CompletionMode == nil || *s.CompletionMode != batchv1.IndexedCompletion {
		t.Errorf("completionMode %v, want Indexed", s.CompletionMode)
	}
	if s.Completions == nil || s.BackoffLimitPerIndex == nil || *s.BackoffLimitPerIndex < 1 {
		t.Fatalf("completions %v, backoffLimitPerIndex %v", s.Completions, s.BackoffLimitPerIndex)
	}
	if s.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("restartPolicy %s: a podFailurePolicy needs Never", s.Template.Spec.RestartPolicy)
	}
	failIndex := false
	if s.PodFailurePolicy != nil {
		for _, r := range s.PodFailurePolicy.Rules {
			if r.Action == batchv1.PodFailurePolicyActionFailIndex && r.OnExitCodes != nil &&
				r.OnExitCodes.Operator == batchv1.PodFailurePolicyOnExitCodesOpIn && len(r.OnExitCodes.Values) == 1 && r.OnExitCodes.Values[0] == 2 {
				failIndex = true
			}
		}
	}
	if !failIndex {
		t.Error("no podFailurePolicy rule FailIndex on exit code 2 (bad input is not retried; failures, exit 1, are)")
	}
	if len(s.Template.Spec.Containers) != 1 {
		t.Fatalf("%d containers", len(s.Template.Spec.Containers))
	}
	c := s.Template.Spec.Containers[0]
	f := parseFleetArgs(t, append(c.Command, c.Args...))
	if f.shards != int(*s.Completions) || f.shard != "" {
		t.Errorf("--shards %d --shard %q, want --shards %d (the completions)", f.shards, f.shard, *s.Completions)
	}
	volumes := map[string]bool{}
	for _, v := range s.Template.Spec.Volumes {
		volumes[v.Name] = true
	}
	mounted := func(path string, write bool) bool {
		for _, m := range c.VolumeMounts {
			if !volumes[m.Name] {
				t.Errorf("volumeMount %s has no volume", m.Name)
			}
			if strings.HasPrefix(path, m.MountPath+"/") && (!write || !m.ReadOnly) {
				return true
			}
		}
		return false
	}
	plan := c.Args[2]
	for path, write := range map[string]bool{plan: false, f.reg.authfile: false, f.summary: true} {
		if !mounted(path, write) {
			t.Errorf("%s is not on a mounted volume (writable: %t)", path, write)
		}
	}
	for _, e := range c.Env {
		if e.Name == "OSLAYER_BASEINDEX_CACHE" && !mounted(e.Value+"/x", true) {
			t.Errorf("base index cache %s is not writable", e.Value)
		}
	}
}

// TestExampleWorkflowMatrix checks the GitHub Actions example: the matrix
// lists every shard of the count --shard names, once.
func TestExampleWorkflowMatrix(t *testing.T) {
	b, err := os.ReadFile(example(t, "fleet", "github-actions.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var wf struct {
		Jobs map[string]struct {
			Strategy struct {
				Matrix struct {
					Shard []int `json:"shard"`
				} `json:"matrix"`
			} `json:"strategy"`
			Steps []struct {
				Run string `json:"run"`
			} `json:"steps"`
		} `json:"jobs"`
	}
	if err := yaml.Unmarshal(b, &wf); err != nil {
		t.Fatal(err)
	}
	job := wf.Jobs["build"]
	re := regexp.MustCompile(`oslayer (fleet build .*)`)
	found := false
	for _, st := range job.Steps {
		cmdline := strings.ReplaceAll(st.Run, "\\\n", " ")
		m := re.FindStringSubmatch(cmdline)
		if m == nil {
			continue
		}
		found = true
		args := strings.Fields(strings.ReplaceAll(m[1], "${{ matrix.shard }}", "0"))
		f := parseFleetArgs(t, args)
		n, err := strconv.Atoi(strings.TrimPrefix(f.shard, "0/"))
		if err != nil || n != len(job.Strategy.Matrix.Shard) {
			t.Errorf("--shard %s for a matrix of %v", f.shard, job.Strategy.Matrix.Shard)
		}
		for i, s := range job.Strategy.Matrix.Shard {
			if s != i {
				t.Errorf("matrix shards %v, want 0..%d", job.Strategy.Matrix.Shard, n-1)
			}
		}
	}
	if !found {
		t.Error("no step runs oslayer fleet build")
	}
}
