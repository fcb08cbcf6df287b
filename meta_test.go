package quiver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/internal/backendtest"
	"github.com/quiverhq/quiver/schema"
	"github.com/quiverhq/quiver/thread"
)

// stateFixture is a thread on a real store and a dispatcher recording on it, with tools that
// enable the stateful meta-fields and report the arguments their handler received.
type stateFixture struct {
	th   *thread.Thread
	d    *quiver.Dispatcher
	mu   sync.Mutex
	seen []string // the raw arguments each handler call received
}

func newStateFixture(t *testing.T, st backendtest.Store, dispatcherFields ...string) *stateFixture {
	t.Helper()
	th, err := thread.Create(context.Background(), st, thread.Options{WorkspaceID: "ws_1"})
	if err != nil {
		t.Fatal(err)
	}
	f := &stateFixture{th: th}
	reg := &quiver.Registry{}
	note := func(ctx context.Context, args json.RawMessage) (any, error) {
		f.mu.Lock()
		f.seen = append(f.seen, string(args))
		f.mu.Unlock()
		var in struct{ Text string }
		_ = json.Unmarshal(args, &in)
		return map[string]any{"text": in.Text, "len": len(in.Text)}, nil
	}
	in := &schema.Schema{Type: "object", Properties: map[string]*schema.Schema{"text": {Type: "string"}}, Required: []string{"text"}}
	for _, spec := range []quiver.Spec{
		{Name: "note", Description: "Takes a note.", InputSchema: in, MetaFields: []string{schema.OutputPathField, schema.InstanceField}},
		{Name: "plain", Description: "Takes a note, statelessly.", InputSchema: in},
		{Name: "read_state", Description: "Returns the state the call reads.", MetaFields: []string{schema.InstanceField}},
	} {
		fn := note
		if spec.Name == "read_state" {
			fn = func(ctx context.Context, _ json.RawMessage) (any, error) {
				doc, err := thread.CallState(ctx)
				if err != nil {
					return nil, err
				}
				return json.RawMessage(doc), nil
			}
		}
		tool, err := quiver.NewTool(spec, fn)
		if err != nil {
			t.Fatal(err)
		}
		if err := reg.Register(tool); err != nil {
			t.Fatal(err)
		}
	}
	f.d = &quiver.Dispatcher{Registry: reg, Recorder: th, MetaFields: dispatcherFields}
	return f
}

// call asks for the call in the thread's history and dispatches it, as a run does.
func (f *stateFixture) call(t *testing.T, id, name, args string) *quiver.Result {
	t.Helper()
	ctx := context.Background()
	c := quiver.Call{ID: id, Name: name, Args: json.RawMessage(args)}
	if _, err := f.th.AppendAssistant(ctx, "", []quiver.Call{c}); err != nil {
		t.Fatal(err)
	}
	r, err := f.d.Dispatch(thread.NewContext(ctx, f.th), c)
	if err != nil {
		t.Fatalf("dispatch %s: %v", id, err)
	}
	return r
}

func (f *stateFixture) state(t *testing.T, instance string) string {
	t.Helper()
	doc, err := f.th.State(context.Background(), instance)
	if err != nil {
		t.Fatal(err)
	}
	return string(doc)
}

