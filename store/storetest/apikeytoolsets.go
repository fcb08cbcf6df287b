package storetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/quiverhq/quiver/store"
)

// testKeyToolsets: the toolsets a key is bound to are stored with it and read back wherever
// keys are read (by hash, listed, revoked); a key bound to none reads back unbound; and the
// store keeps its own copy, shared with no caller.
func testKeyToolsets(t *testing.T, s APIKeysStore) {
	ws, admin, _, _ := keyFixture(t, s)
	most := make([]string, store.MaxKeyToolsets)
	for i := range most {
		most[i] = fmt.Sprintf("%02d", i) + strings.Repeat("x", store.MaxToolsetName-2)
	}
	tests := []struct {
		name     string
		toolsets []string
	}{
		{"unbound", nil},
		{"empty", []string{}},
		{"one", []string{"billing"}},
		{"every character allowed", []string{"a-Z_0", "ops-2", "A", "9"}},
		{"the most, of the longest names", most},
	}
	for _, tt := range tests {
		k := newKey(ws.ID, admin.ID, store.KeyRoleMember)
		k.Toolsets = slices.Clone(tt.toolsets)
		mustOK(t, tt.name+": CreateAPIKey", s.CreateAPIKey(ctx, k))
		if len(k.Toolsets) > 0 {
			k.Toolsets[0] = "changed-by-the-caller" // the store kept its own copy
		}
		got, _, err := s.APIKeyByHash(ctx, k.Hash)
		mustOK(t, tt.name+": APIKeyByHash", err)
		wantToolsets(t, tt.name+": by hash", got, tt.toolsets)
		if len(got.Toolsets) > 0 {
			got.Toolsets[0] = "changed-by-a-reader"
		}
		keys, err := s.APIKeys(ctx, ws.ID)
		mustOK(t, tt.name+": APIKeys", err)
		i := slices.IndexFunc(keys, func(l *store.APIKey) bool { return l.ID == k.ID })
		if i < 0 {
			t.Fatalf("%s: key %s not listed", tt.name, k.ID)
		}
		wantToolsets(t, tt.name+": listed", keys[i], tt.toolsets)
		revoked, err := s.RevokeAPIKey(ctx, ws.ID, k.ID)
		mustOK(t, tt.name+": RevokeAPIKey", err)
		wantToolsets(t, tt.name+": revoked", revoked, tt.toolsets)
	}
}

// wantToolsets fails unless k is bound to want: nil when want is empty (not bound).
func wantToolsets(t *testing.T, what string, k *store.APIKey, want []string) {
	t.Helper()
	if len(want) == 0 {
		want = nil
	}
	if !slices.Equal(k.Toolsets, want) || (want == nil) != (k.Toolsets == nil) {
		t.Errorf("%s: toolsets %q, want %q", what, k.Toolsets, want)
	}
}

// testKeyToolsetRefusals: a key is bound to at most store.MaxKeyToolsets toolsets, each named
// with 1 to store.MaxToolsetName characters of [a-zA-Z0-9_-]; the store refuses others, saying
// which, and stores nothing.
func testKeyToolsetRefusals(t *testing.T, s APIKeysStore) {
	ws, admin, _, _ := keyFixture(t, s)
	tooMany := make([]string, store.MaxKeyToolsets+1)
	for i := range tooMany {
		tooMany[i] = fmt.Sprint("t", i)
	}
	long := strings.Repeat("x", store.MaxToolsetName+1)
	tests := []struct {
		name     string
		toolsets []string
		says     string // what the error names
	}{
		{"an empty name", []string{"billing", ""}, `""`},
		{"a name too long", []string{long}, long},
		{"a space", []string{"bill ing"}, "bill ing"},
		{"a slash", []string{"ops/prod"}, "ops/prod"},
		{"a dot", []string{"v1.2"}, "v1.2"},
		{"not ASCII", []string{"café"}, "café"},
		{"a NUL", []string{"ops\x00"}, `ops\x00`},
		{"too many", tooMany, fmt.Sprint(store.MaxKeyToolsets + 1)},
	}
	for _, tt := range tests {
		k := newKey(ws.ID, admin.ID, store.KeyRoleMember)
		k.Toolsets = tt.toolsets
		err := s.CreateAPIKey(ctx, k)
		if !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("%s: %v, want ErrInvalid naming %s", tt.name, err, tt.says)
		}
	}
	keys, err := s.APIKeys(ctx, ws.ID)
	mustOK(t, "APIKeys", err)
	if len(keys) != 0 {
		t.Errorf("%d keys stored after the refusals, want none", len(keys))
	}
}
