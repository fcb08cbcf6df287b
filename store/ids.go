package store

import (
	"crypto/rand"
	"encoding/base32"
	"encoding/binary"
	"time"
)

// Id prefixes, one per kind of record.
const (
	PrefixThread  = "thr"
	PrefixMessage = "msg"
)

var idEncoding = base32.NewEncoding("0123456789abcdefghjkmnpqrstvwxyz").WithPadding(base32.NoPadding)

// NewID returns a new id with the given prefix, like "thr_01jd3k...": 48 bits of milliseconds
// then 80 random bits, so ids sort by creation time and never collide in practice.
func NewID(prefix string) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(time.Now().UnixMilli())<<16)
	if _, err := rand.Read(b[6:]); err != nil {
		panic("store: no randomness: " + err.Error()) // crypto/rand does not fail on supported systems
	}
	return prefix + "_" + idEncoding.EncodeToString(b[:])
}
