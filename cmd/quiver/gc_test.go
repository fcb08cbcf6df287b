package main

import (
	"math"
	"os"
	"path/filepath"
	"testing"
)

func TestGCSettings(t *testing.T) {
	for _, c := range []struct {
		name    string
		env     map[string]string
		memMax  int64
		percent int
		limit   int64
		ok      bool
	}{
		{"neither set, no cgroup limit", nil, 0, 200, math.MaxInt64, true},
		{"neither set, a cgroup limit", nil, 512 << 20, 200, 384 << 20, true},
		{"GOGC set", map[string]string{"GOGC": "100"}, 512 << 20, 0, 0, false},
		{"GOGC off", map[string]string{"GOGC": "off"}, 0, 0, 0, false},
		{"GOMEMLIMIT set", map[string]string{"GOMEMLIMIT": "1GiB"}, 0, 0, 0, false},
	} {
		percent, limit, ok := gcSettings(func(k string) string { return c.env[k] }, c.memMax)
		if percent != c.percent || limit != c.limit || ok != c.ok {
			t.Errorf("%s: %d %d %v, want %d %d %v", c.name, percent, limit, ok, c.percent, c.limit, c.ok)
		}
	}
}

func TestCgroupMemoryMax(t *testing.T) {
	for _, c := range []struct {
		name, file, content string
		want                int64
	}{
		{"v2 limit", "memory.max", "536870912\n", 536870912},
		{"v2 none", "memory.max", "max\n", 0},
		{"v1 limit", "memory/memory.limit_in_bytes", "268435456\n", 268435456},
		{"v1 none", "memory/memory.limit_in_bytes", "9223372036854771712\n", 0},
		{"garbage", "memory.max", "lots", 0},
		{"no file", "", "", 0},
	} {
		root := t.TempDir()
		if c.file != "" {
			p := filepath.Join(root, c.file)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(c.content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if got := cgroupMemoryMax(root); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}
