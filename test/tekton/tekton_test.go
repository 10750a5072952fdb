// Package tekton validates the Tekton example under examples/fleet with
// Tekton's own Go types and validation. It is a module of its own so that
// the main module does not depend on Tekton.
package tekton

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	v1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	"sigs.k8s.io/yaml"
)

func examplePath(t *testing.T) string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("no caller")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "examples", "fleet", "tekton-task.yaml")
}

// TestTaskValidates decodes the Task strictly, applies Tekton's defaults
// and runs Tekton's validation, then checks it declares the results
// Tekton Chains reads and that oslayer writes them where Tekton collects
// them.
func TestTaskValidates(t *testing.T) {
	b, err := os.ReadFile(examplePath(t))
	if err != nil {
		t.Fatal(err)
	}
	var task v1.Task
	if err := yaml.UnmarshalStrict(b, &task); err != nil {
		t.Fatalf("not a tekton.dev/v1 Task: %v", err)
	}
	if task.APIVersion != "tekton.dev/v1" || task.Kind != "Task" {
		t.Errorf("apiVersion %s kind %s", task.APIVersion, task.Kind)
	}
	ctx := context.Background()
	task.SetDefaults(ctx)
	if ferr := task.Validate(ctx); ferr != nil {
		t.Fatalf("Tekton's validation: %v", ferr)
	}
	results := map[string]bool{}
	for _, r := range task.Spec.Results {
		results[r.Name] = true
	}
	for _, want := range []string{"IMAGES", "IMAGE_URL", "IMAGE_DIGEST"} {
		if !results[want] {
			t.Errorf("no result %s", want)
		}
	}
	if len(task.Spec.Steps) != 1 {
		t.Fatalf("%d steps", len(task.Spec.Steps))
	}
	args := strings.Join(task.Spec.Steps[0].Args, " ")
	for _, want := range []string{"fleet build ", "--tekton-results /tekton/results", "--shard $(params.shard-index)/$(params.shard-count)"} {
		if !strings.Contains(args, want) {
			t.Errorf("step args %q lack %q", args, want)
		}
	}
}
