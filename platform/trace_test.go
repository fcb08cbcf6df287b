package platform_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/model/scripted"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/store"
)

// metered is a scripted model that takes a little time and reports the tokens a provider
// would: what the agent records on the messages it writes.
type metered struct {
	model.Model
	in, out int64
}

func (m metered) Generate(ctx context.Context, req *model.Request, onDelta func(model.Delta)) (*model.Response, error) {
	time.Sleep(5 * time.Millisecond)
	r, err := m.Model.Generate(ctx, req, onDelta)
	if r != nil {
		r.Usage = model.Usage{InputTokens: m.in, OutputTokens: m.out}
	}
	return r, err
}

// The trace of a scripted run (issue 50): its model requests with their model, tokens and
// durations, its tool calls (one failing), the sub-agent a call spawned, a call approved by a
// person and, while the run waits on it, the approval pending; a thread of another workspace
// is not found.
func TestTraceOfARun(t *testing.T) {
	ctx := context.Background()
	lookup := quiver.Func("lookup", "Looks a word up.", func(context.Context, struct {
		Word string `json:"word"`
	}) (string, error) {
		return "a small fish", nil
	})
	explode := quiver.Func("explode", "Always fails.", func(context.Context, struct{}) (string, error) {
		return "", errors.New("the fuse was wet")
	})
	wipe := quiver.Func("wipe", "Wipes the disk.", func(context.Context, struct{}) (string, error) { return "wiped", nil },
		quiver.WithConfirmation())
	agents := map[string]*agent.Agent{
		"lead": {Name: "lead", Prompt: &agent.Prompt{Name: "lead", Model: "scripted:lead",
			Tools: []string{"lookup", "explode", "wipe"}, Subagents: []agent.Subagent{{Name: "scout"}}}},
		"scout": {Name: "scout", Type: agent.DualAI, Prompt: &agent.Prompt{Name: "scout", Model: "scripted:scout"}},
	}
	open := func(spec string) (model.Model, bool) {
		switch spec {
		case "scripted:lead":
			return metered{scripted.Turns(
				scripted.Turn{Calls: []scripted.Call{{Name: "lookup", Args: map[string]any{"word": "sprat"}}, {Name: "explode", Args: map[string]any{}}}},
				scripted.Turn{Calls: []scripted.Call{{Name: "scout", Args: map[string]any{"message": "Look around."}}}},
				scripted.Turn{Calls: []scripted.Call{{Name: "wipe", Args: map[string]any{}}}},
				scripted.Turn{Text: "Done."}), 120, 30}, true
		case "scripted:scout":
			return metered{scripted.Turns(scripted.Turn{Text: "Nothing here."}), 40, 7}, true
		}
		return nil, false
	}
	p, st := runPlatform(t, filepath.Join(t.TempDir(), "q.db"), []*quiver.Tool{lookup, explode, wipe}, agents, open)
	member := platform.Actor{WorkspaceID: "wsp_local", UserID: "usr_ann", Role: store.KeyRoleMember, KeyID: "key_m"}
	th, err := p.OpenThread(ctx, member, platform.NewThread{Agent: "lead"})
	must(t, err)
	_, err = p.StartRun(ctx, member, th.ID, "lead", "Go.")
	must(t, err)
	out := waitOutcome(t, st, th.ID, agent.RunPaused)

	// Paused on the approval: it is pending, and so is the call it holds.
	tr, err := p.Trace(ctx, member, th.ID)
	must(t, err)
	if tr.Status != platform.StatusWaiting || count(tr, platform.SpanModel) != 3 {
		t.Fatalf("paused trace: status %s, %d model spans; want waiting, 3", tr.Status, count(tr, platform.SpanModel))
	}
	if s := find(tr, platform.SpanApproval, "wipe"); s == nil || s.Status != platform.SpanPending || s.End != nil || s.Parent != out.Pending.Call.ID {
		t.Errorf("the pending approval = %+v, want pending on %s", s, out.Pending.Call.ID)
	}
	if s := find(tr, platform.SpanTool, "wipe"); s == nil || s.Status != platform.SpanPending {
		t.Errorf("the waiting call = %+v, want pending", s)
	}

	_, err = p.Decide(ctx, member, th.ID, platform.NewDecision{CallID: out.Pending.Call.ID, Action: quiver.Approve})
	must(t, err)
	waitOutcome(t, st, th.ID, agent.RunFinished)
	tr, err = p.Trace(ctx, member, th.ID)
	must(t, err)
	checkFinishedTrace(t, tr, th.ID)

	other := platform.Actor{WorkspaceID: "wsp_other", Role: store.KeyRoleMember, KeyID: "key_o"}
	_, err = p.Trace(ctx, other, th.ID)
	refusal(t, "another workspace's thread", err, platform.NotFound, "")
	_, err = p.Trace(ctx, member, "not_a_thread")
	refusal(t, "an id that is no thread's", err, platform.Invalid, "id")
}

