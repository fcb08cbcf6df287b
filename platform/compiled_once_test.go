package platform_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/internal/schemastat"
	"github.com/quiverhq/quiver/platform"
)

// S5: checking a call's arguments outside the dispatcher (a person editing a call before
// approving it, the console trying a tool) uses the schema compiled when the tool was made;
// checked many times, it compiles nothing.
func TestCheckArgsCompilesNoSchema(t *testing.T) {
	type args struct {
		City string `json:"city" minLength:"1"`
		Days int    `json:"days,omitempty" minimum:"1" maximum:"14" default:"3"`
		When string `json:"when,omitempty" format:"date"`
	}
	tool := quiver.Func("forecast", "Forecasts the weather.", func(context.Context, args) (string, error) { return "sunny", nil })
	made := schemastat.Compilations.Load()
	cases := []struct {
		name, args, want string // want: the checked arguments; "" when refused
	}{
		{name: "defaults applied", args: `{"city":"Paris"}`, want: `{"city":"Paris","days":3}`},
		{name: "valid", args: `{"city":"Paris","days":5,"when":"2025-06-01"}`, want: `{"city":"Paris","days":5,"when":"2025-06-01"}`},
		{name: "invalid", args: `{"city":"","days":30}`},
		{name: "bad format", args: `{"city":"Paris","when":"soon"}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for range 50 {
				got, err := platform.CheckArgs(tool, json.RawMessage(c.args))
				if c.want == "" {
					if err == nil {
						t.Fatalf("%s: accepted as %s", c.args, got)
					}
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				var g, w any
				if json.Unmarshal(got, &g) != nil || json.Unmarshal([]byte(c.want), &w) != nil || !sameJSONValue(g, w) {
					t.Fatalf("checked %s as %s, want %s", c.args, got, c.want)
				}
			}
			if n := schemastat.Compilations.Load() - made; n != 0 {
				t.Fatalf("checking arguments compiled %d schemas; the tool's own compiled schema serves (S5)", n)
			}
		})
	}
}

func sameJSONValue(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}
