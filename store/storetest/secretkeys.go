package storetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quiverhq/quiver/store"
)

// SecretKeysStore is what RunSecretKeys tests: the record of the secrets' key, and the
// variables it is kept beside.
type SecretKeysStore interface {
	store.Variables
	store.SecretKeys
}

// RunSecretKeys runs the conformance tests of store.SecretKeys against stores returned by open:
//
//	func TestSecretKeys(t *testing.T) {
//		storetest.RunSecretKeys(t, func(t *testing.T) storetest.SecretKeysStore { return openTemp(t) })
//	}
func RunSecretKeys(t *testing.T, open func(t *testing.T) SecretKeysStore) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s SecretKeysStore)
	}{
		{"RecordFirstWins", testKeyRecordFirstWins},
		{"RecordConcurrent", testKeyRecordConcurrent},
		{"LatestSecret", testKeyLatestSecret},
		{"Rekey", testKeyRekey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, open(t)) })
	}
}

func recordedKey(t *testing.T, s SecretKeysStore) string {
	t.Helper()
	id, err := s.SecretKeyID(ctx)
	if err != nil {
		t.Fatalf("SecretKeyID: %v", err)
	}
	return id
}

func testKeyRecordFirstWins(t *testing.T, s SecretKeysStore) {
	if id := recordedKey(t, s); id != "" {
		t.Fatalf("a fresh store records key %q", id)
	}
	for _, bad := range []string{"", "fa87 b75c", strings.Repeat("a", store.MaxSecretKeyIDBytes+1), "fa87\nb75c"} {
		if _, err := s.RecordSecretKeyID(ctx, bad); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("RecordSecretKeyID(%q): %v, want ErrInvalid", bad, err)
		}
	}
	if id := recordedKey(t, s); id != "" {
		t.Fatalf("refused ids recorded %q", id)
	}
	if got, err := s.RecordSecretKeyID(ctx, "fa87b75c"); err != nil || got != "fa87b75c" {
		t.Fatalf("first RecordSecretKeyID = %q, %v", got, err)
	}
	// A second key is never recorded over the first: the caller learns which one holds.
	if got, err := s.RecordSecretKeyID(ctx, "0badc0de"); err != nil || got != "fa87b75c" {
		t.Fatalf("second RecordSecretKeyID = %q, %v; want the first id", got, err)
	}
	if id := recordedKey(t, s); id != "fa87b75c" {
		t.Fatalf("SecretKeyID = %q, want fa87b75c", id)
	}
}

// testKeyRecordConcurrent has nodes record their keys at once: one wins, and every node
// learns which.
func testKeyRecordConcurrent(t *testing.T, s SecretKeysStore) {
	const nodes = 8
	got := make([]string, nodes)
	errs := make([]error, nodes)
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = s.RecordSecretKeyID(ctx, fmt.Sprintf("key%05d", i))
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
	}
	if !strings.HasPrefix(got[0], "key") || slices.ContainsFunc(got, func(id string) bool { return id != got[0] }) {
		t.Fatalf("the nodes were told %q: want one of their ids, the same for all", got)
	}
	if id := recordedKey(t, s); id != got[0] {
		t.Fatalf("SecretKeyID = %q, the nodes were told %q", id, got[0])
	}
}

func testKeyLatestSecret(t *testing.T, s SecretKeysStore) {
	latest := func() string {
		t.Helper()
		v, err := s.LatestSecret(ctx)
		if err != nil {
			t.Fatalf("LatestSecret: %v", err)
		}
		return v
	}
	if v := latest(); v != "" {
		t.Fatalf("a fresh store's latest secret: %q", v)
	}
	mustSet(t, s, ws, store.LayerInstance, "", "TEXT", "not sealed", false, false)
	if v := latest(); v != "" {
		t.Fatalf("with text values only: %q", v)
	}
	// Each set a little later than the last: the stores' clocks are fine enough, but not
	// every one to the nanosecond.
	for _, set := range []struct{ workspace, name, value string }{
		{ws, "A", "sealed-a-1"},
		{"wsp_other", "B", "sealed-b-1"},
		{ws, "A", "sealed-a-2"},
	} {
		time.Sleep(5 * time.Millisecond)
		mustSet(t, s, set.workspace, store.LayerInstance, "", set.name, set.value, true, false)
		if v := latest(); v != set.value {
			t.Fatalf("after setting %s in %s: latest secret %q, want %q", set.name, set.workspace, v, set.value)
		}
	}
}

