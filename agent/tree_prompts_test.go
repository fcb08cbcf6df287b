package agent_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/schema"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/secret"
	"github.com/quiverhq/quiver/store/vars"
	"github.com/quiverhq/quiver/thread"
)

// These tests drive prompts and agents called as tools end to end, on both stores: the real
// runner, real threads, scripted models (one per prompt, see models in tree_test.go).

// moreTree returns a tree fixture whose background work is waited for before the store closes.
func moreTree(t *testing.T, st treeStore) *treeFixture {
	t.Helper()
	f := newTree(t, st)
	t.Cleanup(f.r.Wait) // runs before the store's Close (cleanups run last first)
	return f
}

// gate makes m wait in Generate until the returned release is called; the test's end releases
// it too, so a failing test never leaves a run hanging.
func gate(t *testing.T, m *turnModel) (release func()) {
	t.Helper()
	m.block = make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(m.block) }) }
	t.Cleanup(release) // registered after moreTree's Wait: runs before it
	return release
}

func off() *bool { return new(bool) }
func yes() *bool { b := true; return &b }

// requests returns the requests m received so far.
func (m *turnModel) requests() []*model.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.reqs)
}

// script adds turns to a model between runs.
func (m *turnModel) script(turns ...model.Response) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.turns = append(m.turns, turns...)
}

// offered lists the canonical names of the tools a request offered.
func offered(req *model.Request) []string {
	if req.Tools == nil {
		return nil
	}
	var out []string
	for _, rt := range req.Tools.Tools {
		out = append(out, rt.Canonical)
	}
	slices.Sort(out)
	return out
}

// everything is all a model could read of a request: the system text, every message's text
// and calls, and the tool definitions.
func everything(t *testing.T, req *model.Request) string {
	t.Helper()
	var b strings.Builder
	b.WriteString(req.System)
	for _, m := range req.Messages {
		b.WriteString("\n" + m.Text)
		for _, c := range m.ToolCalls {
			b.WriteString("\n" + c.Name + string(c.Args))
		}
	}
	if req.Tools != nil {
		j, err := json.Marshal(req.Tools)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(j)
	}
	if req.Output != nil {
		j, _ := json.Marshal(req.Output)
		b.Write(j)
	}
	return b.String()
}

// kids opens the children of th, oldest first.
func kids(t *testing.T, th *thread.Thread) []*thread.Thread {
	t.Helper()
	list, err := th.Children(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []*thread.Thread
	for _, c := range list {
		k, err := th.Child(ctx, c.Ref)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, k)
	}
	return out
}

func onlyKid(t *testing.T, th *thread.Thread) *thread.Thread {
	t.Helper()
	ks := kids(t, th)
	if len(ks) != 1 {
		t.Fatalf("thread %s has %d children, want 1", th.ID(), len(ks))
	}
	return ks[0]
}

// notices returns the system messages of th's history (children's results, notifications).
func notices(t *testing.T, th *thread.Thread) []string {
	t.Helper()
	var out []string
	for _, m := range history(t, th) {
		if m.Role == store.RoleSystem {
			out = append(out, m.Content)
		}
	}
	return out
}

func wantCode(t *testing.T, r *quiver.Result, code quiver.Code, contains ...string) {
	t.Helper()
	if !r.IsError() || r.Code != code {
		t.Fatalf("result %+v: want an error with code %s", r, code)
	}
	for _, s := range contains {
		if !strings.Contains(r.Error, s) {
			t.Fatalf("error %q does not mention %q", r.Error, s)
		}
	}
}

func run(t *testing.T, f *treeFixture, th *thread.Thread, a *agent.Agent, message string) *agent.Outcome {
	t.Helper()
	out, err := f.r.Run(ctx, th, a, message)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (f *treeFixture) eventList() []agent.Event {
	f.events.mu.Lock()
	defer f.events.mu.Unlock()
	return slices.Clone(f.events.evs)
}

// resolver gives the runner a variable resolver over the test's store (and, when asked, its
// Variables writer).
func (f *treeFixture) resolver(t *testing.T, writer bool) *vars.Resolver {
	t.Helper()
	key, _, err := secret.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	res := vars.New(f.st, secret.NewKeyring(key))
	f.r.Resolver = res
	if writer {
		f.r.Variables = res
	}
	return res
}

func setVar(t *testing.T, res *vars.Resolver, th *thread.Thread, name, value string, scoped bool) {
	t.Helper()
	if err := res.Set(ctx, th.WorkspaceID(), quiver.LayerThread, th.ID(), vars.Value{Name: name, Value: value, Scoped: scoped}); err != nil {
		t.Fatal(err)
	}
}

// Q2, Q3: a prompt tool's result joins the flow's answer and a summary of its calls, each part
// switched on or off; a failed nested call makes the result an error listing it only while
// errors are included. The lead's run goes on either way.
func TestPromptToolShaping(t *testing.T) {
	cases := []struct {
		name    string
		cfg     agent.Subprompt
		wantErr bool
		exact   *string // the whole text of a success
		has     []string
		hasNot  []string
	}{
		{name: "defaults", wantErr: true,
			has: []string{"prompt inner: 1 nested call(s) failed", "- fail failed: the disk is full", "nested answer", "Tool calls:", "- echo: echo: x"}},
		{name: "errors off", cfg: agent.Subprompt{IncludeErrors: off()},
			has: []string{"nested answer", "Tool calls:", "- echo: echo: x", "- fail (error): the disk is full"}},
		{name: "text off", cfg: agent.Subprompt{IncludeTextResponse: off(), IncludeErrors: off()},
			has: []string{"Tool calls:", "- echo: echo: x", "- fail (error)"}, hasNot: []string{"nested answer"}},
		{name: "calls off", cfg: agent.Subprompt{IncludeToolCalls: off(), IncludeErrors: off()}, exact: ptrTo("nested answer")},
		{name: "all off", cfg: agent.Subprompt{IncludeTextResponse: off(), IncludeToolCalls: off(), IncludeErrors: off()}, exact: ptrTo("")},
		{name: "only errors", cfg: agent.Subprompt{IncludeTextResponse: off(), IncludeToolCalls: off(), IncludeErrors: yes()}, wantErr: true,
			has: []string{"- fail failed: the disk is full"}, hasNot: []string{"nested answer", "Tool calls:", "echo: x"}},
		{name: "all on, explicit", cfg: agent.Subprompt{IncludeTextResponse: yes(), IncludeToolCalls: yes(), IncludeErrors: yes()}, wantErr: true,
			has: []string{"- fail failed: the disk is full", "nested answer", "- echo: echo: x"}},
	}
	backends(t, func(t *testing.T, st treeStore) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				f := moreTree(t, st)
				f.prompt(&agent.Prompt{Name: "inner", ExposeAsTool: true, Tools: []string{"echo", "fail"}})
				f.ms.add("inner",
					model.Response{ToolCalls: calls(call("i1", "echo", `{"text":"x"}`), call("i2", "fail", `{}`))},
					model.Response{Text: "nested answer"})
				cfg := c.cfg
				cfg.Name = "inner"
				lead := f.agent(&agent.Agent{Name: "lead", Prompt: &agent.Prompt{Name: "lead", Tools: []string{"echo", "fail"},
					Subprompts: []agent.Subprompt{cfg}}})
				f.ms.add("lead", model.Response{ToolCalls: calls(call("c1", "inner", `{"message":"do it"}`))}, model.Response{Text: "lead done"})
				th := f.root(t, lead)
				if out := run(t, f, th, lead, "go"); out.Text != "lead done" || out.Status != agent.RunFinished {
					t.Fatalf("outcome %+v: the lead's run goes on after the prompt tool", out)
				}
				r := resultOf(t, th, "c1")
				if r.IsError() != c.wantErr {
					t.Fatalf("result %+v: error %v, want %v", r, r.IsError(), c.wantErr)
				}
				got := r.Text
				if r.IsError() {
					got = r.Error
					if r.Code != quiver.CodeToolError {
						t.Fatalf("code %s, want tool_error", r.Code)
					}
				}
				if c.exact != nil && got != *c.exact {
					t.Fatalf("result text %q, want %q", got, *c.exact)
				}
				for _, s := range c.has {
					if !strings.Contains(got, s) {
						t.Fatalf("result %q does not contain %q", got, s)
					}
				}
				for _, s := range c.hasNot {
					if strings.Contains(got, s) {
						t.Fatalf("result %q contains %q", got, s)
					}
				}
				// The flow ran in its own thread: the echo ran there, not in the lead's.
				flow := onlyKid(t, th)
				if got := f.ran.list(); !reflect.DeepEqual(got, []string{flow.ID() + ":echo:x"}) {
					t.Fatalf("ran %v, want the echo once in the flow's thread %s", got, flow.ID())
				}
				if info, _ := flow.Refresh(ctx); info.Status != store.StatusTerminated || !slices.Contains(info.Tags, "prompt:inner") {
					t.Fatalf("flow thread %+v: want terminated and tagged prompt:inner", info)
				}
			})
		}
	})
}

