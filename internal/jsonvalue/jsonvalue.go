// Package jsonvalue compares JSON documents as the values they encode.
package jsonvalue

import (
	"bytes"
	"encoding/json"
	"reflect"
)

// Equal reports whether x and y encode the same JSON value, whatever their spacing and the
// order of their objects' keys (PostgreSQL's jsonb gives a document back spaced and ordered
// its own way). Either may be empty: null. A document that is not JSON equals nothing.
func Equal(x, y json.RawMessage) bool {
	if bytes.Equal(x, y) && (len(x) == 0 || json.Valid(x)) {
		return true
	}
	var vx, vy any
	if len(x) > 0 && json.Unmarshal(x, &vx) != nil {
		return false
	}
	if len(y) > 0 && json.Unmarshal(y, &vy) != nil {
		return false
	}
	return reflect.DeepEqual(vx, vy)
}
