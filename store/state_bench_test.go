package store_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/quiverhq/quiver/store"
)

// BenchmarkApplyStateWrite writes one small output into a state of about 900 KB (2,000
// members of 450 bytes, under /out): the cost every AppendState pays inside its transaction
// (in SQLite, holding the database's one writer lock).
func BenchmarkApplyStateWrite(b *testing.B) {
	members := make([]string, 2000)
	for i := range members {
		members[i] = fmt.Sprintf(`"m%d":{"text":%q,"n":%d.50}`, i, strings.Repeat("x", 400), i)
	}
	doc := json.RawMessage(`{"out":{` + strings.Join(members, ",") + `},"plan":{"steps":[1,2,3]}}`)
	w := &store.StateWrite{Paths: []string{"/out/new"}, Value: json.RawMessage(`{"ok":true}`)}
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := store.ApplyStateWrite(doc, w); err != nil {
			b.Fatal(err)
		}
	}
}
