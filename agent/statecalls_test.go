package agent_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/schema"
	"github.com/quiverhq/quiver/store"
)

// stateTools registers plan (a Go tool enabling _outputPath and _instance) and judge (a
// latent schema tool enabling _outputPath and _delegate, with an output schema) on the tree
// fixture's registry.
func stateTools(t *testing.T, f *treeFixture) {
	t.Helper()
	type planIn struct {
		Goal string `json:"goal"`
	}
	type planOut struct {
		Steps []string `json:"steps"`
	}
	plan := quiver.Func("plan", "Plans the steps to a goal.", func(ctx context.Context, in planIn) (planOut, error) {
		f.ran.add("plan:" + in.Goal)
		return planOut{Steps: []string{"start " + in.Goal, "finish " + in.Goal}}, nil
	}, quiver.WithMetaFields(schema.OutputPathField, schema.InstanceField))
	judge, err := quiver.ParseSchemaTool([]byte(`{"type": "object", "description": "Judges a draft.",
		"properties": {
			"_tool": {"const": "judge"},
			"draft": {"type": "string"},
			"_outputPath": {"type": "string"},
			"_delegate": {"type": "object"},
			"_output": {"type": "object", "properties": {"score": {"type": "integer", "minimum": 0, "maximum": 10}},
				"required": ["score"], "additionalProperties": false}},
		"required": ["draft"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.reg.Register(plan, judge); err != nil {
		t.Fatal(err)
	}
}

// toolSchema returns the parameters the model was offered for tool name in req.
func toolSchema(t *testing.T, req *model.Request, name string) string {
	t.Helper()
	for _, rt := range req.Tools.Tools {
		if rt.Canonical == name {
			return string(rt.Parameters)
		}
	}
	t.Fatalf("the model was not offered %s", name)
	return ""
}

func stateOf(t *testing.T, f *treeFixture, th interface {
	State(context.Context, string) (json.RawMessage, error)
}, instance string) string {
	t.Helper()
	doc, err := th.State(ctx, instance)
	if err != nil {
		t.Fatal(err)
	}
	return string(doc)
}

// A run's calls write their outputs into the thread's state and its instances' (a Go tool's
// value, a latent tool's _output), each path once; the model is offered the meta-fields of
// the tools that enable them and of the prompt, and the thread view of the store holds the
// result and the write together.
func TestRunWritesStateThroughOutputPath(t *testing.T) {
	backends(t, func(t *testing.T, st treeStore) {
		f := newTree(t, st)
		stateTools(t, f)
		lead := f.agent(&agent.Agent{Name: "lead", Prompt: &agent.Prompt{Name: "lead", Tools: []string{"plan", "judge", "echo"},
			Instances: []string{"east", "west"}}})
		m := f.ms.add("lead",
			model.Response{ToolCalls: calls(
				call("c1", "plan", `{"goal":"bridge","_outputPath":"/plan"}`),
				call("c2", "plan", `{"goal":"east","_outputPath":"/plan","_instance":"east"}`),
				call("c3", "judge", `{"draft":"d1","_output":{"score":7},"_outputPath":"/scores/first || /scores/second"}`),
				call("c4", "judge", `{"draft":"d2","_output":{"score":4},"_outputPath":"/scores/first || /scores/second"}`),
			)},
			model.Response{ToolCalls: calls(
				call("c5", "plan", `{"goal":"again","_outputPath":"/plan"}`),                                                // written: refused
				call("c6", "judge", `{"draft":"d3","_output":{"score":1},"_outputPath":"/scores/first || /scores/second"}`), // both written
				call("c7", "plan", `{"goal":"x","_instance":"north"}`),                                                      // no such instance
				call("c8", "echo", `{"text":"e","_outputPath":"/e"}`),                                                       // echo does not accept it
			)},
			model.Response{Text: "planned"})
		th := f.root(t, lead)
		out, err := f.r.Run(ctx, th, lead, "Plan the bridge.")
		if err != nil || out.Text != "planned" {
			t.Fatalf("run: %+v %v", out, err)
		}
		if got, want := stateOf(t, f, th, ""), `{"plan":{"steps":["start bridge","finish bridge"]},"scores":{"first":{"score":7},"second":{"score":4}}}`; got != want {
			t.Errorf("state %s\nwant  %s", got, want)
		}
		if got := stateOf(t, f, th, "east"); got != `{"plan":{"steps":["start east","finish east"]}}` {
			t.Errorf("east's state %s", got)
		}
		if got := stateOf(t, f, th, "west"); got != `{}` {
			t.Errorf("west's state %s", got)
		}
		for id, want := range map[string]string{"c5": "state_conflict", "c6": "state_conflict", "c7": "invalid_arguments", "c8": "invalid_arguments"} {
			if r := resultOf(t, th, id); string(r.Code) != want {
				t.Errorf("%s: %+v, want %s", id, r, want)
			}
		}
		if r := resultOf(t, th, "c7"); !strings.Contains(r.Error, "the instances are: east, west") {
			t.Errorf("the unknown instance's error does not list them: %s", r.Error)
		}
		if r := resultOf(t, th, "c5"); !strings.Contains(r.Error, "/plan") || !strings.Contains(r.Error, "start again") {
			t.Errorf("the refused write's error lacks the path or the output: %s", r.Error)
		}
		// plan ran for c1, c2 and c5 (its output was refused afterwards), not for c7.
		if ran := f.ran.list(); !slices.Equal(ran, []string{"plan:bridge", "plan:east", "plan:again"}) {
			t.Errorf("ran %q", ran)
		}
		// Offered: plan's and judge's own meta-fields, none on echo.
		req := m.reqs[0]
		for name, want := range map[string][]string{"plan": {"_outputPath", "_instance"}, "judge": {"_outputPath", "_delegate"}, "echo": nil} {
			params := toolSchema(t, req, name)
			for _, f := range schema.MetaFields {
				if has := strings.Contains(params, `"`+f+`"`); has != slices.Contains(want, f) {
					t.Errorf("%s offered %s: %v (%s)", name, f, has, params)
				}
			}
		}
	})
}

// A prompt's meta_fields enable them on all its tools, in every dialect; strict OpenAI makes
// them nullable, and a null is no meta-field. In composed mode the calls' meta-fields are
// kept with the stored call, so a call resumed after a pause writes its state as the first
// try would have.
func TestPromptEnablesMetaFields(t *testing.T) {
	backends(t, func(t *testing.T, st treeStore) {
		f := newTree(t, st)
		if err := f.reg.Register(quiver.Func("approve_me", "Needs a person's yes.", func(ctx context.Context, in struct {
			Text string `json:"text"`
		}) (string, error) {
			return "approved " + in.Text, nil
		}, quiver.WithConfirmation())); err != nil {
			t.Fatal(err)
		}
		for _, d := range []schema.Dialect{schema.OpenAIStrict, schema.Anthropic, schema.Gemini} {
			f.ms = &models{}
			f.r.OpenModel = f.ms.open
			lead := f.agent(&agent.Agent{Name: "lead", Prompt: &agent.Prompt{Name: "lead", Tools: []string{"echo"}, Strict: true,
				MetaFields: []string{schema.OutputPathField}}})
			m := f.ms.add("lead",
				model.Response{ToolCalls: calls(call("n1", "echo", `{"text":"a","_outputPath":"/a"}`), call("n2", "echo", `{"text":"b","_outputPath":null}`))},
				model.Response{Text: "ok"})
			m.dialect = d
			th := f.root(t, lead)
			if out, err := f.r.Run(ctx, th, lead, "go"); err != nil || out.Text != "ok" {
				t.Fatalf("%s: %+v %v", d, out, err)
			}
			if got := stateOf(t, f, th, ""); got != `{"a":"echo: a"}` {
				t.Errorf("%s: state %s", d, got)
			}
			params := toolSchema(t, m.reqs[0], "echo")
			if !strings.Contains(params, `"_outputPath"`) {
				t.Errorf("%s: echo not offered _outputPath: %s", d, params)
			}
			if d == schema.OpenAIStrict && !strings.Contains(params, `"null"`) {
				t.Errorf("strict: _outputPath is not nullable: %s", params)
			}
		}

		// Composed mode, with a pause between the model's turn and the call's run.
		f.ms = &models{}
		f.r.OpenModel = f.ms.open
		composed := f.agent(&agent.Agent{Name: "composer", Prompt: &agent.Prompt{Name: "composer", Tools: []string{"approve_me"},
			MetaFields: []string{schema.OutputPathField},
			Output:     &schema.Schema{Type: "object", Properties: map[string]*schema.Schema{"done": {Type: "boolean"}}}}})
		f.ms.add("composer",
			model.Response{Text: `{"calls":[{"_tool":"approve_me","text":"t","_outputPath":"/approved"}],"output":null}`},
			model.Response{Text: `{"calls":[],"output":{"done":true}}`})
		th := f.root(t, composed)
		out, err := f.r.Run(ctx, th, composed, "go")
		if err != nil || out.Status != agent.RunPaused {
			t.Fatalf("composed run: %+v %v", out, err)
		}
		if err := st.Decide(ctx, th.WorkspaceID(), th.ID(), &store.Decision{CallID: out.Pending.Call.ID, Action: store.Approve}); err != nil {
			t.Fatal(err)
		}
		if out, err = f.r.Resume(ctx, th, composed); err != nil || out.Status != agent.RunFinished {
			t.Fatalf("resumed: %+v %v", out, err)
		}
		if got := stateOf(t, f, th, ""); got != `{"approved":"approved t"}` {
			t.Errorf("composed, resumed: state %s", got)
		}
	})
}

// _delegate runs the call as an isolated request: a saved prompt or one described inline, in
// a child thread that sees only the call's arguments; its output is the call's, checked
// against the tool's output schema, and may go to the state like any output.
func TestDelegateRunsAnIsolatedRequest(t *testing.T) {
	backends(t, func(t *testing.T, st treeStore) {
		f := newTree(t, st)
		stateTools(t, f)
		f.prompt(&agent.Prompt{Name: "critic", System: "You judge drafts.", Tools: []string{"echo"}})
		// A delegate is asked for the tool's output schema: it answers in the composed form.
		critic := f.ms.add("critic",
			model.Response{Text: `{"calls":[{"_tool":"echo","text":"reading"}],"output":null}`},
			model.Response{Text: `{"calls":[],"output":{"score":9}}`})
		f.prompt(&agent.Prompt{Name: "sloppy"})
		f.ms.add("sloppy", model.Response{Text: `{"calls":[],"output":{"score":99}}`})
		f.prompt(&agent.Prompt{Name: "other", Model: "t:quick"})
		quick := f.ms.add("quick", model.Response{Text: `{"calls":[],"output":{"score":3}}`})
		lead := f.agent(&agent.Agent{Name: "lead", Prompt: &agent.Prompt{Name: "lead", System: "SECRET LEAD INSTRUCTIONS",
			Tools: []string{"judge", "echo"}}})
		f.ms.add("lead",
			model.Response{ToolCalls: calls(
				call("d1", "judge", `{"draft":"the draft","_output":{"score":0},"_delegate":{"prompt":"critic"},"_outputPath":"/verdict"}`),
				call("d2", "judge", `{"draft":"x","_output":{"score":0},"_delegate":"sloppy"}`),
				call("d3", "judge", `{"draft":"y","_output":{"score":0},"_delegate":{"system":"Score it.","model":"t:quick","tools":["echo"]}}`),
				call("d4", "judge", `{"draft":"z","_output":{"score":0},"_delegate":"nobody"}`),
				call("d5", "judge", `{"draft":"z","_output":{"score":0},"_delegate":{"system":"s","tools":["secret_tool"]}}`),
				call("d6", "judge", `{"draft":"z","_output":{"score":0},"_delegate":{"system":"s","model":"t:expensive"}}`),
				call("d7", "judge", `{"draft":"z","_output":{"score":0},"_delegate":{"prompt":"critic","system":"s"}}`),
			)},
			model.Response{Text: "judged"})
		th := f.root(t, lead)
		if out, err := f.r.Run(ctx, th, lead, "Judge the drafts. PRIVATE NOTE"); err != nil || out.Text != "judged" {
			t.Fatalf("run: %+v %v", out, err)
		}
		if r := resultOf(t, th, "d1"); r.IsError() || string(r.Value) != `{"score":9}` {
			t.Errorf("d1: %+v", r)
		}
		if got := stateOf(t, f, th, ""); got != `{"verdict":{"score":9}}` {
			t.Errorf("state %s", got)
		}
		if r := resultOf(t, th, "d2"); r.Code != quiver.CodeInvalidOutput {
			t.Errorf("d2, an output over the schema's maximum: %+v", r)
		}
		if r := resultOf(t, th, "d3"); r.IsError() || string(r.Value) != `{"score":3}` {
			t.Errorf("d3: %+v", r)
		}
		for id, want := range map[string]string{"d4": `unknown prompt "nobody"; the saved prompts are: critic, other, sloppy`,
			"d5": `tool "secret_tool", which is not among yours (echo, judge)`, "d6": `model "t:expensive", which no prompt here uses`,
			"d7": "names a saved prompt and describes one too"} {
			if r := resultOf(t, th, id); r.Code != quiver.CodeInvalidArguments || !strings.Contains(r.Error, want) {
				t.Errorf("%s: %+v, want %q", id, r, want)
			}
		}
		// The critic saw its own system text and the call's arguments, nothing of the lead's.
		req := critic.reqs[0]
		var seen strings.Builder
		seen.WriteString(req.System)
		for _, msg := range req.Messages {
			seen.WriteString(msg.Text)
		}
		if s := seen.String(); strings.Contains(s, "SECRET LEAD") || strings.Contains(s, "PRIVATE NOTE") || !strings.Contains(s, "the draft") ||
			!strings.HasPrefix(s, "You judge drafts.") {
			t.Errorf("the delegate's request: %s", s)
		}
		if req.Output == nil {
			t.Error("the delegate was not asked for output in the tool's output schema")
		}
		if len(quick.reqs) != 1 || !strings.HasPrefix(quick.reqs[0].System, "Score it.") {
			t.Errorf("the anonymous request: %d requests", len(quick.reqs))
		}
		kids, err := th.Children(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(kids) != 3 {
			t.Errorf("%d children, want one per delegated call that ran: %+v", len(kids), kids)
		}
		if ran := f.ran.list(); slices.Contains(ran, "plan") {
			t.Errorf("ran %q", ran)
		}
	})
}

// A client tool's result, submitted by the client, is recorded through the run's dispatcher:
// its output goes where the call's _outputPath says, once.
func TestClientResultWritesState(t *testing.T) {
	backends(t, func(t *testing.T, st treeStore) {
		f := newTree(t, st)
		pick, err := quiver.NewTool(quiver.Spec{Name: "pick_file", Description: "The user picks a file.", Target: quiver.TargetClient,
			MetaFields: []string{schema.OutputPathField}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		ask, err := quiver.NewTool(quiver.Spec{Name: "ask_user", Description: "Asks the user.", Target: quiver.TargetClient,
			MetaFields: schema.MetaFields}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.reg.Register(pick, ask); err != nil {
			t.Fatal(err)
		}
		lead := f.agent(&agent.Agent{Name: "lead", Prompt: &agent.Prompt{Name: "lead", Tools: []string{"pick_file", "ask_user"}}})
		f.ms.add("lead",
			model.Response{ToolCalls: calls(call("p1", "pick_file", `{"_outputPath":"/file"}`))},
			model.Response{ToolCalls: calls(call("p2", "pick_file", `{"_outputPath":"/file"}`))},
			// Calls that cannot run as asked are refused at once: nobody is asked.
			model.Response{ToolCalls: calls(call("p3", "ask_user", `{"_instance":"nope"}`), call("p4", "ask_user", `{"_delegate":"critic"}`))},
			model.Response{Text: "done"})
		th := f.root(t, lead)
		out, err := f.r.Run(ctx, th, lead, "pick two")
		if err != nil || out.Status != agent.RunPaused {
			t.Fatalf("run: %+v %v", out, err)
		}
		for _, id := range []string{"p1", "p2"} {
			res := &quiver.Result{Status: quiver.StatusSuccess, Value: json.RawMessage(`{"path":"/home/u/` + id + `.txt"}`)}
			if err := f.r.SubmitResult(ctx, th, lead, id, res); err != nil {
				t.Fatalf("submit %s: %v", id, err)
			}
			if out, err = f.r.Resume(ctx, th, lead); err != nil {
				t.Fatalf("resume after %s: %v", id, err)
			}
		}
		if out.Status != agent.RunFinished {
			t.Fatalf("the run: %+v", out)
		}
		if got := stateOf(t, f, th, ""); got != `{"file":{"path":"/home/u/p1.txt"}}` {
			t.Errorf("state %s", got)
		}
		if r := resultOf(t, th, "p2"); r.Code != quiver.CodeStateConflict || !strings.Contains(r.Error, "p2.txt") {
			t.Errorf("the second client result: %+v", r)
		}
		for id, want := range map[string]string{"p3": "no instances", "p4": "runs in the client, so it cannot be delegated"} {
			if r := resultOf(t, th, id); r.Code != quiver.CodeInvalidArguments || !strings.Contains(r.Error, want) {
				t.Errorf("%s: %+v, want %q", id, r, want)
			}
		}
	})
}
