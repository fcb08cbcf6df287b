package main

import (
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// serveGCPercent is the garbage collector's target of `quiver serve` when the operator sets
// neither GOGC nor GOMEMLIMIT: the heap may grow to three times what is live between
// collections rather than twice. Measured with bench/peers/cmd/serverbench (docs/PERFORMANCE.md,
// "The garbage collector's target"): MCP calls over one session 0.87x mcp-go at 100 and 0.99x
// at 200, at 7 MB more idle RSS and 30 MB more after 6,000 calls; 400 was no faster than 100
// and held 180-250 MB.
const serveGCPercent = 200

// gcSettings is what `quiver serve` sets the garbage collector to: its target, and a soft
// memory limit of three quarters of the cgroup's memory.max when it runs under one (memMax >
// 0), so that the larger target gives way before a container's limit is reached. ok is false
// when the operator set GOGC or GOMEMLIMIT: theirs hold, and nothing is changed.
func gcSettings(getenv func(string) string, memMax int64) (percent int, limit int64, ok bool) {
	if getenv("GOGC") != "" || getenv("GOMEMLIMIT") != "" {
		return 0, 0, false
	}
	limit = math.MaxInt64 // the runtime's "no limit"
	if memMax > 0 {
		limit = memMax / 4 * 3
	}
	return serveGCPercent, limit, true
}

// cgroupMemoryMax is the memory limit of this process's cgroup (v2's memory.max, else v1's
// memory.limit_in_bytes, as a container sees its own at the root of /sys/fs/cgroup); 0 when
// there is none or it cannot be read.
func cgroupMemoryMax(root string) int64 {
	for _, name := range []string{"memory.max", "memory/memory.limit_in_bytes"} {
		b, err := os.ReadFile(root + "/" + name)
		if err != nil {
			continue
		}
		s := strings.TrimSpace(string(b))
		n, err := strconv.ParseInt(s, 10, 64)
		// v1 says "no limit" with a number near the largest page-aligned int64.
		if err != nil || n <= 0 || n >= math.MaxInt64/2 {
			return 0
		}
		return n
	}
	return 0
}

// tuneGC sets the garbage collector of `quiver serve` (gcSettings).
func tuneGC() {
	if percent, limit, ok := gcSettings(os.Getenv, cgroupMemoryMax("/sys/fs/cgroup")); ok {
		debug.SetGCPercent(percent)
		debug.SetMemoryLimit(limit)
	}
}