func ptrTo[T any](v T) *T { return &v }

// Q1, Q2: a prompt with its own argument schema: its arguments are validated, and the
// configured argument (or, without one, all the arguments as JSON) is the flow's first user
// message.
func TestPromptToolArguments(t *testing.T) {
	args := &schema.Schema{Type: "object", Required: []string{"text", "lang"}, Properties: map[string]*schema.Schema{
		"text": {Type: "string", Description: "What to translate."},
		"lang": {Type: "string", Enum: []any{"en", "de"}},
	}}
	cases := []struct {
		name      string
		property  string
		callArgs  string
		wantFirst string // the flow's first message; "" when the call is refused
		wantJSON  bool   // compare wantFirst as JSON
	}{
		{name: "property", property: "text", callArgs: `{"text":"bonjour","lang":"en"}`, wantFirst: "bonjour"},
		{name: "whole arguments", callArgs: `{"text":"bonjour","lang":"en"}`, wantFirst: `{"lang":"en","text":"bonjour"}`, wantJSON: true},
		{name: "invalid", property: "text", callArgs: `{"text":"bonjour","lang":"fr"}`},
		{name: "missing", property: "text", callArgs: `{"lang":"en"}`},
	}
	backends(t, func(t *testing.T, st treeStore) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				f := moreTree(t, st)
				f.prompt(&agent.Prompt{Name: "translate", ExposeAsTool: true, Args: args})
				tm := f.ms.add("translate", model.Response{Text: "hello"})
				lead := f.agent(&agent.Agent{Name: "lead", Prompt: &agent.Prompt{Name: "lead",
					Subprompts: []agent.Subprompt{{Name: "translate", InitUserMessageProperty: c.property}}}})
				lm := f.ms.add("lead", model.Response{ToolCalls: calls(call("c1", "translate", c.callArgs))}, model.Response{Text: "lead done"})
				th := f.root(t, lead)
				if out := run(t, f, th, lead, "go"); out.Text != "lead done" {
					t.Fatalf("outcome %+v", out)
				}
				// The tool is offered with the prompt's own schema.
				rt, ok := lm.requests()[0].Tools.Lookup("translate")
				if !ok {
					t.Fatalf("translate not offered: %v", offered(lm.requests()[0]))
				}
				if p, _ := json.Marshal(rt.Parameters); !strings.Contains(string(p), `"lang"`) || strings.Contains(string(p), `"message"`) {
					t.Fatalf("translate offered with parameters %s, want the prompt's own", p)
				}
				r := resultOf(t, th, "c1")
				if c.wantFirst == "" {
					wantCode(t, r, quiver.CodeInvalidArguments)
					if n := len(tm.requests()); n != 0 {
						t.Fatalf("the flow's model was asked %d times for refused arguments", n)
					}
					return
				}
				if r.IsError() || r.Text != "hello" {
					t.Fatalf("result %+v", r)
				}
				first := tm.requests()[0].Messages[0]
				if first.Role != model.RoleUser {
					t.Fatalf("first message %+v", first)
				}
				if c.wantJSON {
					var got, want any
					if json.Unmarshal([]byte(first.Text), &got) != nil || json.Unmarshal([]byte(c.wantFirst), &want) != nil || !reflect.DeepEqual(got, want) {
						t.Fatalf("first message %q, want %s", first.Text, c.wantFirst)
					}
				} else if first.Text != c.wantFirst {
					t.Fatalf("first message %q, want %q", first.Text, c.wantFirst)
				}
			})
		}
	})
}

var attachmentLine = regexp.MustCompile(`(?m)^- (/attachments/\S+) \(`)

// Q2, R6, R7: init_attachments_property hands files of the caller's /attachments/ to the flow:
// each is copied into the flow's thread, and its message names the copy. Anything else (another
// directory, "..", a relative path, a file that does not exist) is an error result, the flow
// never starts and the lead's run goes on.
func TestPromptToolAttachments(t *testing.T) {
	cases := []struct {
		name  string
		paths string
		ok    bool
	}{
		{name: "attachment", paths: `["/attachments/report.txt"]`, ok: true},
		{name: "outside attachments", paths: `["/notes/plan.txt"]`},
		{name: "dot dot", paths: `["/attachments/../notes/plan.txt"]`},
		{name: "dot", paths: `["/attachments/./report.txt"]`},
		{name: "relative", paths: `["attachments/report.txt"]`},
		{name: "directory itself", paths: `["/attachments/"]`},
		{name: "missing file", paths: `["/attachments/missing.txt"]`},
		{name: "one bad among good", paths: `["/attachments/report.txt","/notes/plan.txt"]`},
	}
	backends(t, func(t *testing.T, st treeStore) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				f := moreTree(t, st)
				f.prompt(&agent.Prompt{Name: "viewer", ExposeAsTool: true})
				vm := f.ms.add("viewer", model.Response{Text: "seen it"})
				lead := f.agent(&agent.Agent{Name: "lead", Prompt: &agent.Prompt{Name: "lead",
					Subprompts: []agent.Subprompt{{Name: "viewer", InitAttachmentsProperty: "files"}}}})
				f.ms.add("lead", model.Response{ToolCalls: calls(call("c1", "viewer", `{"message":"summarize the file","files":`+c.paths+`}`))},
					model.Response{Text: "lead done"})
				th := f.root(t, lead)
				if _, err := th.Files().Write(ctx, "/attachments/report.txt", []byte("quarterly numbers"), store.FileMeta{MimeType: "text/plain"}); err != nil {
					t.Fatal(err)
				}
				if _, err := th.Files().Write(ctx, "/notes/plan.txt", []byte("private plan"), store.FileMeta{MimeType: "text/plain"}); err != nil {
					t.Fatal(err)
				}
				if out := run(t, f, th, lead, "go"); out.Text != "lead done" {
					t.Fatalf("outcome %+v: the run goes on", out)
				}
				r := resultOf(t, th, "c1")
				if !c.ok {
					if !r.IsError() {
						t.Fatalf("result %+v: want an error", r)
					}
					if n := len(vm.requests()); n != 0 {
						t.Fatalf("the flow's model was asked %d times", n)
					}
					for _, req := range f.ms.requests() {
						if strings.Contains(everything(t, req), "private plan") {
							t.Fatal("a file outside /attachments/ reached a model")
						}
					}
					return
				}
				if r.IsError() || !strings.Contains(r.Text, "seen it") {
					t.Fatalf("result %+v", r)
				}
				flow := onlyKid(t, th)
				hist := history(t, flow)
				if len(hist) == 0 || hist[0].Role != store.RoleUser {
					t.Fatalf("flow history %s", dump(hist))
				}
				first := hist[0].Content
				m := attachmentLine.FindAllStringSubmatch(first, -1)
				if !strings.HasPrefix(first, "summarize the file") || len(m) != 1 {
					t.Fatalf("first message %q: want the message and one attachment line", first)
				}
				data, fi, err := flow.Files().Read(ctx, m[0][1])
				if err != nil || string(data) != "quarterly numbers" || fi.MimeType != "text/plain" {
					t.Fatalf("the named path %s in the flow's thread: %q %+v %v", m[0][1], data, fi, err)
				}
				if got := vm.requests()[0].Messages[0].Text; got != first {
					t.Fatalf("the flow's model read %q, want %q", got, first)
				}
				// The copy is the flow's own: changing it leaves the caller's file as it was.
				if _, err := flow.Files().Write(ctx, m[0][1], []byte("changed"), store.FileMeta{}); err != nil {
					t.Fatal(err)
				}
				if data, _, err := th.Files().Read(ctx, "/attachments/report.txt"); err != nil || string(data) != "quarterly numbers" {
					t.Fatalf("the caller's file: %q %v", data, err)
				}
			})
		}
	})
}

