package preflight

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseBytes parses a size: "1234", "500MB", "2GiB" (KB, MB, GB, TB are
// powers of 1000; KiB, MiB, GiB, TiB of 1024).
func ParseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range []struct {
		suf string
		m   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1}} {
		if strings.HasSuffix(t, u.suf) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suf)), u.m
			break
		}
	}
	v, err := strconv.ParseInt(t, 10, 64)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("want a positive number of bytes, e.g. 2GiB")
	}
	if v > (1<<62)/mult {
		return 0, fmt.Errorf("too large")
	}
	return v * mult, nil
}
