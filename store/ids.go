package store

import "github.com/quiverhq/quiver/internal/ids"

// Id prefixes, one per kind of record.
const (
	PrefixThread  = "thr"
	PrefixMessage = "msg"
)

// NewID returns a new id with the given prefix, like "thr_01jd3k...": 48 bits of milliseconds
// then 80 random bits, so ids sort by creation time and never collide in practice.
func NewID(prefix string) string { return ids.New(prefix) }
