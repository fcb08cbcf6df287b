// Package ids makes the ids Quiver gives records and calls: a prefix, then 48 bits of
// milliseconds and 80 random bits in lower-case Crockford base32, like "msg_06h0k1bg3awwsw4z...".
// Ids sort by creation time, which keeps the database indexes keyed by them appending at their
// end (one page touched per batch of inserts, not one per insert), and never collide in
// practice.
package ids

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
	"time"
)

var encoding = base32.NewEncoding("0123456789abcdefghjkmnpqrstvwxyz").WithPadding(base32.NoPadding)

// New returns a new id with the given prefix.
func New(prefix string) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(time.Now().UnixMilli())<<16)
	if _, err := rand.Read(b[6:]); err != nil {
		panic("ids: no randomness: " + err.Error()) // crypto/rand does not fail on supported systems
	}
	return prefix + "_" + encoding.EncodeToString(b[:])
}

// Random returns n random bytes in the ids' encoding.
func Random(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic("ids: no randomness: " + err.Error())
	}
	return encoding.EncodeToString(b)
}

// Encode returns b in the ids' encoding.
func Encode(b []byte) string { return encoding.EncodeToString(b) }

// Derived returns the id of prefix that t and seed always make: ordered by t as New's ids
// are, the rest from seed's SHA-256. Nodes that must name a record alike without asking each
// other (the first to make it wins) derive its id.
func Derived(prefix string, t time.Time, seed []byte) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(t.UnixMilli())<<16)
	sum := sha256.Sum256(seed)
	copy(b[6:], sum[:10])
	return prefix + "_" + encoding.EncodeToString(b[:])
}