// R5, R7: what a sub-agent's tools attach comes back to the caller as files of the caller's
// own thread: in a blocking call's result, and in a non-blocking child's delivered message.
func TestSubagentResultAttachments(t *testing.T) {
	png, _ := base64.StdEncoding.DecodeString("iVBORw0KGgo=")
	backends(t, func(t *testing.T, st treeStore) {
		t.Run("blocking", func(t *testing.T) {
			f := moreTree(t, st)
			f.agent(&agent.Agent{Name: "artist", Type: agent.DualAI, ExposeAsTool: true, Prompt: &agent.Prompt{Name: "artist", Tools: []string{"draw"}}})
			f.ms.add("artist", model.Response{ToolCalls: calls(call("d1", "draw", `{}`))}, model.Response{Text: "here is the picture"})
			lead := f.agent(&agent.Agent{Name: "lead", Prompt: &agent.Prompt{Name: "lead", Tools: []string{"draw", "artist"}}})
			f.ms.add("lead", model.Response{ToolCalls: calls(call("c1", "artist", `{"message":"draw a cat"}`))}, model.Response{Text: "nice"})
			th := f.root(t, lead)
			run(t, f, th, lead, "go")
			r := resultOf(t, th, "c1")
			if r.IsError() || r.Text != "here is the picture" || len(r.Attachments) != 1 {
				t.Fatalf("result %+v: want the answer with one attachment", r)
			}
			a := r.Attachments[0]
			if !strings.HasPrefix(a.Path, "/attachments/") || a.MimeType != "image/png" || a.Size != int64(len(png)) {
				t.Fatalf("attachment %+v", a)
			}
			data, _, err := th.Files().Read(ctx, a.Path)
			if err != nil || string(data) != string(png) {
				t.Fatalf("the result's path %s in the parent: %v", a.Path, err)
			}
			// The child has its own file, and the parent's is a copy of it.
			child := onlyKid(t, th)
			cr := resultOf(t, child, "d1")
			if len(cr.Attachments) != 1 {
				t.Fatalf("the child's draw result %+v", cr)
			}
			if data, _, err := child.Files().Read(ctx, cr.Attachments[0].Path); err != nil || string(data) != string(png) {
				t.Fatalf("the child's file: %v", err)
			}
			// Rewrite the child's file: the parent's copy stays the picture.
			if _, err := child.Files().Write(ctx, cr.Attachments[0].Path, []byte("gone"), store.FileMeta{MimeType: "image/png"}); err != nil {
				t.Fatal(err)
			}
			if data, _, _ := th.Files().Read(ctx, a.Path); string(data) != string(png) {
				t.Fatal("the parent's attachment changed with the child's file: not a copy")
			}
		})
		t.Run("non-blocking", func(t *testing.T) {
			f := moreTree(t, st)
			f.agent(&agent.Agent{Name: "artist", Type: agent.DualAI, Prompt: &agent.Prompt{Name: "artist", Tools: []string{"draw"}}})
			release := gate(t, f.ms.add("artist", model.Response{ToolCalls: calls(call("d1", "draw", `{}`))}, model.Response{Text: "here is the picture"}))
			lead := f.agent(&agent.Agent{Name: "lead", Prompt: &agent.Prompt{Name: "lead", Tools: []string{"draw"},
				Subagents: []agent.Subagent{{Name: "artist", Blocking: off()}}}})
			lm := f.ms.add("lead", model.Response{ToolCalls: calls(call("c1", "artist", `{"message":"draw a cat"}`))}, model.Response{Text: "waiting"},
				model.Response{Text: "nice"})
			th := f.root(t, lead)
			run(t, f, th, lead, "go")
			release()
			f.r.Wait()
			ns := notices(t, th)
			if len(ns) != 1 || !strings.Contains(ns[0], "here is the picture") {
				t.Fatalf("notices %q: want the artist's result once", ns)
			}
			m := attachmentLine.FindAllStringSubmatch(ns[0], -1)
			if len(m) != 1 {
				t.Fatalf("notice %q: want one attachment line", ns[0])
			}
			if data, _, err := th.Files().Read(ctx, m[0][1]); err != nil || string(data) != string(png) {
				t.Fatalf("the delivered path %s in the parent: %v", m[0][1], err)
			}
			if reqs := lm.requests(); len(reqs) != 3 || !strings.Contains(everything(t, reqs[2]), m[0][1]) {
				t.Fatalf("the lead was asked %d times; the last request should name the parent's path", len(reqs))
			}
		})
	})
}

// A3, A8: subagent_create starts a resumable child named by a name:<value> tag, blocking until
// its answer; subagent_message (offered once a child exists) runs it again and returns its new
// answer. receives_messages decides the role the parent's message takes in the child.
func TestResumableSubagent(t *testing.T) {
	for _, side := range []string{"", agent.SideA, agent.SideB} {
		name := side
		if name == "" {
			name = "default side"
		}
		t.Run(name, func(t *testing.T) {
			backends(t, func(t *testing.T, st treeStore) {
				f := moreTree(t, st)
				f.agent(&agent.Agent{Name: "helper", Type: agent.DualAI, Prompt: &agent.Prompt{Name: "helper"}})
				// turn index = assistant messages in the request: with side_b the parent's
				// message is one of them.
				hm := f.ms.add("helper", model.Response{Text: "answer one"}, model.Response{Text: "answer two"}, model.Response{Text: "answer two"})
				lead := f.agent(&agent.Agent{Name: "lead", Prompt: &agent.Prompt{Name: "lead",
					Subagents: []agent.Subagent{{Name: "helper", Resumable: &agent.Resumable{ReceivesMessages: side}}}}})
				lm := f.ms.add("lead",
					model.Response{ToolCalls: calls(call("c1", "subagent_create", `{"agent":"helper","name":"alpha","message":"first task"}`))},
					model.Response{ToolCalls: calls(call("c2", "subagent_message", `{"ref":"alpha","message":"second task"}`))},
					model.Response{Text: "lead done"})
				th := f.root(t, lead)
				if out := run(t, f, th, lead, "go"); out.Text != "lead done" {
					t.Fatalf("outcome %+v", out)
				}
				child := onlyKid(t, th)
				r1 := resultOf(t, th, "c1")
				if r1.IsError() || !strings.Contains(r1.Text, "answer one") || !strings.Contains(r1.Text, child.ID()) || !strings.Contains(r1.Text, `"alpha"`) {
					t.Fatalf("create result %+v", r1)
				}
				r2 := resultOf(t, th, "c2")
				if r2.IsError() || !strings.Contains(r2.Text, "answer two") || strings.Contains(r2.Text, "second task") {
					t.Fatalf("message result %+v: want the child's new answer", r2)
				}
				if n := len(hm.requests()); n != 2 {
					t.Fatalf("the child's model was asked %d times, want 2 (once per message)", n)
				}
				info, _ := child.Refresh(ctx)
				if !slices.Contains(info.Tags, "name:alpha") || info.Name() != "alpha" {
					t.Fatalf("child tags %v: want name:alpha", info.Tags)
				}
				reg, err := th.Children(ctx)
				if err != nil {
					t.Fatal(err)
				}
				want := thread.Child{Ref: child.ID(), Name: "alpha", AgentID: "helper", Status: store.StatusIdle, Blocking: true, Resumable: true}
				if len(reg) != 1 || reg[0] != want {
					t.Fatalf("children %+v, want %+v", reg, want)
				}
				role := store.RoleUser
				if side == agent.SideB {
					role = store.RoleAssistant
				}
				hist := history(t, child)
				var roles []store.Role
				for _, m := range hist {
					roles = append(roles, m.Role)
				}
				wantRoles := []store.Role{store.RoleUser, store.RoleAssistant, role, store.RoleAssistant}
				if !reflect.DeepEqual(roles, wantRoles) || hist[0].Content != "first task" || hist[2].Content != "second task" || hist[3].Content != "answer two" {
					t.Fatalf("child history %s: want roles %v", dump(hist), wantRoles)
				}
				// A blocking child's answers come back as results, not as delivered messages.
				if ns := notices(t, th); len(ns) != 0 {
					t.Fatalf("notices %q", ns)
				}
				// subagent_message is offered only once a child exists; create while under the cap.
				reqs := lm.requests()
				if got := offered(reqs[0]); !slices.Contains(got, agent.ToolSubagentCreate) || slices.Contains(got, agent.ToolSubagentMessage) {
					t.Fatalf("first request offered %v: want subagent_create without subagent_message", got)
				}
				if got := offered(reqs[1]); !slices.Contains(got, agent.ToolSubagentCreate) || !slices.Contains(got, agent.ToolSubagentMessage) {
					t.Fatalf("second request offered %v: want both lifecycle tools", got)
				}
				if got := offered(reqs[0]); slices.Contains(got, "helper") {
					t.Fatalf("a resumable sub-agent is not a direct tool: offered %v", got)
				}
			})
		})
	}
}