// _outputPath writes a call's output into its thread's state, once per path; || takes the
// first free path, && all of them; the handler never sees the meta-field; a refused write is
// an error result naming the path, stored in the result's place, with the state unchanged.
func TestOutputPathWritesThreadState(t *testing.T) {
	backendtest.Each(t, func(t *testing.T, st backendtest.Store) {
		f := newStateFixture(t, st)
		steps := []struct {
			id, args  string
			wantError string // a code, "" for success
			wantState string
		}{
			{"c1", `{"text":"a","_outputPath":"/plan/steps"}`, "", `{"plan":{"steps":{"len":1,"text":"a"}}}`},
			{"c2", `{"text":"b","_outputPath":"/plan/steps"}`, "state_conflict", `{"plan":{"steps":{"len":1,"text":"a"}}}`},
			{"c3", `{"text":"c","_outputPath":"/plan/steps || /plan/alt"}`, "", `{"plan":{"alt":{"len":1,"text":"c"},"steps":{"len":1,"text":"a"}}}`},
			{"c4", `{"text":"d","_outputPath":"/x && /y/z"}`, "", `{"plan":{"alt":{"len":1,"text":"c"},"steps":{"len":1,"text":"a"}},"x":{"len":1,"text":"d"},"y":{"z":{"len":1,"text":"d"}}}`},
			// && refuses as a whole when one path is written: /w is not written either.
			{"c5", `{"text":"e","_outputPath":"/w && /x"}`, "state_conflict", ""},
			// A path through a value that is not an object.
			{"c6", `{"text":"f","_outputPath":"/x/text/deeper"}`, "state_conflict", ""},
			// null is no _outputPath: strict dialects fill optional fields with it.
			{"c7", `{"text":"g","_outputPath":null}`, "", ""},
		}
		last := ""
		for _, s := range steps {
			r := f.call(t, s.id, "note", s.args)
			if s.wantError == "" && r.IsError() || s.wantError != "" && string(r.Code) != s.wantError {
				t.Fatalf("%s: result %+v, want error code %q", s.id, r, s.wantError)
			}
			if s.wantState == "" {
				s.wantState = last
			}
			if got := f.state(t, ""); got != s.wantState {
				t.Fatalf("%s: state %s, want %s", s.id, got, s.wantState)
			}
			last = s.wantState
			if r.IsError() && !strings.Contains(r.Error, "/") {
				t.Errorf("%s: the error does not name the path: %s", s.id, r.Error)
			}
		}
		for _, args := range f.seen {
			if strings.Contains(args, "_outputPath") {
				t.Errorf("the handler received the meta-field: %s", args)
			}
		}
		// What is stored is what the caller got: the conflict, as the call's one result.
		hist, err := f.th.History(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var conflicts int
		for _, m := range hist {
			if m.Role == "tool" && m.Result != nil && m.Result.Code == string(quiver.CodeStateConflict) {
				conflicts++
				if !strings.Contains(m.Result.Error, "was not kept") || !strings.Contains(m.Result.Error, `"text"`) {
					t.Errorf("a refused write's result does not say so or lacks the output: %s", m.Result.Error)
				}
			}
		}
		if conflicts != 3 {
			t.Errorf("%d conflict results stored, want 3", conflicts)
		}
	})
}

// Bad meta-fields are refused before the tool runs, with an error the model can act on.
func TestBadMetaFieldsAreRefusedBeforeTheToolRuns(t *testing.T) {
	backendtest.Each(t, func(t *testing.T, st backendtest.Store) {
		f := newStateFixture(t, st)
		if err := f.th.AddInstances(context.Background(), "a", "b"); err != nil {
			t.Fatal(err)
		}
		for i, c := range []struct{ tool, args, want string }{
			{"note", `{"text":"x","_outputPath":"plan"}`, "must start with /"},
			{"note", `{"text":"x","_outputPath":"/a//b"}`, "segment 2 is empty"},
			{"note", `{"text":"x","_outputPath":"/a~2"}`, "~ must be followed by 0"},
			{"note", `{"text":"x","_outputPath":"/a || /b && /c"}`, "mixes || and &&"},
			{"note", `{"text":"x","_outputPath":" "}`, "names the whole state"},
			{"note", `{"text":"x","_outputPath":"/a\u0000b"}`, "control character"},
			{"note", `{"text":"x","_outputPath":"/a && /a/b"}`, "overlaps"},
			{"note", `{"text":"x","_outputPath":42}`, "must be a string"},
			{"note", `{"text":"x","_outputPath":"/" ` + `}`, "segment 1 is empty"},
			{"note", `{"text":"x","_instance":"c"}`, `unknown instance "c"; the instances are: a, b`},
			{"note", `{"text":"x","_instance":7}`, "non-empty string"},
			{"plain", `{"text":"x","_outputPath":"/p"}`, "does not accept _outputPath"},
			{"note", `{"text":"x","_delegate":"summarizer"}`, "does not accept _delegate"},
		} {
			r := f.call(t, fmt.Sprintf("bad%d", i), c.tool, c.args)
			if !r.IsError() || r.Code != quiver.CodeInvalidArguments || !strings.Contains(r.Error, c.want) {
				t.Errorf("%s %s: %+v, want invalid_arguments containing %q", c.tool, c.args, r, c.want)
			}
		}
		if len(f.seen) != 0 {
			t.Errorf("the tool ran for refused calls: %q", f.seen)
		}
		if got := f.state(t, ""); got != "{}" {
			t.Errorf("refused calls wrote state: %s", got)
		}
	})
}

// _instance routes a call's writes and its handler's reads to the instance's state.
func TestInstanceRoutesReadsAndWrites(t *testing.T) {
	backendtest.Each(t, func(t *testing.T, st backendtest.Store) {
		f := newStateFixture(t, st)
		if err := f.th.AddInstances(context.Background(), "a", "b"); err != nil {
			t.Fatal(err)
		}
		f.call(t, "w1", "note", `{"text":"root","_outputPath":"/n"}`)
		f.call(t, "w2", "note", `{"text":"bee","_outputPath":"/n","_instance":"b"}`)
		if got := f.state(t, ""); got != `{"n":{"len":4,"text":"root"}}` {
			t.Errorf("root state %s", got)
		}
		if got := f.state(t, "b"); got != `{"n":{"len":3,"text":"bee"}}` {
			t.Errorf("instance b's state %s", got)
		}
		if got := f.state(t, "a"); got != `{}` {
			t.Errorf("instance a's state %s", got)
		}
		// The same path in another instance is free; in b it is written.
		if r := f.call(t, "w3", "note", `{"text":"b2","_outputPath":"/n","_instance":"b"}`); r.Code != quiver.CodeStateConflict {
			t.Errorf("a second write of b's /n: %+v", r)
		}
		for _, c := range []struct{ args, want string }{
			{`{}`, `{"n":{"len":4,"text":"root"}}`},
			{`{"_instance":"b"}`, `{"n":{"len":3,"text":"bee"}}`},
			{`{"_instance":"a"}`, `{}`},
		} {
			r := f.call(t, "r"+c.args, "read_state", c.args)
			if r.IsError() || string(r.Value) != c.want {
				t.Errorf("read_state %s: %+v, want %s", c.args, r, c.want)
			}
		}
	})
}

// A dispatcher's MetaFields enable meta-fields on every tool (what an agent's meta_fields
// does); without a recorder that keeps state, a call using them is refused before it runs.
func TestMetaFieldsEnabledByTheDispatcher(t *testing.T) {
	backendtest.Each(t, func(t *testing.T, st backendtest.Store) {
		f := newStateFixture(t, st, schema.OutputPathField)
		if r := f.call(t, "p1", "plain", `{"text":"x","_outputPath":"/p"}`); r.IsError() {
			t.Fatalf("plain with the dispatcher's _outputPath: %+v", r)
		}
		if got := f.state(t, ""); got != `{"p":{"len":1,"text":"x"}}` {
			t.Errorf("state %s", got)
		}
		// No recorder: nothing to keep state in.
		d := &quiver.Dispatcher{Registry: f.d.Registry, MetaFields: []string{schema.OutputPathField}}
		r, err := d.Dispatch(context.Background(), quiver.Call{Name: "plain", Args: json.RawMessage(`{"text":"x","_outputPath":"/q"}`)})
		if err != nil || r.Code != quiver.CodeInvalidArguments || !strings.Contains(r.Error, "recorded on a thread") {
			t.Errorf("a call with _outputPath and no recorder: %+v %v", r, err)
		}
		if n := len(f.seen); n != 1 {
			t.Errorf("the tool ran %d times, want once", n)
		}
	})
}

// Two calls racing to write the same paths never both win one: of eight calls writing
// "/slot/a || /slot/b" at once, exactly two succeed, one per path, and the others are refused
// with the state as the winners left it.
func TestOutputPathRace(t *testing.T) {
	backendtest.Each(t, func(t *testing.T, st backendtest.Store) {
		f := newStateFixture(t, st)
		const n = 8
		ctx := context.Background()
		calls := make([]quiver.Call, n)
		for i := range calls {
			calls[i] = quiver.Call{ID: fmt.Sprintf("race%d", i), Name: "note",
				Args: json.RawMessage(fmt.Sprintf(`{"text":"call %d","_outputPath":"/slot/a || /slot/b"}`, i))}
		}
		if _, err := f.th.AppendAssistant(ctx, "", calls); err != nil {
			t.Fatal(err)
		}
		results := make([]*quiver.Result, n)
		var wg sync.WaitGroup
		for i := range calls {
			wg.Go(func() {
				r, err := f.d.Dispatch(thread.NewContext(ctx, f.th), calls[i])
				if err != nil {
					t.Errorf("call %d: %v", i, err)
				}
				results[i] = r
			})
		}
		wg.Wait()
		var won []string
		for i, r := range results {
			switch {
			case r == nil:
			case !r.IsError():
				won = append(won, fmt.Sprintf(`"call %d"`, i))
			case r.Code != quiver.CodeStateConflict:
				t.Errorf("call %d: %+v", i, r)
			}
		}
		if len(won) != 2 {
			t.Fatalf("%d calls won, want 2: %v", len(won), won)
		}
		var doc struct {
			Slot map[string]struct{ Text string }
		}
		if err := json.Unmarshal([]byte(f.state(t, "")), &doc); err != nil {
			t.Fatal(err)
		}
		got := []string{fmt.Sprintf("%q", doc.Slot["a"].Text), fmt.Sprintf("%q", doc.Slot["b"].Text)}
		if !(got[0] == won[0] && got[1] == won[1] || got[0] == won[1] && got[1] == won[0]) {
			t.Errorf("the state holds %v, the winners were %v", got, won)
		}
	})
}

// A person's edit keeps the call's meta-fields unless it names them (null drops one); an edit
// that adds _delegate where nothing can run requests is refused, not a panic; empty values
// are no meta-fields; a result cut to the limit is not written.
func TestEditsAndEdgesOfMetaFields(t *testing.T) {
	backendtest.Each(t, func(t *testing.T, st backendtest.Store) {
		f := newStateFixture(t, st)
		confirmed, err := quiver.NewTool(quiver.Spec{Name: "confirmed", Description: "Needs a yes.", RequiresConfirmation: true,
			InputSchema: &schema.Schema{Type: "object", Properties: map[string]*schema.Schema{"text": {Type: "string"}}},
			MetaFields:  schema.MetaFields}, func(_ context.Context, args json.RawMessage) (any, error) {
			return json.RawMessage(args), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		big, err := quiver.NewTool(quiver.Spec{Name: "big", Description: "Says a lot.", MetaFields: []string{schema.OutputPathField}},
			func(context.Context, json.RawMessage) (any, error) { return strings.Repeat("word ", 400), nil })
		if err != nil {
			t.Fatal(err)
		}
		if err := f.d.Registry.Register(confirmed, big); err != nil {
			t.Fatal(err)
		}
		edits := map[string]string{
			"e1": `{"text":"edited"}`,                      // keeps _outputPath
			"e2": `{"text":"edited","_outputPath":null}`,   // drops it
			"e3": `{"text":"edited","_delegate":"critic"}`, // adds a delegation nothing runs
		}
		f.d = &quiver.Dispatcher{Registry: f.d.Registry, Recorder: f.th, MaxResultBytes: 1000,
			Confirm: func(_ context.Context, c *quiver.Call) (quiver.Decision, error) {
				return quiver.Decision{Action: quiver.Edit, Args: json.RawMessage(edits[c.ID])}, nil
			}}
		if r := f.call(t, "e1", "confirmed", `{"text":"asked","_outputPath":"/e1"}`); r.IsError() {
			t.Fatalf("e1: %+v", r)
		}
		if r := f.call(t, "e2", "confirmed", `{"text":"asked","_outputPath":"/e2"}`); r.IsError() {
			t.Fatalf("e2: %+v", r)
		}
		if r := f.call(t, "e3", "confirmed", `{"text":"asked"}`); r.Code != quiver.CodeInvalidArguments || !strings.Contains(r.Error, "cannot be delegated here") {
			t.Fatalf("e3: %+v", r)
		}
		if got := f.state(t, ""); got != `{"e1":{"text":"edited"}}` {
			t.Errorf("state after the edits: %s", got)
		}
		if r := f.call(t, "b1", "big", `{"_outputPath":"/big"}`); r.Code != quiver.CodeStateConflict || !strings.Contains(r.Error, "cut to fit") {
			t.Errorf("a cut result: %+v", r)
		}
		if r := f.call(t, "n1", "note", `{"text":"x","_outputPath":"","_instance":"","_delegate":{"prompt":null,"tools":[]}}`); r.IsError() {
			t.Errorf("empty meta-fields: %+v", r)
		}
		if got := f.state(t, ""); got != `{"e1":{"text":"edited"}}` {
			t.Errorf("state at the end: %s", got)
		}
	})
}
