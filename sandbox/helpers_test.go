package sandbox

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// testMemory keeps memory bombs quick: they fill 8 MiB, not the default 64.
const testMemory = 8 << 20

func run(t *testing.T, o Options) *Result {
	t.Helper()
	if o.MemoryLimit == 0 {
		o.MemoryLimit = testMemory
	}
	r, err := Run(context.Background(), o)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return r
}

// wantValue checks a successful result's value against want, compared as JSON.
func wantValue(t *testing.T, r *Result, want string) {
	t.Helper()
	if r.Status != StatusSuccess {
		t.Fatalf("status %s (%s), want success", r.Status, r.Err())
	}
	if !jsonEqual(t, r.Value, []byte(want)) {
		t.Fatalf("value %s, want %s", r.Value, want)
	}
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("value %s is not JSON: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("want %s is not JSON: %v", b, err)
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return string(xb) == string(yb)
}

// wantFailure checks a failed result's status and that its error and stack say each of has.
func wantFailure(t *testing.T, r *Result, status Status, has ...string) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %s (%s, value %s), want %s", r.Status, r.Err(), r.Value, status)
	}
	text := r.Err() + "\n" + r.Stack
	for _, h := range has {
		if !strings.Contains(text, h) {
			t.Errorf("error %q does not contain %q", text, h)
		}
	}
}
