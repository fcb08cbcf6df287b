package agent_test

import (
	"testing"

	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/internal/schemastat"
	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/schema"
)

// S5: an agent's runs compile no schema. A prompt's nested tools (prompt tools, sub-agents)
// are built, their schemas compiled, once per prompt; after the first run, runs on new threads
// whose calls reach a registry tool, a prompt tool and a sub-agent, valid and not, compile
// nothing.
func TestRunsCompileNoSchema(t *testing.T) {
	args := func(prop string) *schema.Schema {
		return &schema.Schema{Type: "object", Required: []string{prop}, Properties: map[string]*schema.Schema{prop: {Type: "string", MinLength: ptrTo(1)}}}
	}
	backends(t, func(t *testing.T, st treeStore) {
		f := moreTree(t, st)
		f.prompt(&agent.Prompt{Name: "summarize", ExposeAsTool: true, Args: args("text")})
		f.agent(&agent.Agent{Name: "analyst", Type: agent.DualAI, Prompt: &agent.Prompt{Name: "analyst", Args: args("task")}})
		lead := f.agent(&agent.Agent{Name: "lead", Prompt: &agent.Prompt{Name: "lead", Tools: []string{"echo"},
			Subprompts: []agent.Subprompt{{Name: "summarize", InitUserMessageProperty: "text"}},
			Subagents:  []agent.Subagent{{Name: "analyst", InitUserMessageProperty: "task"}}}})
		f.ms.add("summarize", model.Response{Text: "summary"})
		f.ms.add("analyst", model.Response{Text: "analysis"})
		f.ms.add("lead", model.Response{ToolCalls: calls(
			call("c1", "echo", `{"text":"hi"}`),
			call("c2", "echo", `{"text":5}`),
			call("c3", "summarize", `{"text":"a long text"}`),
			call("c4", "summarize", `{"text":""}`),
			call("c5", "analyst", `{"task":"count"}`),
			call("c6", "analyst", `{}`),
		)}, model.Response{Text: "lead done"})
		runOnce := func() {
			t.Helper()
			th := f.root(t, lead)
			if out := run(t, f, th, lead, "go"); out.Text != "lead done" {
				t.Fatalf("outcome %+v", out)
			}
			for id, wantErr := range map[string]bool{"c1": false, "c2": true, "c3": false, "c4": true, "c5": false, "c6": true} {
				if r := resultOf(t, th, id); r.IsError() != wantErr {
					t.Fatalf("result of %s: %+v, want error %v", id, r, wantErr)
				}
			}
		}
		runOnce() // builds the lead's nested tools
		before := schemastat.Compilations.Load()
		for range 5 {
			runOnce()
		}
		if n := schemastat.Compilations.Load() - before; n != 0 {
			t.Fatalf("5 runs compiled %d schemas; a prompt's tools are built once (S5)", n)
		}
	})
}