// A3: maxInstances caps the live children: a create past it is an error naming the cap, and
// subagent_create is no longer offered while the cap is reached.
func TestResumableCap(t *testing.T) {
	backends(t, func(t *testing.T, st treeStore) {
		f := moreTree(t, st)
		f.agent(&agent.Agent{Name: "helper", Type: agent.DualAI, Prompt: &agent.Prompt{Name: "helper"}})
		hm := f.ms.add("helper", model.Response{Text: "hi"})
		lead := f.agent(&agent.Agent{Name: "lead", Prompt: &agent.Prompt{Name: "lead",
			Subagents: []agent.Subagent{{Name: "helper", Resumable: &agent.Resumable{MaxInstances: 1}}}}})
		lm := f.ms.add("lead",
			model.Response{ToolCalls: calls(
				call("c1", "subagent_create", `{"agent":"helper","name":"alpha","message":"a"}`),
				call("c2", "subagent_create", `{"agent":"helper","name":"beta","message":"b"}`))},
			model.Response{ToolCalls: calls(call("c3", "subagent_create", `{"agent":"helper","name":"gamma","message":"c"}`))},
			model.Response{Text: "lead done"})
		th := f.root(t, lead)
		if out := run(t, f, th, lead, "go"); out.Text != "lead done" {
			t.Fatalf("outcome %+v", out)
		}
		if r := resultOf(t, th, "c1"); r.IsError() {
			t.Fatalf("first create %+v", r)
		}
		wantCode(t, resultOf(t, th, "c2"), agent.CodeSpawnRefused, "maxInstances 1")
		// Not offered any more: a call to it is refused like any unknown tool.
		if r := resultOf(t, th, "c3"); !r.IsError() {
			t.Fatalf("create past the cap %+v", r)
		}
		if reg, _ := th.Children(ctx); len(reg) != 1 || reg[0].Name != "alpha" {
			t.Fatalf("children %+v: want alpha alone", reg)
		}
		if n := len(hm.requests()); n != 1 {
			t.Fatalf("the child's model was asked %d times", n)
		}
		reqs := lm.requests()
		if got := offered(reqs[0]); !slices.Contains(got, agent.ToolSubagentCreate) || slices.Contains(got, agent.ToolSubagentMessage) {
			t.Fatalf("first request offered %v", got)
		}
		for _, req := range reqs[1:] {
			if got := offered(req); slices.Contains(got, agent.ToolSubagentCreate) || !slices.Contains(got, agent.ToolSubagentMessage) {
				t.Fatalf("a request at the cap offered %v: want subagent_message without subagent_create", got)
			}
		}
		// A terminated child is not live: its place under the cap is free again, and with no
		// live child subagent_message is not offered.
		alpha := onlyKid(t, th)
		if _, err := alpha.SetStatus(ctx, store.StatusTerminated); err != nil {
			t.Fatal(err)
		}
		lm.script(model.Response{ToolCalls: calls(call("c4", "subagent_create", `{"agent":"helper","name":"delta","message":"d"}`))},
			model.Response{Text: "lead done again"})
		if out := run(t, f, th, lead, "again"); out.Text != "lead done again" {
			t.Fatalf("outcome %+v", out)
		}
		reqs = lm.requests()
		if got := offered(reqs[3]); !slices.Contains(got, agent.ToolSubagentCreate) || slices.Contains(got, agent.ToolSubagentMessage) {
			t.Fatalf("with the only child terminated, the request offered %v", got)
		}
		if r := resultOf(t, th, "c4"); r.IsError() || !strings.Contains(r.Text, `"delta"`) {
			t.Fatalf("create after a termination %+v", r)
		}
		if got := offered(reqs[4]); slices.Contains(got, agent.ToolSubagentCreate) {
			t.Fatalf("at the cap again, the request offered %v", got)
		}
	})
}

// A3, A8: messages to unknown or terminated children are error results (unknown_child) and the
// run goes on; a live child still answers. The registry shows each child's status.
func TestResumableUnknownAndTerminated(t *testing.T) {
	backends(t, func(t *testing.T, st treeStore) {
		f := moreTree(t, st)
		f.agent(&agent.Agent{Name: "helper", Type: agent.DualAI, Prompt: &agent.Prompt{Name: "helper"}})
		hm := f.ms.add("helper", model.Response{Text: "hello"}, model.Response{Text: "hello again"})
		lead := f.agent(&agent.Agent{Name: "lead", Prompt: &agent.Prompt{Name: "lead",
			Subagents: []agent.Subagent{{Name: "helper", Resumable: &agent.Resumable{}}}}})
		lm := f.ms.add("lead",
			model.Response{ToolCalls: calls(
				call("c1", "subagent_create", `{"agent":"helper","name":"alpha","message":"a"}`),
				call("c2", "subagent_create", `{"agent":"helper","name":"beta","message":"b"}`))},
			model.Response{Text: "ok"})
		th := f.root(t, lead)
		run(t, f, th, lead, "go")
		ks := kids(t, th)
		if len(ks) != 2 || ks[0].Name() != "alpha" || ks[1].Name() != "beta" {
			t.Fatalf("children %v", ks)
		}
		alpha, beta := ks[0], ks[1]
		if _, err := alpha.SetStatus(ctx, store.StatusTerminated); err != nil {
			t.Fatal(err)
		}
		lm.script(
			model.Response{ToolCalls: calls(
				call("m1", "subagent_message", fmt.Sprintf(`{"ref":%q,"message":"x"}`, alpha.ID())),
				call("m2", "subagent_message", `{"ref":"thr_nobody","message":"x"}`),
				call("m3", "subagent_message", `{"ref":"alpha","message":"x"}`),
				call("m4", "subagent_message", fmt.Sprintf(`{"ref":%q,"message":"x"}`, th.ID())),
				call("m5", "subagent_message", `{"ref":"beta","message":"again"}`))},
			model.Response{Text: "done"})
		if out := run(t, f, th, lead, "again"); out.Text != "done" {
			t.Fatalf("outcome %+v: the run goes on after the refused messages", out)
		}
		wantCode(t, resultOf(t, th, "m1"), agent.CodeUnknownChild, "terminated", beta.ID())
		wantCode(t, resultOf(t, th, "m2"), agent.CodeUnknownChild, "thr_nobody", beta.ID())
		wantCode(t, resultOf(t, th, "m3"), agent.CodeUnknownChild)
		wantCode(t, resultOf(t, th, "m4"), agent.CodeUnknownChild) // the parent itself is no child
		if r := resultOf(t, th, "m5"); r.IsError() || !strings.Contains(r.Text, "hello again") {
			t.Fatalf("message to beta %+v", r)
		}
		if n := len(hm.requests()); n != 3 {
			t.Fatalf("the children's model was asked %d times, want 3 (two starts, one message)", n)
		}
		if h := history(t, alpha); len(h) != 2 {
			t.Fatalf("the terminated child got messages: %s", dump(h))
		}
		reg, err := th.Children(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := []thread.Child{
			{Ref: alpha.ID(), Name: "alpha", AgentID: "helper", Status: store.StatusTerminated, Blocking: true, Resumable: true},
			{Ref: beta.ID(), Name: "beta", AgentID: "helper", Status: store.StatusIdle, Blocking: true, Resumable: true},
		}
		if !reflect.DeepEqual(reg, want) {
			t.Fatalf("children %+v, want %+v", reg, want)
		}
	})
}

// A2, A4, A8: a non-blocking resumable child answers in the background. Implicit communication
// delivers its result to the parent exactly once (and wakes it); explicit delivers nothing but
// what the child's tools send with NotifyParent. The registry shows it running, then idle.
func TestResumableCommunication(t *testing.T) {
	cases := []struct {
		comm        string
		notify      bool
		wantNotices []string // substrings, one per notice expected, in any order
	}{
		{comm: agent.Implicit, wantNotices: []string{"finished]\nfinal answer"}},
		{comm: "", notify: true, wantNotices: []string{"says]\nprogress: half", "finished]\nfinal answer"}},
		{comm: agent.Explicit},
		{comm: agent.Explicit, notify: true, wantNotices: []string{"says]\nprogress: half"}},
	}
	backends(t, func(t *testing.T, st treeStore) {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s notify=%v", c.comm, c.notify), func(t *testing.T) {
				f := moreTree(t, st)
				if err := f.reg.Register(quiver.Func("tell_parent", "Tells the parent.", func(ctx context.Context, in struct {
					Text string `json:"text"`
				}) (string, error) {
					if err := agent.NotifyParent(ctx, in.Text); err != nil {
						return "", err
					}
					return "sent", nil
				})); err != nil {
					t.Fatal(err)
				}
				var turns []model.Response
				if c.notify {
					turns = append(turns, model.Response{ToolCalls: calls(call("n1", "tell_parent", `{"text":"progress: half"}`))})
				}
				turns = append(turns, model.Response{Text: "final answer"})
				f.agent(&agent.Agent{Name: "helper", Type: agent.DualAI, Prompt: &agent.Prompt{Name: "helper", Tools: []string{"tell_parent"}}})
				hm := f.ms.add("helper", turns...)
				release := gate(t, hm)
				lead := f.agent(&agent.Agent{Name: "lead", Prompt: &agent.Prompt{Name: "lead", Tools: []string{"tell_parent"},
					Subagents: []agent.Subagent{{Name: "helper", Blocking: off(), Resumable: &agent.Resumable{ParentCommunication: c.comm}}}}})
				// The lead may take two notices in one run or in two: either way it answers.
				lm := f.ms.add("lead",
					model.Response{ToolCalls: calls(call("c1", "subagent_create", `{"agent":"helper","name":"h1","message":"work"}`))},
					model.Response{Text: "waiting"}, model.Response{Text: "noted"}, model.Response{Text: "noted"})
				stepped := make(chan string, 8)
				f.r.Subscribe(func(e agent.Event) {
					if e.Type == agent.EventStepStarted {
						select {
						case stepped <- e.ThreadID:
						default:
						}
					}
				})
				th := f.root(t, lead)
				out := run(t, f, th, lead, "go")
				if out.Text != "waiting" {
					t.Fatalf("outcome %+v", out)
				}
				child := onlyKid(t, th)
				var ref struct{ Ref, Name, Status string }
				if r := resultOf(t, th, "c1"); r.IsError() || json.Unmarshal(r.Value, &ref) != nil || ref.Ref != child.ID() || ref.Name != "h1" ||
					ref.Status != "running" {
					t.Fatalf("create result %+v: want a reference to %s", r, child.ID())
				}
				// The child's step has started and waits on the gate: it is running.
				for running := false; !running; {
					select {
					case id := <-stepped:
						running = id == child.ID()
					case <-time.After(time.Minute): // a guard against a hang, not a timing assertion
						t.Fatal("the child never started a step")
					}
				}
				reg, _ := th.Children(ctx)
				want := thread.Child{Ref: child.ID(), Name: "h1", AgentID: "helper", Status: store.StatusRunning, Blocking: false, Resumable: true}
				if len(reg) != 1 || reg[0] != want {
					t.Fatalf("children %+v, want %+v", reg, want)
				}
				release()
				f.r.Wait()
				reg, _ = th.Children(ctx)
				want.Status = store.StatusIdle
				if len(reg) != 1 || reg[0] != want {
					t.Fatalf("children after the run %+v, want %+v", reg, want)
				}
				if h := history(t, child); h[len(h)-1].Content != "final answer" {
					t.Fatalf("child history %s", dump(h))
				}
				ns := notices(t, th)
				if len(ns) != len(c.wantNotices) {
					t.Fatalf("notices %q, want %d", ns, len(c.wantNotices))
				}
				for _, w := range c.wantNotices {
					n := 0
					for _, got := range ns {
						if strings.Contains(got, w) && strings.Contains(got, child.ID()) && strings.Contains(got, `"h1"`) {
							n++
						}
					}
					if n != 1 {
						t.Fatalf("notices %q: %q is there %d times, want once", ns, w, n)
					}
				}
				// Woken by each delivery, the lead read them; with none it was never asked again.
				reqs := lm.requests()
				if len(c.wantNotices) == 0 && len(reqs) != 2 {
					t.Fatalf("the lead was asked %d times with nothing delivered", len(reqs))
				}
				if len(c.wantNotices) > 0 {
					last := everything(t, reqs[len(reqs)-1])
					for _, w := range c.wantNotices {
						if !strings.Contains(last, w) {
							t.Fatalf("the lead's last request does not carry %q", w)
						}
					}
					if h := history(t, th); h[len(h)-1].Content != "noted" {
						t.Fatalf("lead history %s", dump(h))
					}
				}
			})
		}
	})
}