func testKeyRekey(t *testing.T, s SecretKeysStore) {
	mustSet(t, s, ws, store.LayerInstance, "", "A", "old:a", true, false)
	mustSet(t, s, "wsp_other", store.LayerUser, "usr_1", "B", "old:b", true, false)
	mustSet(t, s, ws, store.LayerInstance, "", "T", "text", false, false)
	values := func() []string {
		return slices.Concat(listed(t, s, ws, store.LayerInstance, ""), listed(t, s, "wsp_other", store.LayerUser, "usr_1"))
	}
	rekey := func(v *store.Variable) (string, error) { return "new:" + strings.TrimPrefix(v.Value, "old:"), nil }
	original := values()

	if err := s.RekeySecrets(ctx, nil, "", rekey); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("RekeySecrets to an empty id: %v, want ErrInvalid", err)
	}
	// An error from fn changes neither the values nor the record.
	boom := errors.New("boom")
	if err := s.RekeySecrets(ctx, nil, "k1", func(*store.Variable) (string, error) { return "", boom }); !errors.Is(err, boom) {
		t.Fatalf("RekeySecrets with a failing fn: %v", err)
	}
	if got := values(); !slices.Equal(got, original) || recordedKey(t, s) != "" {
		t.Fatalf("a failed re-key changed something: %q, key %q", got, recordedKey(t, s))
	}
	// Nothing recorded: any key may be recorded with the values.
	if err := s.RekeySecrets(ctx, []string{"k0"}, "k1", rekey); err != nil {
		t.Fatal(err)
	}
	want := []string{"A=new:a secret", "T=text", "B=new:b secret"}
	if got := values(); !slices.Equal(got, want) || recordedKey(t, s) != "k1" {
		t.Fatalf("after re-keying to k1: %q, key %q; want %q, k1", got, recordedKey(t, s), want)
	}
	testKeyRekeyFrom(t, s, values, want)
}

// testKeyRekeyFrom goes on from testKeyRekey, k1 recorded and the values want: a re-key is
// allowed from the recorded key only.
func testKeyRekeyFrom(t *testing.T, s SecretKeysStore, values func() []string, want []string) {
	// A re-key from keys other than the recorded one is refused and changes nothing.
	err := s.RekeySecrets(ctx, []string{"k0", "k9"}, "k2", func(*store.Variable) (string, error) { return "stolen", nil })
	if !errors.Is(err, store.ErrConflict) || !strings.Contains(err.Error(), "k1") {
		t.Fatalf("re-keying from k0 and k9 while k1 is recorded: %v, want ErrConflict naming k1", err)
	}
	if got := values(); !slices.Equal(got, want) || recordedKey(t, s) != "k1" {
		t.Fatalf("a refused re-key changed something: %q, key %q", got, recordedKey(t, s))
	}
	// From the recorded key (or, resuming, from the new key itself) it goes through.
	for _, from := range [][]string{{"k1"}, {"k0", "k2"}} {
		if err := s.RekeySecrets(ctx, from, "k2", func(v *store.Variable) (string, error) { return v.Value, nil }); err != nil {
			t.Fatalf("re-keying from %q to k2: %v", from, err)
		}
	}
	if recordedKey(t, s) != "k2" {
		t.Fatalf("after re-keying to k2: key %q", recordedKey(t, s))
	}
	// RecordSecretKeyID does not undo a re-key.
	if got, err := s.RecordSecretKeyID(ctx, "k1"); err != nil || got != "k2" {
		t.Fatalf("RecordSecretKeyID after a re-key = %q, %v; want k2", got, err)
	}
}
