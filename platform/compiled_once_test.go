package platform_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/internal/schemastat"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/sandbox/jsfunc"
	"github.com/quiverhq/quiver/schema"
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

// A workspace's stored tools are many and few of them are called: loading them checks each
// schema (a compilation each) and keeps none compiled; a tool's first call compiles its
// schemas once more, for keeps, and its later calls, like the other tools, compile nothing.
func TestStoredToolsCompileTheirSchemasOnUse(t *testing.T) {
	ctx := context.Background()
	w := newToolWorld(t)
	const tools = 12
	for i := range tools {
		def := jsfunc.Definition{Name: fmt.Sprintf("triple_%d", i), Description: "Triples n.", Code: "export default ({ n }) => ({ tripled: n * 3 })",
			InputSchema:  &schema.Schema{Type: "object", Required: []string{"n"}, Properties: map[string]*schema.Schema{"n": {Type: "integer", Maximum: new(1000.0)}}},
			OutputSchema: &schema.Schema{Type: "object", Required: []string{"tripled"}, Properties: map[string]*schema.Schema{"tripled": {Type: "integer"}}}}
		if _, err := w.p.SaveFunctionTool(ctx, w.member, def); err != nil {
			t.Fatal(err)
		}
	}
	// A platform started over the same store (a server restarting) loads them.
	p, err := platform.New(platform.Config{Store: w.st})
	if err != nil {
		t.Fatal(err)
	}
	before := schemastat.Compilations.Load()
	ws := p.Workspace(ctx, "wsp_a")
	loaded := schemastat.Compilations.Load()
	if n := loaded - before; n < 2*tools {
		t.Fatalf("loading %d stored tools compiled %d schemas: each is to be checked as it loads", tools, n)
	}
	call := func(name, args string) *quiver.Result {
		t.Helper()
		r, err := ws.Dispatcher().Dispatch(ctx, quiver.Call{Name: name, Args: json.RawMessage(args)})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := call("triple_3", `{"n":5}`); r.IsError() || string(r.Value) != `{"tripled":15}` {
		t.Fatalf("first call: %+v", r)
	}
	first := schemastat.Compilations.Load()
	if n := first - loaded; n != 2 {
		t.Fatalf("the first call compiled %d schemas, want 2: its input's and its output's, once", n)
	}
	if r := call("triple_3", `{"n":5000}`); !r.IsError() || r.Code != quiver.CodeInvalidArguments {
		t.Fatalf("arguments over the maximum: %+v", r)
	}
	for range 20 {
		call("triple_3", `{"n":7}`)
	}
	if n := schemastat.Compilations.Load() - first; n != 0 {
		t.Fatalf("later calls compiled %d schemas", n)
	}
}
