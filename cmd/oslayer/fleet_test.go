package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oslayer/oslayer/fleet"
)

// TestFleetCLI builds the embedded examples as a two-pool fleet into OCI
// layouts: the same digest as oslayer build of one of them, the summary
// file, the table; then an invalid plan exits 1 naming every place.
func TestFleetCLI(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	t.Setenv("OSLAYER_BASEINDEX_CACHE", t.TempDir())
	dir := t.TempDir()
	plan := filepath.Join(dir, "fleet.yaml")
	if err := os.WriteFile(plan, []byte(`
defaults:
  base: oci:`+example(t, "base")+`
  target: oci:out/{cluster}-{pool}
clusters:
- name: dev
  pools:
  - {name: worker, osc: [`+example(t, "gardener", "worker-osc.yaml")+`]}
- name: prod
  pools:
  - {name: worker, osc: [`+example(t, "gardener", "worker-osc.yaml")+`], bakeSecrets: true}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	sumFile := filepath.Join(dir, "summary.json")
	stdout, stderr, err := runCLIIO(t, nil, "fleet", "build", plan, "--jobs", "2", "--summary", sumFile)
	if err != nil {
		t.Fatalf("%v\n%s%s", err, stdout, stderr)
	}
	var sum fleet.Summary
	b, err := os.ReadFile(sumFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &sum); err != nil {
		t.Fatal(err)
	}
	if sum.Built != 2 || len(sum.Pools) != 2 || sum.Pools[0].Digest == "" {
		t.Fatalf("summary %s", b)
	}
	if !strings.Contains(stdout, "2 pools: 2 built, 0 failed") || !strings.Contains(stdout, sum.Pools[0].Image) {
		t.Errorf("table:\n%s", stdout)
	}
	if !strings.Contains(stderr, "[2/2] ") {
		t.Errorf("progress:\n%s", stderr)
	}
	single, stderr2, err := runCLIIO(t, nil, "build", "--base", "oci:"+example(t, "base"), "--pool", "worker",
		"--osc", example(t, "gardener", "worker-osc.yaml"), "--push", "oci:"+filepath.Join(dir, "single"))
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr2)
	}
	if got := strings.TrimSpace(single); !strings.HasSuffix(got, "@"+sum.Pools[0].Digest) {
		t.Errorf("oslayer build gives %s, the fleet %s", got, sum.Pools[0].Digest)
	}

	if err := os.WriteFile(plan, []byte("clusters:\n- name: dev\n  pools:\n  - {name: w}\n  - {name: w, base: 'x y'}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = runCLIIO(t, nil, "fleet", "build", plan)
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != 2 {
		t.Fatalf("invalid plan: %v, want exit code 2 (bad input)", err)
	}
	for _, want := range []string{"clusters[0].pools[0]: no inputs", "clusters[0].pools[0].target: no target", "clusters[0].pools[1].base: ", `clusters[0].pools[1].name: "w" is also`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not name %q:\n%v", want, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "out")); err == nil {
		// From the first run; the invalid plan must not have added any.
		entries, _ := os.ReadDir(filepath.Join(dir, "out"))
		if len(entries) != 2 {
			t.Errorf("out/ has %d entries after the invalid plan, want the 2 of the first run", len(entries))
		}
	}
}

// TestFleetCLIShards: the two shards of the example plan, one chosen by
// $JOB_COMPLETION_INDEX and --shards, one by --shard, build both pools
// once; --tekton-results writes the results Tekton Chains reads.
func TestFleetCLIShards(t *testing.T) {
	t.Setenv("OSLAYER_BASEINDEX_CACHE", t.TempDir())
	plan := example(t, "fleet", "fleet.yaml")
	out := t.TempDir()
	// The example's targets are oci:out/...: relative to the plan, so
	// build a copy of the plan next to copies of nothing else but paths.
	data, err := os.ReadFile(plan)
	if err != nil {
		t.Fatal(err)
	}
	local := filepath.Join(out, "fleet.yaml")
	text := strings.ReplaceAll(string(data), "../", filepath.Dir(filepath.Dir(plan))+"/")
	if err := os.WriteFile(local, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runCLIIO(t, nil, "fleet", "build", local, "--shards", "2"); err == nil || !strings.Contains(err.Error(), "JOB_COMPLETION_INDEX") {
		t.Errorf("--shards without $JOB_COMPLETION_INDEX: %v", err)
	}
	t.Setenv("JOB_COMPLETION_INDEX", "0")
	var all fleet.Summary
	for i, args := range [][]string{{"--shards", "2"}, {"--shard", "1/2"}} {
		res := filepath.Join(out, fmt.Sprintf("results-%d", i))
		if err := os.Mkdir(res, 0o755); err != nil {
			t.Fatal(err)
		}
		stdout, stderr, err := runCLIIO(t, nil, append([]string{"fleet", "build", local, "-o", "json", "--tekton-results", res}, args...)...)
		if err != nil {
			t.Fatalf("%v\n%s", err, stderr)
		}
		var sum fleet.Summary
		if err := json.Unmarshal([]byte(stdout), &sum); err != nil {
			t.Fatal(err)
		}
		if sum.Shard != fmt.Sprintf("%d/2", i) || sum.Built != sum.Total || sum.Total == 0 {
			t.Errorf("shard %d: %s", i, stdout)
		}
		all.Pools = append(all.Pools, sum.Pools...)
		images, _ := os.ReadFile(filepath.Join(res, "IMAGES"))
		url, _ := os.ReadFile(filepath.Join(res, "IMAGE_URL"))
		digest, _ := os.ReadFile(filepath.Join(res, "IMAGE_DIGEST"))
		if string(url)+"@"+string(digest) != sum.Pools[0].Image || !strings.Contains(string(images), sum.Pools[0].Image) {
			t.Errorf("shard %d results: IMAGES %q IMAGE_URL %q IMAGE_DIGEST %q", i, images, url, digest)
		}
	}
	pools, err := fleet.Load(local)
	if err != nil {
		t.Fatal(err)
	}
	if len(all.Pools) != len(pools) {
		t.Errorf("the shards built %d pools, the plan has %d", len(all.Pools), len(pools))
	}
	seen := map[string]bool{}
	for _, p := range all.Pools {
		if seen[p.Path] {
			t.Errorf("%s built twice", p.Path)
		}
		seen[p.Path] = true
	}
}