// A4: NotifyParent outside a child thread is an error result, and the run goes on.
func TestNotifyParentOnRoot(t *testing.T) {
	backends(t, func(t *testing.T, st treeStore) {
		f := moreTree(t, st)
		if err := f.reg.Register(quiver.Func("tell_parent", "Tells the parent.", func(ctx context.Context, in struct {
			Text string `json:"text"`
		}) (string, error) {
			return "sent", agent.NotifyParent(ctx, in.Text)
		})); err != nil {
			t.Fatal(err)
		}
		lead := f.agent(&agent.Agent{Name: "lead", Prompt: &agent.Prompt{Name: "lead", Tools: []string{"tell_parent"}}})
		f.ms.add("lead", model.Response{ToolCalls: calls(call("c1", "tell_parent", `{"text":"hi"}`))}, model.Response{Text: "done"})
		th := f.root(t, lead)
		if out := run(t, f, th, lead, "go"); out.Text != "done" {
			t.Fatalf("outcome %+v", out)
		}
		if r := resultOf(t, th, "c1"); !r.IsError() || !strings.Contains(r.Error, "child thread") {
			t.Fatalf("result %+v", r)
		}
	})
}

// A5: an immediate sub-agent starts when the prompt becomes active, before the lead's first
// model step, from the thread's first message; a blocking one has finished by then and its
// result is in the lead's first request. It starts once per thread, and is not a tool.
func TestImmediateSubagent(t *testing.T) {
	for _, blocking := range []bool{true, false} {
		t.Run(fmt.Sprintf("blocking=%v", blocking), func(t *testing.T) {
			backends(t, func(t *testing.T, st treeStore) {
				f := moreTree(t, st)
				f.agent(&agent.Agent{Name: "scout", Type: agent.DualAI, ExposeAsTool: true, Prompt: &agent.Prompt{Name: "scout"}})
				sm := f.ms.add("scout", model.Response{Text: "scout report"})
				release := func() {}
				if !blocking {
					release = gate(t, sm)
				}
				lead := f.agent(&agent.Agent{Name: "lead", Prompt: &agent.Prompt{Name: "lead",
					Subagents: []agent.Subagent{{Name: "scout", Blocking: &blocking, Immediate: &agent.Immediate{Enabled: true}}}}})
				lm := f.ms.add("lead", model.Response{Text: "first answer"}, model.Response{Text: "second answer"},
					model.Response{Text: "third answer"})
				th := f.root(t, lead)
				run(t, f, th, lead, "look around")
				release()
				f.r.Wait()
				child := onlyKid(t, th)
				if h := history(t, child); len(h) != 2 || h[0].Content != "look around" || h[1].Content != "scout report" {
					t.Fatalf("scout history %s: want the thread's first message and its answer", dump(h))
				}
				// Order: the child was spawned (and, blocking, finished) before the lead's first step.
				evs := f.eventList()
				idx := func(match func(agent.Event) bool) int { return slices.IndexFunc(evs, match) }
				started := idx(func(e agent.Event) bool { return e.Type == agent.EventChildStarted && e.ThreadID == th.ID() })
				leadStep := idx(func(e agent.Event) bool { return e.Type == agent.EventStepStarted && e.ThreadID == th.ID() })
				childDone := idx(func(e agent.Event) bool { return e.Type == agent.EventFinished && e.ThreadID == child.ID() })
				if started < 0 || leadStep < 0 || started > leadStep {
					t.Fatalf("child_started at %d, the lead's first step at %d", started, leadStep)
				}
				reqs := lm.requests()
				if got := offered(reqs[0]); slices.Contains(got, "scout") {
					t.Fatalf("an immediate sub-agent is offered as a tool: %v", got)
				}
				if blocking {
					if childDone < 0 || childDone > leadStep {
						t.Fatalf("the blocking child finished at event %d, after the lead's first step at %d", childDone, leadStep)
					}
					if first := everything(t, reqs[0]); !strings.Contains(first, "scout report") || !strings.Contains(first, child.ID()) {
						t.Fatalf("the lead's first request does not carry the scout's result:\n%s", first)
					}
				}
				ns := notices(t, th)
				if len(ns) != 1 || !strings.Contains(ns[0], "scout report") {
					t.Fatalf("notices %q: want the scout's result once", ns)
				}
				// Another run of the lead starts no second scout.
				run(t, f, th, lead, "and now?")
				f.r.Wait()
				if ks := kids(t, th); len(ks) != 1 {
					t.Fatalf("%d children after a second run", len(ks))
				}
				if n := len(sm.requests()); n != 1 {
					t.Fatalf("the scout was asked %d times", n)
				}
			})
		})
	}
}

