package agent_test

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/store"
)

// The children the seed-spelled leads below call, defined once for every test here.
var seedChildren = map[string]string{
	"summarize.yaml": `
kind: prompt
name: summarize
exposeAsTool: true
model: t:summarize
args: {type: object, required: [text], properties: {text: {type: string}, files: {type: array, items: {type: string}}}}
`,
	"analyst.yaml": `
name: analyst
type: dual_ai
exposeAsTool: true
model: t:analyst
args: {type: object, required: [task], properties: {task: {type: string}, files: {type: array, items: {type: string}}, label: {type: string}}}
`,
	"watcher.yaml":   "name: watcher\ntype: dual_ai\nmodel: t:watcher\n",
	"helper.yaml":    "name: helper\ntype: dual_ai\nmodel: t:helper\n",
	"assistant.yaml": "name: assistant\ntype: dual_ai\nmodel: t:assistant\n",
}

func withChildren(files map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range seedChildren {
		out[k] = v
	}
	for k, v := range files {
		out[k] = v
	}
	return out
}

// Q2, A2, A3: a lead written as seed 000 spells its configuration (camelCase, resumable:
// false) loads, and means what the same lead in snake_case means.
func TestLoadSeedSpellings(t *testing.T) {
	seed := `
name: lead
model: t:lead
maxCallsPerStep: 9
reasoningForCall: true
stop: {maxSteps: 4}
subprompts:
  - name: summarize
    includeTextResponse: false
    includeToolCalls: false
    includeErrors: true
    initUserMessageProperty: text
    initAttachmentsProperty: files
subagents:
  - name: analyst
    blocking: false
    initUserMessageProperty: task
    initAttachmentsProperty: files
    initAgentNameProperty: label
    resumable: false
  - name: watcher
    immediate: {nameEnv: REPOS, descriptionEnv: ABOUT, scopedEnv: [TOKEN]}
    optional: WATCH
  - name: helper
    resumable: {receives_messages: side_b, maxInstances: 3, parentCommunication: explicit}
  - name: assistant
    resumable: true
`
	snake := `
name: lead
model: t:lead
max_calls_per_step: 9
reasoning_for_call: true
stop: {max_steps: 4}
subprompts:
  - name: summarize
    include_text_response: false
    include_tool_calls: false
    include_errors: true
    init_user_message_property: text
    init_attachments_property: files
subagents:
  - name: analyst
    blocking: false
    init_user_message_property: task
    init_attachments_property: files
    init_agent_name_property: label
  - name: watcher
    immediate: {name_env: REPOS, description_env: ABOUT, scoped_env: [TOKEN]}
    optional: WATCH
  - name: helper
    resumable: {receivesMessages: side_b, max_instances: 3, parent_communication: explicit}
  - name: assistant
    resumable: {}
`
	load := func(lead string) *agent.Prompt {
		t.Helper()
		c, err := agent.LoadDir(writeFiles(t, withChildren(map[string]string{"lead.yaml": lead})))
		if err != nil {
			t.Fatal(err)
		}
		a, ok := c.Agent("lead")
		if !ok {
			t.Fatalf("no lead among %v", c.Names())
		}
		return a.Prompt
	}
	p := load(seed)
	off, on := false, true
	wantSub := []agent.Subprompt{{Name: "summarize", IncludeTextResponse: &off, IncludeToolCalls: &off, IncludeErrors: &on,
		InitUserMessageProperty: "text", InitAttachmentsProperty: "files"}}
	if !reflect.DeepEqual(p.Subprompts, wantSub) {
		t.Errorf("subprompts %+v, want %+v", p.Subprompts, wantSub)
	}
	wantAgents := []agent.Subagent{
		{Name: "analyst", Blocking: &off, InitUserMessageProperty: "task", InitAttachmentsProperty: "files", InitAgentNameProperty: "label"},
		{Name: "watcher", Immediate: &agent.Immediate{Enabled: true, NameEnv: "REPOS", DescriptionEnv: "ABOUT", ScopedEnv: []string{"TOKEN"}}, Optional: "WATCH"},
		{Name: "helper", Resumable: &agent.Resumable{ReceivesMessages: agent.SideB, MaxInstances: 3, ParentCommunication: agent.Explicit}},
		{Name: "assistant", Resumable: &agent.Resumable{}},
	}
	if !reflect.DeepEqual(p.Subagents, wantAgents) {
		t.Errorf("subagents %+v, want %+v", p.Subagents, wantAgents)
	}
	if p.MaxCallsPerStep != 9 || !p.ReasoningForCall || p.Stop.MaxSteps != 4 {
		t.Errorf("prompt %+v", p)
	}
	if q := load(snake); !reflect.DeepEqual(q.Subprompts, p.Subprompts) || !reflect.DeepEqual(q.Subagents, p.Subagents) ||
		q.MaxCallsPerStep != p.MaxCallsPerStep || !reflect.DeepEqual(q.Stop, p.Stop) {
		t.Errorf("the snake_case lead reads differently:\n%+v\n%+v", q, p)
	}
}

