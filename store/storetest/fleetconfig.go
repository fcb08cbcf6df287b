package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/quiverhq/quiver/store"
)

// RunFleetConfigs runs the conformance tests of store.FleetConfigs against stores returned by
// open:
//
//	func TestFleetConfigs(t *testing.T) {
//		storetest.RunFleetConfigs(t, func(t *testing.T) store.FleetConfigs { return openTemp(t) })
//	}
func RunFleetConfigs(t *testing.T, open func(t *testing.T) store.FleetConfigs) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.FleetConfigs)
	}{
		{"Versions", testFleetVersions},
		{"Unchanged", testFleetUnchanged},
		{"After", testFleetAfter},
		{"Documents", testFleetDocuments},
		{"Refused", testFleetRefused},
		{"Concurrent", testFleetConcurrent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, open(t)) })
	}
}

// fleetConfig is a configuration of content and documents, its digests set.
func fleetConfig(content string, docs ...string) *store.FleetConfig {
	c := &store.FleetConfig{Content: []byte(content), Digest: store.FleetDigest([]byte(content)), AppliedBy: "storetest"}
	if len(docs) > 0 {
		c.Documents = map[string][]byte{}
		for _, d := range docs {
			c.Documents[store.FleetDigest([]byte(d))] = []byte(d)
		}
	}
	return c
}

func putFleet(t *testing.T, s store.FleetConfigs, c *store.FleetConfig, after int64) bool {
	t.Helper()
	created, err := s.PutFleetConfig(ctx, c, after)
	if err != nil {
		t.Fatalf("PutFleetConfig(%s, after %d): %v", c.Content, after, err)
	}
	return created
}

func testFleetVersions(t *testing.T, s store.FleetConfigs) {
	if v, d, err := s.FleetConfigVersion(ctx); err != nil || v != 0 || d != "" {
		t.Fatalf("FleetConfigVersion of an empty store: %d %q %v, want 0", v, d, err)
	}
	if _, err := s.FleetConfig(ctx, 0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("FleetConfig(0) of an empty store: %v, want ErrNotFound", err)
	}
	for i, content := range []string{`{"a":1}`, `{"a":2}`, `{"a":3}`} {
		c := fleetConfig(content)
		if !putFleet(t, s, c, -1) || c.Version != int64(i+1) || c.CreatedAt.IsZero() {
			t.Fatalf("put %s: version %d at %v, want a new version %d", content, c.Version, c.CreatedAt, i+1)
		}
	}
	v, d, err := s.FleetConfigVersion(ctx)
	if err != nil || v != 3 || d != store.FleetDigest([]byte(`{"a":3}`)) {
		t.Fatalf("FleetConfigVersion: %d %q %v, want 3 and the third's digest", v, d, err)
	}
	for version, want := range map[int64]string{0: `{"a":3}`, 1: `{"a":1}`, 2: `{"a":2}`} {
		c, err := s.FleetConfig(ctx, version)
		if err != nil || string(c.Content) != want || c.AppliedBy != "storetest" {
			t.Fatalf("FleetConfig(%d): %+v %v, want %s", version, c, err, want)
		}
	}
	if _, err := s.FleetConfig(ctx, 4); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("FleetConfig(4): %v, want ErrNotFound", err)
	}
	hist, err := s.FleetConfigHistory(ctx, 2)
	if err != nil || len(hist) != 2 || hist[0].Version != 3 || hist[1].Version != 2 || hist[0].Content != nil {
		t.Fatalf("FleetConfigHistory(2): %+v %v, want versions 3 and 2 without content", hist, err)
	}
	if _, err := s.FleetConfigHistory(ctx, 0); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("FleetConfigHistory(0): %v, want ErrInvalid", err)
	}
}

func testFleetUnchanged(t *testing.T, s store.FleetConfigs) {
	first := fleetConfig(`{"a":1}`)
	putFleet(t, s, first, 0)
	again := fleetConfig(`{"a":1}`)
	again.AppliedBy = "someone else"
	if putFleet(t, s, again, 0) || again.Version != 1 || again.AppliedBy != "storetest" || !again.CreatedAt.Equal(first.CreatedAt) {
		t.Fatalf("the same configuration again: %+v, want version 1 as stored first, not created", again)
	}
	if v, _, _ := s.FleetConfigVersion(ctx); v != 1 {
		t.Fatalf("version %d after the same configuration twice, want 1", v)
	}
	// Only the latest counts: a configuration stored before is a new version again.
	putFleet(t, s, fleetConfig(`{"a":2}`), -1)
	back := fleetConfig(`{"a":1}`)
	if !putFleet(t, s, back, -1) || back.Version != 3 {
		t.Fatalf("going back to the first: version %d, want 3", back.Version)
	}
}

