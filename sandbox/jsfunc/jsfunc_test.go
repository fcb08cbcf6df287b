package jsfunc

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/schema"
)

func mustSchema(t *testing.T, doc string) *schema.Schema {
	t.Helper()
	var s schema.Schema
	if err := json.Unmarshal([]byte(doc), &s); err != nil {
		t.Fatal(err)
	}
	return &s
}

func dispatcher(t *testing.T, vars quiver.Vars, tools ...*quiver.Tool) *quiver.Dispatcher {
	t.Helper()
	reg := &quiver.Registry{}
	if err := reg.Register(tools...); err != nil {
		t.Fatal(err)
	}
	return &quiver.Dispatcher{Registry: reg, Resolver: vars}
}

func TestCalls(t *testing.T) {
	weather := Definition{
		Name: "weather", Description: "Returns the weather of a city.",
		Code: `export default async function (args, state) {
			const key = state.env("API_KEY");
			console.log("looking up", args.city);
			if (args.city === "Atlantis") throw new Error("no such city: " + args.city + " (key " + key + ")");
			if (args.city === "leak") return { leaked: key, region: state.env("REGION") };
			if (args.city === "undeclared") return state.env("HOME");
			return { city: args.city, unit: args.unit, temp: 21, region: state.env("REGION") };
		}`,
		InputSchema:  mustSchema(t, `{"type":"object","properties":{"city":{"type":"string"},"unit":{"type":"string","enum":["C","F"],"default":"C"}},"required":["city"]}`),
		OutputSchema: mustSchema(t, `{"type":"object","properties":{"temp":{"type":"number"}}}`),
		Variables:    []quiver.Variable{{Name: "API_KEY", Type: quiver.VarSecret, Required: true}, {Name: "REGION", Type: quiver.VarText}},
	}
	text := Definition{Name: "greet", Description: "Greets.", Language: "ts",
		Code:        `export default (a: {name: string}): string => "hello " + a.name`,
		InputSchema: mustSchema(t, `{"type":"object","properties":{"name":{"type":"string"}}}`)}
	badOutput := Definition{Name: "bad_output", Description: "Breaks its contract.",
		Code:         `export default () => ({temp: "warm"})`,
		OutputSchema: mustSchema(t, `{"type":"object","properties":{"temp":{"type":"number"}}}`)}
	bomb := Definition{Name: "bomb", Description: "Fills memory.", Limits: Limits{MemoryLimit: 4 << 20, Timeout: time.Minute},
		Code: `export default () => { const a = []; for (;;) a.push({}) }`}
	loop := Definition{Name: "loop", Description: "Never returns.", Limits: Limits{Timeout: 50 * time.Millisecond},
		Code: `export default () => { for (;;) {} }`}
	broken := Definition{Name: "broken", Description: "Imports what is not there.", Code: `import fs from "fs"; export default () => 1`}
	notFn := Definition{Name: "not_fn", Description: "Exports no function.", Code: `export default 42`}
	var tools []*quiver.Tool
	for _, d := range []Definition{weather, text, badOutput, bomb, loop, broken, notFn} {
		tool, err := New(d)
		if err != nil {
			t.Fatalf("%s: %v", d.Name, err)
		}
		tools = append(tools, tool)
	}
	d := dispatcher(t, quiver.Vars{"API_KEY": "sk-secret-123", "REGION": "eu", "HOME": "/root"}, tools...)

	tests := []struct {
		name, tool, args string
		code             quiver.Code // "" for success
		want             string      // the value, text or error must contain it
	}{
		{"arguments with defaults and variables", "weather", `{"city":"Paris"}`, "", `{"city":"Paris","unit":"C","temp":21,"region":"eu"}`},
		{"string result is text", "greet", `{"name":"ada"}`, "", "hello ada"},
		{"secret masked in the value", "weather", `{"city":"leak"}`, "", `"leaked":"[REDACTED]"`},
		{"secret masked in the error", "weather", `{"city":"Atlantis"}`, quiver.CodeToolError, "tool weather failed: Error: no such city: Atlantis (key [REDACTED])"},
		{"undeclared variable", "weather", `{"city":"undeclared"}`, quiver.CodeToolError, `variable "HOME" is not declared by tool weather; it declares API_KEY, REGION`},
		{"invalid arguments never reach the code", "weather", `{"city":3}`, quiver.CodeInvalidArguments, "/city"},
		{"output contract", "bad_output", `{}`, quiver.CodeInvalidOutput, "/temp"},
		{"memory", "bomb", `{}`, quiver.CodeToolError, "tool bomb ran out of memory (its limit is 4194304 bytes)"},
		{"timeout", "loop", `{}`, quiver.CodeTimeout, "tool loop was stopped: timed out after 50ms"},
		{"link error", "broken", `{}`, quiver.CodeToolError, `tool broken cannot run, its code is broken: LinkError: import "fs"`},
		{"default export not a function", "not_fn", `{}`, quiver.CodeToolError, "must export a function execute(state, args) or default (args, state) => result"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := d.Dispatch(context.Background(), quiver.Call{Name: tt.tool, Args: json.RawMessage(tt.args)})
			if err != nil {
				t.Fatal(err)
			}
			if r.Code != tt.code {
				t.Fatalf("code %q (%s), want %q", r.Code, r.Error, tt.code)
			}
			got := r.Error
			if tt.code == "" {
				got = r.ModelText()
			}
			if !strings.Contains(got, tt.want) {
				t.Errorf("%q does not contain %q", got, tt.want)
			}
			if strings.Contains(got+r.Stack+string(r.Value), "sk-secret-123") {
				t.Errorf("the secret leaked: %+v", r)
			}
		})
	}
}

func TestMissingVariable(t *testing.T) {
	tool, err := New(Definition{Name: "needs_key", Description: "Needs a key.", Code: `export default (a, s) => s.env("KEY")`,
		Variables: []quiver.Variable{{Name: "KEY", Type: quiver.VarSecret, Required: true}}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := dispatcher(t, quiver.Vars{}, tool).Call(context.Background(), "needs_key", nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Code != quiver.CodeMissingVariable || !strings.Contains(r.Error, "KEY") {
		t.Errorf("result %+v, want the missing variable named", r)
	}
}

func TestNewRejects(t *testing.T) {
	tests := []struct {
		name string
		def  Definition
		has  string
	}{
		{"empty code", Definition{Name: "t", Description: "d"}, `tool "t": the code is empty`},
		{"syntax error", Definition{Name: "t", Description: "d", Code: "export default () => {\n  oops(\n}"}, `tool "t": t.js:3:`},
		{"TypeScript syntax error", Definition{Name: "t", Description: "d", Language: "ts", Code: "const x: = 1"}, `t.js:1:`},
		{"no description", Definition{Name: "t", Code: "export default () => 1"}, "description is empty"},
		{"bad input schema", Definition{Name: "t", Description: "d", Code: "export default () => 1", InputSchema: &schema.Schema{Type: "string"}}, `root must have type "object"`},
		{"unknown language", Definition{Name: "t", Description: "d", Code: "1", Language: "py"}, `language "py"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.def)
			if err == nil || !strings.Contains(err.Error(), tt.has) {
				t.Errorf("error %v, want one containing %q", err, tt.has)
			}
		})
	}
}