// checkFinishedTrace checks the trace of TestTraceOfARun's run once it has finished.
func checkFinishedTrace(t *testing.T, tr *platform.Trace, threadID string) {
	t.Helper()
	if tr.ThreadID != threadID || tr.AgentID != "lead" || tr.Status != platform.StatusIdle || tr.Truncated {
		t.Errorf("trace %s of %s: status %s, truncated %v", tr.ThreadID, tr.AgentID, tr.Status, tr.Truncated)
	}
	if n := count(tr, platform.SpanModel); n != 4 || tr.InputTokens != 4*120 || tr.OutputTokens != 4*30 {
		t.Errorf("%d model spans with %d/%d tokens; want 4 with 480/120", n, tr.InputTokens, tr.OutputTokens)
	}
	for _, s := range tr.Spans {
		if s.Kind == platform.SpanModel && (s.Name != "scripted:script" || s.DurationMS < 5 || s.End == nil || s.Start.After(*s.End)) {
			t.Errorf("model span %+v: want scripted:script, at least 5ms, ended after it began", s)
		}
		if s.End != nil && (s.Start.Before(tr.Start) || s.End.After(tr.End)) {
			t.Errorf("span %s %s runs %v to %v, outside the trace's %v to %v", s.Kind, s.Name, s.Start, s.End, tr.Start, tr.End)
		}
	}
	for i := 1; i < len(tr.Spans); i++ {
		if tr.Spans[i].Start.Before(tr.Spans[i-1].Start) {
			t.Errorf("span %d begins before span %d", i, i-1)
		}
	}
	if s := find(tr, platform.SpanTool, "lookup"); s == nil || s.Status != platform.SpanOK || s.CallID == "" || s.End == nil {
		t.Errorf("lookup = %+v, want an ended ok call", s)
	}
	if s := find(tr, platform.SpanTool, "explode"); s == nil || s.Status != platform.SpanError || s.Error == "" || s.ErrorCode == "" {
		t.Errorf("explode = %+v, want an error with its code and words", s)
	}
	if s := find(tr, platform.SpanApproval, "wipe"); s == nil || s.Status != platform.SpanOK || s.Decision != "approve" || s.End == nil {
		t.Errorf("the approval = %+v, want an approve that ended", s)
	}
	call := find(tr, platform.SpanTool, "scout")
	sub := find(tr, platform.SpanSubagent, "scout")
	if call == nil || sub == nil || sub.Parent != call.CallID || sub.ThreadID == "" || sub.ThreadID == threadID || sub.Status != platform.SpanOK {
		t.Errorf("sub-agent %+v of call %+v: want the child's thread, under the call", sub, call)
	}
}

func count(tr *platform.Trace, kind platform.SpanKind) int {
	n := 0
	for _, s := range tr.Spans {
		if s.Kind == kind {
			n++
		}
	}
	return n
}

func find(tr *platform.Trace, kind platform.SpanKind, name string) *platform.Span {
	for _, s := range tr.Spans {
		if s.Kind == kind && s.Name == name {
			return s
		}
	}
	return nil
}

// A trace reads the newest platform.MaxTraceMessages messages of a long thread, and says that
// it left the older ones out.
func TestTraceOfALongThreadIsTruncated(t *testing.T) {
	ctx := context.Background()
	p, st := runPlatform(t, filepath.Join(t.TempDir(), "q.db"), nil, nil, func(string) (model.Model, bool) { return nil, false })
	member := platform.Actor{WorkspaceID: "wsp_local", Role: store.KeyRoleMember, KeyID: "key_m"}
	th, err := p.OpenThread(ctx, member, platform.NewThread{})
	must(t, err)
	total := 0
	for _, tt := range []struct {
		add       int
		truncated bool
	}{{platform.MaxTraceMessages / 2, false}, {platform.MaxTraceMessages / 2, false}, {1, true}} {
		msgs := make([]*store.Message, tt.add)
		for i := range msgs {
			msgs[i] = &store.Message{Role: store.RoleAssistant, Content: "tick",
				Usage: &store.ModelUsage{Model: "scripted:tick", InputTokens: 2, OutputTokens: 1, DurationMS: 1}}
		}
		must(t, st.Append(ctx, "wsp_local", th.ID, msgs...))
		total += tt.add
		tr, err := p.Trace(ctx, member, th.ID)
		must(t, err)
		want := min(total, platform.MaxTraceMessages)
		if tr.Truncated != tt.truncated || len(tr.Spans) != want || tr.InputTokens != int64(2*want) {
			t.Errorf("a thread of %d messages: truncated %v, %d spans, %d input tokens; want %v, %d, %d",
				total, tr.Truncated, len(tr.Spans), tr.InputTokens, tt.truncated, want, 2*want)
		}
	}
}