// A5, V5: the object form of immediate starts one child per group of environment values; each
// child's scopedEnv value is stored on it, runtime-only: its tools read it, while no model
// request ever carries it. The instance names may reach the models.
func TestImmediateGroups(t *testing.T) {
	// The writer column: Runner.Variables set, or nil (the Resolver then stores the values).
	for _, writer := range []bool{true, false} {
		t.Run(fmt.Sprintf("variables=%v", writer), func(t *testing.T) {
			backends(t, func(t *testing.T, st treeStore) {
				f := moreTree(t, st)
				res := f.resolver(t, writer)
				tokens := &runLog{}
				if err := f.reg.Register(quiver.Func("read_token", "Reads this worker's token.", func(ctx context.Context, _ struct{}) (string, error) {
					v, ok := quiver.Var(ctx, "WORKER_TOKEN")
					th, _ := thread.FromContext(ctx)
					tokens.add(fmt.Sprintf("%s=%s/%v", th.ID(), v, ok))
					return "token read", nil
				}, quiver.WithVariables(quiver.Variable{Name: "WORKER_TOKEN", Type: quiver.VarText, Required: true, Scoped: true,
					Description: "The worker's token."}))); err != nil {
					t.Fatal(err)
				}
				f.agent(&agent.Agent{Name: "worker", Type: agent.DualAI, Prompt: &agent.Prompt{Name: "worker", Tools: []string{"read_token"}}})
				wm := f.ms.add("worker", model.Response{ToolCalls: calls(call("r1", "read_token", `{}`))}, model.Response{Text: "worker done"})
				lead := f.agent(&agent.Agent{Name: "lead", Prompt: &agent.Prompt{Name: "lead", Tools: []string{"read_token"},
					Subagents: []agent.Subagent{{Name: "worker", Immediate: &agent.Immediate{Enabled: true, NameEnv: "WORKER_NAMES",
						DescriptionEnv: "WORKER_DESCS", ScopedEnv: []string{"WORKER_TOKEN"}}}}}})
				lm := f.ms.add("lead", model.Response{Text: "lead answer"})
				th := f.root(t, lead)
				secrets := []string{"tok-north-7f3a", "tok-south-9b2c"}
				setVar(t, res, th, "WORKER_NAMES", `["north","south"]`, false)
				setVar(t, res, th, "WORKER_DESCS", `["Covers the north.","Covers the south."]`, false)
				setVar(t, res, th, "WORKER_TOKEN", `["tok-north-7f3a","tok-south-9b2c"]`, false)
				if out := run(t, f, th, lead, "go"); out.Text != "lead answer" {
					t.Fatalf("outcome %+v", out)
				}
				f.r.Wait()
				ks := kids(t, th)
				if len(ks) != 2 || ks[0].Name() != "north" || ks[1].Name() != "south" {
					t.Fatalf("children %d: want north and south", len(ks))
				}
				var want []string
				for i, k := range ks {
					want = append(want, fmt.Sprintf("%s=%s/true", k.ID(), secrets[i]))
					h := history(t, k)
					desc := []string{"Covers the north.", "Covers the south."}[i]
					if len(h) == 0 || h[0].Content != "You are "+k.Name()+". "+desc+"\n\ngo" {
						t.Fatalf("child %s history %s", k.Name(), dump(h))
					}
					if h[len(h)-1].Content != "worker done" {
						t.Fatalf("child %s did not finish: %s", k.Name(), dump(h))
					}
				}
				got := tokens.list()
				slices.Sort(got)
				slices.Sort(want)
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("the tools read %v, want %v", got, want)
				}
				// Both results reached the lead before its first step.
				if first := everything(t, lm.requests()[0]); strings.Count(first, "worker done") != 2 {
					t.Fatalf("the lead's first request:\n%s", first)
				}
				// No model ever saw a scoped value; the names did reach the workers.
				reqs := f.ms.requests()
				if len(reqs) != 1+2*2 {
					t.Fatalf("%d model requests, want 5", len(reqs))
				}
				for _, req := range reqs {
					all := everything(t, req)
					for _, s := range append(secrets, "tok-") {
						if strings.Contains(all, s) {
							t.Fatalf("a model request carries the scoped value %q:\n%s", s, all)
						}
					}
				}
				if w := everything(t, wm.requests()[0]); !strings.Contains(w, "You are north") && !strings.Contains(w, "You are south") {
					t.Fatalf("a worker's request does not name it:\n%s", w)
				}
			})
		})
	}
}

// A6: optional: FLAG enables a sub-agent (direct or resumable) only when the flag resolves to
// true, 1 or yes in any case; otherwise it is not offered and a call to it is refused.
func TestOptionalSubagent(t *testing.T) {
	values := []struct {
		value string
		set   bool
		on    bool
	}{
		{"YES", true, true}, {"yes", true, true}, {"1", true, true}, {"true", true, true}, {"True", true, true}, {" yes ", true, true},
		{"no", true, false}, {"0", true, false}, {"false", true, false}, {"yess", true, false}, {"", true, false}, {"", false, false},
	}
	backends(t, func(t *testing.T, st treeStore) {
		for _, resumable := range []bool{false, true} {
			for _, v := range values {
				t.Run(fmt.Sprintf("resumable=%v/%q set=%v", resumable, v.value, v.set), func(t *testing.T) {
					f := moreTree(t, st)
					res := f.resolver(t, true)
					f.agent(&agent.Agent{Name: "helper", Type: agent.DualAI, Prompt: &agent.Prompt{Name: "helper"}})
					hm := f.ms.add("helper", model.Response{Text: "helper says hi"})
					sa := agent.Subagent{Name: "helper", Optional: "HELPER_ON"}
					tool, args := "helper", `{"message":"hi"}`
					if resumable {
						sa.Resumable = &agent.Resumable{}
						tool, args = agent.ToolSubagentCreate, `{"agent":"helper","name":"h","message":"hi"}`
					}
					lead := f.agent(&agent.Agent{Name: "lead", Prompt: &agent.Prompt{Name: "lead", Subagents: []agent.Subagent{sa}}})
					lm := f.ms.add("lead", model.Response{ToolCalls: calls(call("c1", tool, args))}, model.Response{Text: "done"})
					th := f.root(t, lead)
					if v.set {
						setVar(t, res, th, "HELPER_ON", v.value, false)
					}
					if out := run(t, f, th, lead, "go"); out.Text != "done" {
						t.Fatalf("outcome %+v", out)
					}
					got := offered(lm.requests()[0])
					if slices.Contains(got, tool) != v.on {
						t.Fatalf("offered %v: %s offered should be %v", got, tool, v.on)
					}
					r := resultOf(t, th, "c1")
					if v.on {
						if r.IsError() || !strings.Contains(r.Text, "helper says hi") {
							t.Fatalf("result %+v", r)
						}
						return
					}
					if !r.IsError() {
						t.Fatalf("a call to a disabled sub-agent ran: %+v", r)
					}
					if n := len(hm.requests()); n != 0 {
						t.Fatalf("the disabled sub-agent's model was asked %d times", n)
					}
					if ks := kids(t, th); len(ks) != 0 {
						t.Fatalf("a disabled sub-agent got a thread")
					}
				})
			}
		}
	})
}

// A6: subagent_create refuses a disabled sub-agent even while it is offered for another one.
func TestOptionalResumableAmongEnabled(t *testing.T) {
	backends(t, func(t *testing.T, st treeStore) {
		f := moreTree(t, st)
		res := f.resolver(t, true)
		f.agent(&agent.Agent{Name: "helper", Type: agent.DualAI, Prompt: &agent.Prompt{Name: "helper"}})
		hm := f.ms.add("helper", model.Response{Text: "helper says hi"})
		f.agent(&agent.Agent{Name: "other", Type: agent.DualAI, Prompt: &agent.Prompt{Name: "other"}})
		f.ms.add("other", model.Response{Text: "other says hi"})
		lead := f.agent(&agent.Agent{Name: "lead", Prompt: &agent.Prompt{Name: "lead", Subagents: []agent.Subagent{
			{Name: "helper", Optional: "HELPER_ON", Resumable: &agent.Resumable{}},
			{Name: "other", Resumable: &agent.Resumable{}}}}})
		lm := f.ms.add("lead", model.Response{ToolCalls: calls(
			call("c1", agent.ToolSubagentCreate, `{"agent":"helper","name":"h","message":"hi"}`),
			call("c2", agent.ToolSubagentCreate, `{"agent":"other","name":"o","message":"hi"}`))},
			model.Response{Text: "done"})
		th := f.root(t, lead)
		setVar(t, res, th, "HELPER_ON", "no", false)
		if out := run(t, f, th, lead, "go"); out.Text != "done" {
			t.Fatalf("outcome %+v", out)
		}
		if got := offered(lm.requests()[0]); !slices.Contains(got, agent.ToolSubagentCreate) {
			t.Fatalf("offered %v", got)
		}
		wantCode(t, resultOf(t, th, "c1"), agent.CodeSpawnRefused, "helper", "[other]")
		if r := resultOf(t, th, "c2"); r.IsError() || !strings.Contains(r.Text, "other says hi") {
			t.Fatalf("create other %+v", r)
		}
		if n := len(hm.requests()); n != 0 {
			t.Fatalf("the disabled sub-agent's model was asked %d times", n)
		}
		if ks := kids(t, th); len(ks) != 1 || ks[0].Name() != "o" {
			t.Fatalf("children %v", ks)
		}
	})
}

