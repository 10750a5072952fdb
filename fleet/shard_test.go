package fleet

import (
	"fmt"
	"strings"
	"testing"
)

func TestParseShard(t *testing.T) {
	if i, n, err := ParseShard("2/4"); err != nil || i != 2 || n != 4 {
		t.Errorf("2/4: %d %d %v", i, n, err)
	}
	for _, bad := range []string{"4/4", "-1/4", "1/0", "1", "a/b", "1/2/3"} {
		if _, _, err := ParseShard(bad); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

// TestShardPartition: for every shard count, the shards partition the
// plan (every pool exactly once), are balanced, keep pools that may share
// an image together, and are the same on every call.
func TestShardPartition(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{}
	var plan strings.Builder
	plan.WriteString("defaults: {base: 127.0.0.1:5000/fcos:1, target: \"127.0.0.1:5000/os/images:{cluster}-{pool}\"}\nclusters:\n")
	for c := 0; c < 7; c++ {
		fmt.Fprintf(&plan, "- name: c%d\n  pools:\n", c)
		for p := 0; p < 5; p++ {
			body := fmt.Sprintf("content %d/%d", c, p)
			if p == 0 {
				body = "the same worker everywhere"
			}
			name := fmt.Sprintf("c%d/p%d.yaml", c, p)
			files[name] = body
			fmt.Fprintf(&plan, "  - {name: p%d, osc: [%s]}\n", p, name)
		}
	}
	writeFiles(t, dir, files)
	pools, err := Parse([]byte(plan.String()), dir, "plan.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for n := 1; n <= 9; n++ {
		seen := map[string]int{}
		sizes := []int{}
		workerShard := -1
		for i := 0; i < n; i++ {
			got := Shard(pools, i, n)
			again := Shard(pools, i, n)
			if fmt.Sprint(got) != fmt.Sprint(again) {
				t.Errorf("%d/%d differs between calls", i, n)
			}
			sizes = append(sizes, len(got))
			for _, p := range got {
				seen[p.ID()]++
				if p.Name == "p0" {
					if workerShard != -1 && workerShard != i {
						t.Errorf("n=%d: the identical p0 pools are in shards %d and %d", n, workerShard, i)
					}
					workerShard = i
				}
			}
		}
		for _, p := range pools {
			if seen[p.ID()] != 1 {
				t.Errorf("n=%d: %s in %d shards", n, p.ID(), seen[p.ID()])
			}
		}
		// 7 identical pools are one unit; the other 28 are single.
		lo, hi := sizes[0], sizes[0]
		for _, s := range sizes {
			lo, hi = min(lo, s), max(hi, s)
		}
		if hi-lo > 7 || (n <= 5 && hi-lo > 1) {
			t.Errorf("n=%d: shard sizes %v", n, sizes)
		}
	}
	if got := len(Shard(pools, 0, 1)); got != len(pools) {
		t.Errorf("1 shard has %d of %d pools", got, len(pools))
	}
}

// TestShardKeyArches: a list of architectures is one unit whatever the
// names given (x86_64,aarch64 is amd64,arm64), as the pools are one image;
// another order is another index.
func TestShardKeyArches(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"w.yaml": "the same"})
	pools, err := Parse([]byte(`defaults: {base: 127.0.0.1:5000/fcos:1, target: "127.0.0.1:5000/os/images:{cluster}-{pool}", osc: [w.yaml]}
clusters:
- name: c
  pools:
  - {name: a, arch: "amd64,arm64"}
  - {name: b, arch: "x86_64,aarch64"}
  - {name: c, arch: "arm64,amd64"}
`), dir, "plan.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if shardKey(&pools[0]) != shardKey(&pools[1]) {
		t.Error("amd64,arm64 and x86_64,aarch64 have different shard keys")
	}
	if shardKey(&pools[0]) == shardKey(&pools[2]) {
		t.Error("amd64,arm64 and arm64,amd64 have one shard key")
	}
}
