package ids

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestNewSortsByTimeAndNeverRepeats(t *testing.T) {
	var got []string
	seen := map[string]bool{}
	for i := range 2000 {
		if i%500 == 0 {
			time.Sleep(2 * time.Millisecond) // ids of later milliseconds sort after
		}
		id := New("msg")
		if !strings.HasPrefix(id, "msg_") || len(id) != len("msg_")+26 {
			t.Fatalf("id %q: want msg_ and 26 characters", id)
		}
		if seen[id] {
			t.Fatalf("id %q made twice", id)
		}
		seen[id] = true
		got = append(got, id)
	}
	// Within a millisecond the order is random; across the sleeps it is the order made.
	for _, k := range []int{500, 1000, 1500} {
		if slices.Max(got[:k]) >= slices.Min(got[k:]) {
			t.Fatalf("an id made before the sleep at %d sorts after one made after it", k)
		}
	}
}

func TestRandom(t *testing.T) {
	a, b := Random(8), Random(8)
	if len(a) != 13 || a == b || strings.Trim(a, "0123456789abcdefghjkmnpqrstvwxyz") != "" {
		t.Fatalf("Random(8) = %q, %q: want 13 characters of the ids' alphabet, different each time", a, b)
	}
}