// Q2, A2, A3: what cannot work is refused when the definitions load, saying what and where:
// one field in two spellings, and an init_*_property the child's argument schema cannot carry
// (naming the property and the child).
func TestLoadSeedSpellingsRefusals(t *testing.T) {
	cases := []struct {
		name string
		lead string
		want []string
	}{
		{"two spellings at the top", "name: lead\nexpose_as_tool: true\nexposeAsTool: false\n",
			[]string{"lead.yaml", "expose_as_tool", "exposeAsTool", "write it once"}},
		{"two spellings in a subprompt", "name: lead\nsubprompts: [{name: summarize, include_errors: true, includeErrors: false}]\n",
			[]string{"lead.yaml", "subprompts[0]", "include_errors", "includeErrors", "write it once"}},
		{"two spellings in resumable", "name: lead\nsubagents: [{name: helper, resumable: {maxInstances: 2, max_instances: 3}}]\n",
			[]string{"subagents[0].resumable", "maxInstances", "max_instances"}},
		{"two spellings in immediate", "name: lead\nsubagents: [{name: watcher, immediate: {nameEnv: A, name_env: B}}]\n",
			[]string{"subagents[0].immediate", "nameEnv", "name_env"}},
		{"resumable neither false, true nor an object", "name: lead\nsubagents: [{name: helper, resumable: sometimes}]\n",
			[]string{"lead.yaml", "resumable: want false, true or {"}},
		{"message property of a default schema", "name: lead\nsubagents: [{name: helper, initUserMessageProperty: task}]\n",
			[]string{"agent lead", "subagent helper", `init_user_message_property "task"`, "agent helper", "arguments are: message"}},
		{"message property a schema lacks", "name: lead\nsubprompts: [{name: summarize, initUserMessageProperty: body}]\n",
			[]string{"subprompt summarize", `init_user_message_property "body"`, "prompt summarize", "arguments are: files, text"}},
		{"message property of an agent's schema", "name: lead\nsubagents: [{name: analyst, init_user_message_property: job}]\n",
			[]string{`"job"`, "agent analyst", "task"}},
		{"attachments property that is not an array", "name: lead\nsubagents: [{name: analyst, initAttachmentsProperty: task}]\n",
			[]string{`init_attachments_property "task"`, "agent analyst", "not an array"}},
		{"name property that is not a string", "name: lead\nsubagents: [{name: analyst, initAgentNameProperty: files}]\n",
			[]string{`init_agent_name_property "files"`, "agent analyst", "not a string"}},
		{"one property for two roles", "name: lead\nsubagents: [{name: analyst, initUserMessageProperty: task, initAgentNameProperty: task}]\n",
			[]string{"init_user_message_property and init_agent_name_property", `"task"`, "agent analyst"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := agent.LoadDir(writeFiles(t, withChildren(map[string]string{"lead.yaml": c.lead})))
			if !errors.Is(err, agent.ErrDefinition) {
				t.Fatalf("loaded, or not a definition error: %v", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// A catalog built in Go meets the same check of init_*_property when a run first needs the
// prompt's tools.
func TestInitPropertyRefusedInGo(t *testing.T) {
	backends(t, func(t *testing.T, st treeStore) {
		f := moreTree(t, st)
		f.prompt(&agent.Prompt{Name: "viewer", ExposeAsTool: true})
		lead := f.agent(&agent.Agent{Name: "lead", Prompt: &agent.Prompt{Name: "lead",
			Subprompts: []agent.Subprompt{{Name: "viewer", InitUserMessageProperty: "task"}}}})
		f.ms.add("lead", model.Response{Text: "never"})
		_, err := f.r.Run(ctx, f.root(t, lead), lead, "go")
		if !errors.Is(err, agent.ErrDefinition) || !strings.Contains(err.Error(), `"task"`) || !strings.Contains(err.Error(), "prompt viewer") {
			t.Fatalf("run: %v, want a definition error naming task and viewer", err)
		}
	})
}

// Q2, A2, A3: each init_*_property, written as seed 000 spells it, works end to end: the child
// a call starts receives the value of that argument (its first message, the files handed to
// its thread, its name).
func TestInitPropertiesEndToEnd(t *testing.T) {
	lead := `
name: lead
model: t:lead
subprompts:
  - {name: summarize, initUserMessageProperty: text, initAttachmentsProperty: files}
  - {name: viewer, initAttachmentsProperty: paths}
subagents:
  - {name: analyst, initUserMessageProperty: task, initAttachmentsProperty: files, initAgentNameProperty: label}
`
	viewer := "kind: prompt\nname: viewer\nexposeAsTool: true\nmodel: t:viewer\n" // the default {message}: paths is declared for it
	cases := []struct {
		name, tool, args string
		wantFirst        string // the child's first message starts with it
		wantFile         bool   // the child's thread holds a copy of the caller's file, named in its first message
		wantTag          string
	}{
		{name: "subprompt initUserMessageProperty", tool: "summarize", args: `{"text":"Three facts about otters."}`,
			wantFirst: "Three facts about otters."},
		{name: "subprompt initAttachmentsProperty", tool: "summarize", args: `{"text":"Summarize this.","files":["/attachments/report.txt"]}`,
			wantFirst: "Summarize this.", wantFile: true},
		{name: "subprompt initAttachmentsProperty declared by the runtime", tool: "viewer",
			args: `{"message":"Look at it.","paths":["/attachments/report.txt"]}`, wantFirst: "Look at it.", wantFile: true},
		{name: "subagent initUserMessageProperty", tool: "analyst", args: `{"task":"Count the otters."}`, wantFirst: "Count the otters."},
		{name: "subagent initAttachmentsProperty", tool: "analyst", args: `{"task":"Read the report.","files":["/attachments/report.txt"]}`,
			wantFirst: "Read the report.", wantFile: true},
		{name: "subagent initAgentNameProperty", tool: "analyst", args: `{"task":"Count the otters.","label":"otter-counter"}`,
			wantFirst: "Count the otters.", wantTag: "name:otter-counter"},
	}
	backends(t, func(t *testing.T, st treeStore) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				f := moreTree(t, st)
				cat, err := agent.LoadDir(writeFiles(t, withChildren(map[string]string{"lead.yaml": lead, "viewer.yaml": viewer})))
				if err != nil {
					t.Fatal(err)
				}
				for name, p := range cat.Prompts {
					f.cat.Prompts[name] = p
				}
				for name, a := range cat.Agents {
					f.cat.Agents[name] = a
				}
				childModel := f.ms.add(c.tool, model.Response{Text: "done"})
				f.ms.add("lead", model.Response{ToolCalls: calls(call("c1", c.tool, c.args))}, model.Response{Text: "lead done"})
				ld := f.cat.Agents["lead"]
				th := f.root(t, ld)
				if _, err := th.Files().Write(ctx, "/attachments/report.txt", []byte("otters: 12"), store.FileMeta{MimeType: "text/plain"}); err != nil {
					t.Fatal(err)
				}
				if out := run(t, f, th, ld, "go"); out.Text != "lead done" {
					t.Fatalf("outcome %+v", out)
				}
				if r := resultOf(t, th, "c1"); r.IsError() {
					t.Fatalf("result %+v", r)
				}
				child := onlyKid(t, th)
				hist := history(t, child)
				if len(hist) == 0 || hist[0].Role != store.RoleUser || !strings.HasPrefix(hist[0].Content, c.wantFirst) {
					t.Fatalf("the child's history %s: want a first message starting %q", dump(hist), c.wantFirst)
				}
				if got := childModel.requests()[0].Messages[0].Text; got != hist[0].Content {
					t.Fatalf("the child's model read %q, want %q", got, hist[0].Content)
				}
				m := attachmentLine.FindAllStringSubmatch(hist[0].Content, -1)
				if c.wantFile != (len(m) == 1) {
					t.Fatalf("first message %q: want an attachment line %v", hist[0].Content, c.wantFile)
				}
				if c.wantFile {
					if data, _, err := child.Files().Read(ctx, m[0][1]); err != nil || string(data) != "otters: 12" {
						t.Fatalf("the child's copy %s: %q %v", m[0][1], data, err)
					}
				}
				info, err := child.Refresh(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if c.wantTag != "" && !slices.Contains(info.Tags, c.wantTag) {
					t.Fatalf("child tags %v, want %s", info.Tags, c.wantTag)
				}
				if c.wantTag == "" && slices.ContainsFunc(info.Tags, func(tag string) bool { return strings.HasPrefix(tag, "name:") }) {
					t.Fatalf("child tags %v: named without a name argument", info.Tags)
				}
			})
		}
	})
}