func testFleetAfter(t *testing.T, s store.FleetConfigs) {
	putFleet(t, s, fleetConfig(`{"a":1}`), 0)
	if _, err := s.PutFleetConfig(ctx, fleetConfig(`{"a":2}`), 0); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("put after 0 on version 1: %v, want ErrConflict", err)
	}
	if c := fleetConfig(`{"a":2}`); !putFleet(t, s, c, 1) || c.Version != 2 {
		t.Fatalf("put after 1: version %d, want 2", c.Version)
	}
	if v, _, _ := s.FleetConfigVersion(ctx); v != 2 {
		t.Fatalf("version %d, want 2: the refused put stored nothing", v)
	}
}

func testFleetDocuments(t *testing.T, s store.FleetConfigs) {
	putFleet(t, s, fleetConfig(`{"v":1}`, "doc one", "doc two"), -1)
	putFleet(t, s, fleetConfig(`{"v":2}`, "doc two", "doc three"), -1)
	putFleet(t, s, fleetConfig(`{"v":3}`), -1)
	// A document as large as the bound (a real API's description is 13 MB).
	large := strings.Repeat("d", store.MaxFleetDocumentBytes)
	putFleet(t, s, fleetConfig(`{"v":4}`, large), -1)
	for version, want := range map[int64][]string{1: {"doc one", "doc two"}, 2: {"doc two", "doc three"}, 3: nil, 4: {large}} {
		c, err := s.FleetConfig(ctx, version)
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Documents) != len(want) {
			t.Fatalf("version %d has %d documents, want %d", version, len(c.Documents), len(want))
		}
		for _, d := range want {
			if got := c.Documents[store.FleetDigest([]byte(d))]; !bytes.Equal(got, []byte(d)) {
				t.Fatalf("version %d: document %q read as %q", version, d, got)
			}
		}
	}
}

func testFleetRefused(t *testing.T, s store.FleetConfigs) {
	wrongDigest := fleetConfig(`{"a":1}`)
	wrongDigest.Digest = store.FleetDigest([]byte("other"))
	wrongDoc := fleetConfig(`{"a":1}`, "doc")
	for k := range wrongDoc.Documents {
		wrongDoc.Documents[k] = []byte("not the doc")
	}
	for name, c := range map[string]*store.FleetConfig{
		"empty":                {Digest: store.FleetDigest(nil)},
		"wrong digest":         wrongDigest,
		"wrong doc":            wrongDoc,
		"too large":            fleetConfig(string(make([]byte, store.MaxFleetConfigBytes+1))),
		"a document too large": fleetConfig(`{"a":1}`, string(make([]byte, store.MaxFleetDocumentBytes+1))),
	} {
		if _, err := s.PutFleetConfig(ctx, c, -1); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if v, _, _ := s.FleetConfigVersion(ctx); v != 0 {
		t.Fatalf("version %d after refusals, want 0", v)
	}
}

// testFleetConcurrent: writers storing after the version they read, at once: one wins, the
// others conflict; writers storing whatever the latest: each makes a version, numbered
// without gaps.
func testFleetConcurrent(t *testing.T, s store.FleetConfigs) {
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { _, errs[i] = s.PutFleetConfig(ctx, fleetConfig(fmt.Sprintf(`{"first":%d}`, i)), 0) })
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, store.ErrConflict):
			t.Fatalf("a writer after version 0: %v, want ErrConflict", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d writers after version 0 stored, want 1", won)
	}
	for i := range n {
		wg.Go(func() { _, errs[i] = s.PutFleetConfig(ctx, fleetConfig(fmt.Sprintf(`{"any":%d}`, i)), -1) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	hist, err := s.FleetConfigHistory(ctx, 100)
	if err != nil || len(hist) != n+1 {
		t.Fatalf("history: %d versions %v, want %d", len(hist), err, n+1)
	}
	for i, c := range hist {
		if c.Version != int64(n+1-i) {
			t.Fatalf("history[%d] is version %d, want %d: versions without gaps", i, c.Version, n+1-i)
		}
	}
}
