package jsonptr

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in   string
		want []string // nil: refused
	}{
		{"/plan", []string{"plan"}},
		{"/plan/steps", []string{"plan", "steps"}},
		{"/a~1b/c~0d", []string{"a/b", "c~d"}},
		{"/~01", []string{"~1"}},
		{"/0/-", []string{"0", "-"}},
		{"/é/名前", []string{"é", "名前"}},
		{"", nil},
		{"/", nil},
		{"plan", nil},
		{"/a//b", nil},
		{"/a/", nil},
		{"/a~", nil},
		{"/a~2", nil},
		{"/a\x00b", nil},
		{"/a\nb", nil},
		{"/a\xffb", nil},
		{"/" + strings.Repeat("a", MaxBytes), nil},
		{strings.Repeat("/a", MaxSegments+1), nil},
		{strings.Repeat("/a", MaxSegments), slices.Repeat([]string{"a"}, MaxSegments)},
	}
	for _, tt := range tests {
		got, err := Parse(tt.in)
		if tt.want == nil {
			if !errors.Is(err, ErrSyntax) {
				t.Errorf("Parse(%q) = %q, %v; want ErrSyntax", tt.in, got, err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("Parse(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
		if back := Format(got); back != tt.in {
			t.Errorf("Format(Parse(%q)) = %q", tt.in, back)
		}
	}
}

func TestOverlap(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want bool
	}{
		{"/a", "/a", true},
		{"/a", "/a/b", true},
		{"/a/b", "/a", true},
		{"/a", "/b", false},
		{"/a/b", "/a/c", false},
		{"/a~1b", "/a", false},
		{"/ab", "/a", false},
	} {
		a, _ := Parse(tt.a)
		b, _ := Parse(tt.b)
		if got := Overlap(a, b); got != tt.want {
			t.Errorf("Overlap(%s, %s) = %v", tt.a, tt.b, got)
		}
	}
}
