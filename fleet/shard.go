package fleet

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/oslayer/oslayer/assemble"
	"github.com/oslayer/oslayer/internal/registry"
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

// shardKey is the part of a pool's identity known before rendering: the
// target repository, base and options, and the content of its input files.
func shardKey(p *Pool) string {
	repo := p.Target
	if registry.IsLayout(repo) {
		repo, _, _ = registry.SplitLayout(repo)
	} else if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		repo = repo[:i]
	}
	// "x86_64,aarch64" and "amd64,arm64" are one image.
	arches, _ := assemble.ParseArches(p.Arch)
	h := sha256.New()
	opts, _ := json.Marshal([]any{repo, p.Base, arches, p.BaseIndex, p.bake(),
		p.AllowTopLevel, p.SignKey, p.SignKeyPasswordFile, p.Preflight})
	h.Write(opts)
	for _, list := range [][]string{p.OSC, p.MachineConfig, p.MachineConfigPool, {p.Secrets}} {
		h.Write([]byte("\n--"))
		for _, path := range list {
			hashTree(h, path)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// hashTree adds the content of a file, or of every regular file under a
// directory (by relative path, sorted), to h; an unreadable path adds its
// error (the build reports it).
func hashTree(h interface{ Write([]byte) (int, error) }, root string) {
	if root == "" {
		return
	}
	add := func(rel, path string) {
		b, err := os.ReadFile(path)
		if err != nil {
			fmt.Fprintf(h, "\n%s error %v", rel, err)
			return
		}
		sum := sha256.Sum256(b)
		fmt.Fprintf(h, "\n%s %x", rel, sum)
	}
	st, err := os.Stat(root)
	if err != nil {
		fmt.Fprintf(h, "\nerror %v", err)
		return
	}
	if !st.IsDir() {
		add(".", root)
		return
	}
	_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			fmt.Fprintf(h, "\n%s error %v", path, err)
			return nil
		}
		if d.Type().IsRegular() || d.Type()&fs.ModeSymlink != 0 {
			rel, _ := filepath.Rel(root, path)
			add(rel, path)
		}
		return nil
	})
}