// A7: subagent_create of a child whose required scoped variable is missing answers with the
// structured error subagent_env_required; the request shows what is missing, and once the
// value is stored StartDeferred boots the child, whose result is queued to the parent.
func TestDeferredSubagent(t *testing.T) {
	backends(t, func(t *testing.T, st treeStore) {
		f := moreTree(t, st)
		f.r.VariablesRequestURL = func(parent, request string) string { return "/v1/threads/" + parent + "/variables/" + request }
		res := f.resolver(t, true)
		f.agent(&agent.Agent{Name: "repo_bot", Type: agent.DualAI, Prompt: &agent.Prompt{Name: "repo_bot",
			Variables: quiver.Variables{{Name: "REPO_TOKEN", Type: quiver.VarText, Required: true, Scoped: true, Description: "A token."}}}})
		bm := f.ms.add("repo_bot", model.Response{Text: "the repo is fine"})
		lead := f.agent(&agent.Agent{Name: "lead", Prompt: &agent.Prompt{Name: "lead",
			Subagents: []agent.Subagent{{Name: "repo_bot", Resumable: &agent.Resumable{}}}}})
		lm := f.ms.add("lead",
			model.Response{ToolCalls: calls(call("c1", "subagent_create", `{"agent":"repo_bot","name":"rb","message":"check the repo"}`))},
			model.Response{ToolCalls: calls(call("c2", "subagent_message", `{"ref":"rb","message":"hurry"}`))},
			model.Response{Text: "waiting for the token"},
			model.Response{Text: "thanks"})
		th := f.root(t, lead)
		// The lead's thread has the variable, but not scoped: a scoped name is not inherited.
		setVar(t, res, th, "REPO_TOKEN", "lead-token", false)
		if out := run(t, f, th, lead, "go"); out.Text != "waiting for the token" {
			t.Fatalf("outcome %+v", out)
		}
		r := resultOf(t, th, "c1")
		wantCode(t, r, agent.CodeSubagentEnvRequired, "REPO_TOKEN")
		var v struct {
			RequestID string   `json:"request_id"`
			Endpoint  string   `json:"endpoint"`
			Missing   []string `json:"missing"`
		}
		if err := json.Unmarshal(r.Value, &v); err != nil {
			t.Fatalf("value %s: %v", r.Value, err)
		}
		child := onlyKid(t, th)
		if v.RequestID != child.ID() || v.Endpoint != "/v1/threads/"+th.ID()+"/variables/"+v.RequestID || !reflect.DeepEqual(v.Missing, []string{"REPO_TOKEN"}) {
			t.Fatalf("value %+v", v)
		}
		// Messaging it meanwhile says the same.
		wantCode(t, resultOf(t, th, "c2"), agent.CodeSubagentEnvRequired, v.Endpoint)
		if n := len(bm.requests()); n != 0 || len(history(t, child)) != 0 {
			t.Fatalf("the deferred child ran: %d requests", n)
		}
		d, err := f.r.Deferred(ctx, th, v.RequestID)
		if err != nil {
			t.Fatal(err)
		}
		if d.Started || d.Agent != "repo_bot" || d.Name != "rb" || d.ParentID != th.ID() || len(d.Missing) != 1 || d.Missing[0].Name != "REPO_TOKEN" {
			t.Fatalf("deferred %+v", d)
		}
		// Unknown requests: another thread's id, or a request on the wrong parent.
		if _, err := f.r.Deferred(ctx, th, th.ID()); !errors.Is(err, agent.ErrNotDeferred) {
			t.Fatalf("Deferred of a non-child: %v", err)
		}
		if _, err := f.r.Deferred(ctx, child, v.RequestID); !errors.Is(err, agent.ErrNotDeferred) {
			t.Fatalf("Deferred on the wrong parent: %v", err)
		}
		// Without the value, nothing starts.
		missing, err := f.r.StartDeferred(ctx, th, v.RequestID)
		if err != nil || len(missing) != 1 || missing[0].Name != "REPO_TOKEN" {
			t.Fatalf("StartDeferred without the value: %v %v", missing, err)
		}
		f.r.Wait()
		if n := len(bm.requests()); n != 0 {
			t.Fatalf("the child ran without its variable")
		}
		setVar(t, res, child, "REPO_TOKEN", "ghp_child", true)
		if missing, err := f.r.StartDeferred(ctx, th, v.RequestID); err != nil || len(missing) != 0 {
			t.Fatalf("StartDeferred: %v %v", missing, err)
		}
		f.r.Wait()
		h := history(t, child)
		if len(h) != 2 || h[0].Role != store.RoleUser || h[0].Content != "check the repo" || h[1].Content != "the repo is fine" {
			t.Fatalf("child history %s", dump(h))
		}
		if d, err := f.r.Deferred(ctx, th, v.RequestID); err != nil || !d.Started || len(d.Missing) != 0 {
			t.Fatalf("deferred after the start %+v %v", d, err)
		}
		// Starting it again does nothing.
		if missing, err := f.r.StartDeferred(ctx, th, v.RequestID); err != nil || len(missing) != 0 {
			t.Fatalf("StartDeferred again: %v %v", missing, err)
		}
		f.r.Wait()
		if n := len(bm.requests()); n != 1 {
			t.Fatalf("the child's model was asked %d times, want 1", n)
		}
		ns := notices(t, th)
		if len(ns) != 1 || !strings.Contains(ns[0], "the repo is fine") || !strings.Contains(ns[0], child.ID()) {
			t.Fatalf("notices %q: want the child's result once", ns)
		}
		if h := history(t, th); h[len(h)-1].Content != "thanks" || len(lm.requests()) != 4 {
			t.Fatalf("the woken lead: %s", dump(h))
		}
		for _, req := range f.ms.requests() {
			if all := everything(t, req); strings.Contains(all, "ghp_child") || strings.Contains(all, "lead-token") {
				t.Fatal("a variable value reached a model")
			}
		}
	})
}

// P2: a child calls only what its own policy and its parent's both permit: a tool the parent
// lacks is neither offered to the child nor run when the child calls it (policy_denied), for a
// sub-agent and for a prompt tool's flow alike.
func TestChildPolicyCeiling(t *testing.T) {
	for _, kind := range []string{"subagent", "prompt"} {
		t.Run(kind, func(t *testing.T) {
			backends(t, func(t *testing.T, st treeStore) {
				f := moreTree(t, st)
				p := &agent.Prompt{Name: "snoop", Tools: []string{"echo", "secret_tool"}}
				if kind == "subagent" {
					f.agent(&agent.Agent{Name: "snoop", Type: agent.DualAI, ExposeAsTool: true, Prompt: p})
				} else {
					p.ExposeAsTool = true
					f.prompt(p)
				}
				sm := f.ms.add("snoop", model.Response{ToolCalls: calls(call("s1", "secret_tool", `{}`), call("s2", "echo", `{"text":"ok"}`))},
					model.Response{Text: "tried"})
				lead := f.agent(&agent.Agent{Name: "lead", Prompt: &agent.Prompt{Name: "lead", Tools: []string{"echo", "snoop"}}})
				f.ms.add("lead", model.Response{ToolCalls: calls(call("c1", "snoop", `{"message":"look"}`))}, model.Response{Text: "lead done"})
				th := f.root(t, lead)
				if out := run(t, f, th, lead, "go"); out.Text != "lead done" {
					t.Fatalf("outcome %+v", out)
				}
				if got := offered(sm.requests()[0]); !reflect.DeepEqual(got, []string{"echo"}) {
					t.Fatalf("the child was offered %v, want [echo]", got)
				}
				child := onlyKid(t, th)
				wantCode(t, resultOf(t, child, "s1"), quiver.CodePolicyDenied, "secret_tool")
				if r := resultOf(t, child, "s2"); r.IsError() {
					t.Fatalf("echo in the child %+v", r)
				}
				if slices.Contains(f.ran.list(), "secret_tool") {
					t.Fatal("secret_tool ran in the child")
				}
				r := resultOf(t, th, "c1")
				if kind == "subagent" && (r.IsError() || r.Text != "tried") {
					t.Fatalf("sub-agent result %+v", r)
				}
				if kind == "prompt" && (!r.IsError() || !strings.Contains(r.Error, "secret_tool failed")) {
					t.Fatalf("prompt tool result %+v: want an error listing the denied call", r)
				}
			})
		})
	}
}

