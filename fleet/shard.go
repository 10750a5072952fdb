package fleet

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// ParseShard reads "I/N" (0 <= I < N): the I-th of N shards.
func ParseShard(s string) (i, n int, err error) {
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 0 || i >= n {
		return 0, 0, fmt.Errorf("shard %q: want I/N with 0 <= I < N, e.g. 0/4", s)
	}
	return i, n, nil
}

// Shard returns the pools shard i of n builds: a deterministic, balanced
// slice of the plan, so that n processes given the same plan and inputs
// build every pool exactly once between them.
//
// Pools that may become one image (same target repository, base, options
// and input file contents) stay in one shard, so their image is still
// built once. These units are dealt out in plan order, each to the shard
// with the fewest pools so far (the lowest index on a tie): shard sizes
// differ by at most the size of the largest unit. Reading the input files
// is all it costs; nothing is rendered or fetched.
func Shard(pools []Pool, i, n int) []Pool {
	if n <= 1 {
		return pools
	}
	type unit struct{ pools []int }
	var units []*unit
	byKey := map[string]*unit{}
	for k := range pools {
		key := shardKey(&pools[k])
		u, ok := byKey[key]
		if !ok {
			u = &unit{}
			byKey[key] = u
			units = append(units, u)
		}
		u.pools = append(u.pools, k)
	}
	load := make([]int, n)
	var mine []int
	for _, u := range units {
		best := 0
		for s := 1; s < n; s++ {
			if load[s] < load[best] {
				best = s
			}
		}
		load[best] += len(u.pools)
		if best == i {
			mine = append(mine, u.pools...)
		}
	}
	sort.Ints(mine)
	out := make([]Pool, len(mine))
	for k, idx := range mine {
		out[k] = pools[idx]
	}
	return out
}

// shardKey is the pool's specification identity (pipeline
// Spec.Identity: the part of its plan identity known before rendering,
// with the input files by content); a pool whose specification cannot be
// made (its key unreadable: it fails alone) is a unit of its own.
func shardKey(p *Pool) string {
	spec, err := p.Spec(Options{})
	if err != nil {
		return "pool " + p.Path
	}
	return spec.Identity()
}
