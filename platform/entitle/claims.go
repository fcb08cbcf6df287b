package entitle

import (
	"slices"
	"strings"
)

// ClaimHolds says whether the claim named path holds value: the claim of that exact name (URL
// names hold dots), else the one a dotted path reaches ("realm_access.roles"); it holds value
// when it is value, an array holding it, an object with it as a key (roles keyed by name), or,
// for scope and scp, a space-separated list holding it. The sign-in rules that grant a token
// its workspace read claims the same way.
func ClaimHolds(claims map[string]any, path, value string) bool {
	v, ok := claims[path]
	if !ok {
		var cur any = claims
		for part := range strings.SplitSeq(path, ".") {
			m, ok := cur.(map[string]any)
			if !ok {
				return false
			}
			cur = m[part]
		}
		v = cur
	}
	switch v := v.(type) {
	case string:
		if path == "scope" || path == "scp" {
			return slices.Contains(strings.Fields(v), value)
		}
		return v == value
	case []any:
		return slices.Contains(v, any(value))
	case map[string]any:
		_, ok := v[value]
		return ok
	}
	return false
}
