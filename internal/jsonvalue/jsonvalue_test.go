package jsonvalue

import "testing"

func TestEqual(t *testing.T) {
	for _, c := range []struct {
		x, y string
		want bool
	}{
		{`{"a":1,"b":[true,null]}`, `{"b": [true, null], "a": 1.0}`, true},
		{`{"a":1}`, `{"a":2}`, false},
		{``, `null`, true},
		{``, ``, true},
		{`{"a":1}`, ``, false},
		{`{"a":`, `{"a":`, false},
		{`"x"`, `"x"`, true},
	} {
		if got := Equal([]byte(c.x), []byte(c.y)); got != c.want {
			t.Errorf("Equal(%s, %s) = %v, want %v", c.x, c.y, got, c.want)
		}
	}
}