// P2: an agent that calls itself as a sub-agent recurses until the runner's MaxDepth; the spawn
// past it is an error result (spawn_refused) naming the chain, and every level's run goes on.
func TestSpawnDepthLimit(t *testing.T) {
	backends(t, func(t *testing.T, st treeStore) {
		f := moreTree(t, st)
		f.r.MaxDepth = 3
		f.agent(&agent.Agent{Name: "recur", Type: agent.DualAI, ExposeAsTool: true, Prompt: &agent.Prompt{Name: "recur", Tools: []string{"recur"}}})
		rm := f.ms.add("recur", model.Response{ToolCalls: calls(call("r1", "recur", `{"message":"deeper"}`))}, model.Response{Text: "unwound"})
		lead := f.agent(&agent.Agent{Name: "lead", Prompt: &agent.Prompt{Name: "lead", Tools: []string{"recur"}}})
		f.ms.add("lead", model.Response{ToolCalls: calls(call("c1", "recur", `{"message":"go deep"}`))}, model.Response{Text: "lead done"})
		th := f.root(t, lead)
		if out := run(t, f, th, lead, "go"); out.Text != "lead done" {
			t.Fatalf("outcome %+v", out)
		}
		if r := resultOf(t, th, "c1"); r.IsError() || r.Text != "unwound" {
			t.Fatalf("lead's result %+v", r)
		}
		// Walk down: three levels of recur, the last one refused its spawn.
		cur, depth := th, 0
		for {
			ks := kids(t, cur)
			if len(ks) == 0 {
				break
			}
			if len(ks) != 1 {
				t.Fatalf("thread %s has %d children", cur.ID(), len(ks))
			}
			cur = ks[0]
			depth++
			if st := agent.ReadState(ptrTo(cur.Info())); st.Spawn == nil || len(st.Spawn.Path) != depth+1 {
				t.Fatalf("level %d spawn %+v", depth, st.Spawn)
			}
		}
		if depth != 3 {
			t.Fatalf("the tree is %d deep, want 3", depth)
		}
		wantCode(t, resultOf(t, cur, "r1"), agent.CodeSpawnRefused, "lead > recur > recur > recur > recur", "limit is 3")
		if h := history(t, cur); h[len(h)-1].Content != "unwound" {
			t.Fatalf("the deepest run did not go on: %s", dump(h))
		}
		if n := len(rm.requests()); n != 6 {
			t.Fatalf("recur was asked %d times, want 6 (two per level)", n)
		}
	})
}

// failingStore fails the first write of the result of one call on one thread: a crash after a
// nested call's work, before its result was recorded.
type failingStore struct {
	treeStore
	mu     sync.Mutex
	thread string
	callID string
	failed bool
}

var errInjected = errors.New("injected: the database went away")

func (s *failingStore) Append(ctx context.Context, workspaceID, threadID string, msgs ...*store.Message) error {
	s.mu.Lock()
	for _, m := range msgs {
		if !s.failed && threadID == s.thread && m.Role == store.RoleTool && m.ToolCallID == s.callID {
			s.failed = true
			s.mu.Unlock()
			return errInjected
		}
	}
	s.mu.Unlock()
	return s.treeStore.Append(ctx, workspaceID, threadID, msgs...)
}

// X2: a nested call whose child finished but whose result was not recorded is dispatched again
// on Resume: the child is found by its call, not run again, and its answer becomes the result.
func TestNestedCallExactlyOnce(t *testing.T) {
	cases := []struct {
		kind  string
		tool  string
		args  string
		asked int // requests the child's model gets in all
	}{
		{kind: "subagent", tool: "helper", args: `{"message":"work"}`, asked: 2},
		{kind: "prompt", tool: "inner", args: `{"message":"work"}`, asked: 2},
		{kind: "resumable", tool: agent.ToolSubagentCreate, args: `{"agent":"helper","name":"h","message":"work"}`, asked: 2},
		// subagent_message to the child that c0 created: the message reaches it once, and
		// it answers once.
		{kind: "message", tool: agent.ToolSubagentMessage, args: `{"ref":"h","message":"more"}`, asked: 3},
	}
	backends(t, func(t *testing.T, st treeStore) {
		for _, c := range cases {
			t.Run(c.kind, func(t *testing.T) {
				fs := &failingStore{treeStore: st, callID: "c1"}
				f := moreTree(t, fs)
				f.agent(&agent.Agent{Name: "helper", Type: agent.DualAI, ExposeAsTool: true, Prompt: &agent.Prompt{Name: "helper", Tools: []string{"echo"}}})
				f.prompt(&agent.Prompt{Name: "inner", ExposeAsTool: true, Tools: []string{"echo"}})
				turns := []model.Response{{ToolCalls: calls(call("e1", "echo", `{"text":"once"}`))}, {Text: "child answer"}}
				im := f.ms.add("inner", turns...)
				if c.kind == "message" {
					turns[1].Text = "first answer"
					turns = append(turns, model.Response{Text: "child answer"})
				}
				hm := f.ms.add("helper", turns...)
				p := &agent.Prompt{Name: "lead", Tools: []string{"echo"}}
				switch c.kind {
				case "subagent":
					p.Tools = append(p.Tools, "helper")
				case "prompt":
					p.Tools = append(p.Tools, "inner")
				case "resumable", "message":
					p.Subagents = []agent.Subagent{{Name: "helper", Resumable: &agent.Resumable{}}}
				}
				lead := f.agent(&agent.Agent{Name: "lead", Prompt: p})
				var leadTurns []model.Response
				if c.kind == "message" {
					leadTurns = append(leadTurns, model.Response{ToolCalls: calls(call("c0", agent.ToolSubagentCreate,
						`{"agent":"helper","name":"h","message":"work"}`))})
				}
				leadTurns = append(leadTurns, model.Response{ToolCalls: calls(call("c1", c.tool, c.args))}, model.Response{Text: "lead done"})
				f.ms.add("lead", leadTurns...)
				th := f.root(t, lead)
				fs.mu.Lock()
				fs.thread = th.ID()
				fs.mu.Unlock()
				if _, err := f.r.Run(ctx, th, lead, "go"); !errors.Is(err, errInjected) {
					t.Fatalf("run: %v, want the injected failure", err)
				}
				if pending, _ := th.Pending(ctx); len(pending) != 1 || pending[0].ID != "c1" {
					t.Fatalf("pending %+v: want c1 unanswered", pending)
				}
				out, err := f.r.Resume(ctx, th, lead)
				if err != nil || out.Text != "lead done" {
					t.Fatalf("resume: %+v %v", out, err)
				}
				f.r.Wait()
				m := hm
				if c.kind == "prompt" {
					m = im
				}
				if n := len(m.requests()); n != c.asked {
					t.Fatalf("the child's model was asked %d times, want %d", n, c.asked)
				}
				if c.kind == "message" {
					var mine int
					for _, msg := range history(t, onlyKid(t, th)) {
						if msg.Content == "more" {
							mine++
						}
					}
					if mine != 1 {
						t.Fatalf("the message reached the child %d times", mine)
					}
				}
				if got := f.ran.list(); len(got) != 1 {
					t.Fatalf("the child's echo ran %v, want once", got)
				}
				if ks := kids(t, th); len(ks) != 1 {
					t.Fatalf("%d children, want 1", len(ks))
				}
				r := resultOf(t, th, "c1")
				if r.IsError() || !strings.Contains(r.Text, "child answer") {
					t.Fatalf("result %+v", r)
				}
				n := 0
				for _, m := range history(t, th) {
					if m.Role == store.RoleTool && m.ToolCallID == "c1" {
						n++
					}
				}
				if n != 1 || len(notices(t, th)) != 0 {
					t.Fatalf("c1 has %d results, notices %q", n, notices(t, th))
				}
			})
		}
	})
}
