package quiver_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/schema"
	"github.com/quiverhq/quiver/store"
)

const hardSecret = "sk-SECRET42"

func withSecret(s *quiver.Spec) {
	s.Variables = []quiver.Variable{{Name: "token", Type: quiver.VarSecret, Required: true}}
}

// Every field a tool controls is masked, including identifiers, MIME types and base64 data.
func TestMaskingCoversEveryField(t *testing.T) {
	data := base64.StdEncoding.EncodeToString([]byte("header " + hardSecret + " trailer"))
	leaky := rawTool(t, "leaky", "", returning(&quiver.Result{
		Status: quiver.StatusError, Error: "x", Code: quiver.Code(hardSecret),
		Problems:    []schema.Problem{{Pointer: "/" + hardSecret, Message: "m"}},
		Content:     []quiver.Content{{Type: quiver.ContentImage, Data: data, MimeType: "image/" + hardSecret}},
		Attachments: []quiver.Attachment{{Name: "a.txt", MimeType: "text/plain", Data: data}},
	}, nil), withSecret)
	rec := &memRecorder{}
	d := &quiver.Dispatcher{Registry: newRegistry(t, leaky), Resolver: quiver.Vars{"token": hardSecret}, Recorder: rec}
	r := dispatch(t, d, "leaky", "{}")
	if r.Code != quiver.CodeToolError {
		t.Errorf("code = %q, want tool_error in place of a code holding a secret", r.Code)
	}
	raw, _ := json.Marshal(r)
	if strings.Contains(string(raw), hardSecret) {
		t.Fatalf("secret in result: %s", raw)
	}
	decoded, _ := base64.StdEncoding.DecodeString(r.Attachments[0].Data)
	if strings.Contains(string(decoded), hardSecret) || !strings.Contains(string(decoded), "[REDACTED]") {
		t.Errorf("attachment data = %q, want the secret masked", decoded)
	}
	stored, _ := json.Marshal(rec.all())
	if strings.Contains(string(stored), hardSecret) {
		t.Errorf("secret recorded: %s", stored)
	}
}

// A result the handler keeps and returns on every call is masked in a copy: concurrent calls
// do not race on it and the handler's value stays as it was.
func TestMaskingDoesNotWriteIntoHandlerResult(t *testing.T) {
	shared := &quiver.Result{Status: quiver.StatusSuccess, Content: []quiver.Content{quiver.TextContent("key " + hardSecret)}}
	tool := rawTool(t, "shared", "", returning(shared, nil), withSecret)
	d := &quiver.Dispatcher{Registry: newRegistry(t, tool), Resolver: quiver.Vars{"token": hardSecret}}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if r := dispatch(t, d, "shared", "{}"); r.Content[0].Text != "key [REDACTED]" {
				t.Errorf("content = %q", r.Content[0].Text)
			}
		})
	}
	wg.Wait()
	if shared.Content[0].Text != "key "+hardSecret {
		t.Errorf("the handler's own result was rewritten: %q", shared.Content[0].Text)
	}
}

// A call made from inside a tool keeps the calling tool's secrets masked: in its result, its
// hooks and its record.
func TestNestedCallsInheritSecrets(t *testing.T) {
	rec := &memRecorder{}
	var seen []string
	var d *quiver.Dispatcher
	echo := rawTool(t, "echo", `{"type":"object","properties":{"text":{"type":"string"}}}`,
		func(_ context.Context, args json.RawMessage) (any, error) { return string(args), nil })
	outer := rawTool(t, "outer", "", func(ctx context.Context, _ json.RawMessage) (any, error) {
		tok, _ := quiver.Var(ctx, "token")
		r, err := d.Call(ctx, "echo", map[string]string{"text": tok})
		if err != nil {
			return nil, err
		}
		return r.Text, nil
	}, withSecret)
	d = &quiver.Dispatcher{Registry: newRegistry(t, echo, outer), Resolver: quiver.Vars{"token": hardSecret}, Recorder: rec,
		Hooks: quiver.Hooks{AfterSuccess: func(_ context.Context, c *quiver.Call, r *quiver.Result) { seen = append(seen, r.Text) }}}
	r := dispatch(t, d, "outer", "{}")
	wantSuccess(t, r)
	all, _ := json.Marshal(map[string]any{"result": r, "records": rec.all(), "hooks": seen})
	if strings.Contains(string(all), hardSecret) {
		t.Fatalf("secret leaked through a nested call: %s", all)
	}
	if len(rec.all()) != 2 {
		t.Fatalf("recorded %d results, want the nested and the outer call", len(rec.all()))
	}
	// The nested call alone, outside any tool, has no secret to mask.
	wantSuccess(t, dispatch(t, d, "echo", `{"text":"plain"}`))
}

// A malformed pattern fails closed: a Dispatcher with one refuses every call, and Permits
// treats it as matching in Deny and as matching nothing in Allow or Bound.
func TestBadPolicyPatternsFailClosed(t *testing.T) {
	tool := textTool("delete_repo", "deleted")
	reg := newRegistry(t, tool)
	for _, p := range []quiver.Policy{
		{Deny: []string{"delete_[repo"}},
		{Allow: []string{"[delete"}},
		{Bound: []string{"delete_repo", "["}},
		quiver.Policy{}.Within(quiver.Policy{Deny: []string{"["}}),
	} {
		d := &quiver.Dispatcher{Registry: reg, Policy: p}
		wantError(t, dispatch(t, d, "delete_repo", "{}"), quiver.CodePolicyDenied, "policy is invalid", "bad pattern")
	}
	deny := quiver.Policy{Deny: []string{"delete_[repo"}}
	if ok, _ := deny.Permits(tool); ok {
		t.Error("a malformed deny pattern let the tool through")
	}
	allow := quiver.Policy{Allow: []string{"[delete"}}
	if ok, _ := allow.Permits(tool); ok {
		t.Error("a malformed allow pattern permitted the tool")
	}
}

// Restrictions accumulate however often Within is applied, and survive JSON.
func TestWithinChainsAndPersists(t *testing.T) {
	shell := textTool("shell", "ran")
	reg := newRegistry(t, shell, textTool("search", "found"))
	child := quiver.Policy{}.Within(quiver.Policy{Deny: []string{"shell"}}).Within(quiver.Policy{})
	if ok, _ := child.Permits(shell); ok {
		t.Fatal("a second Within dropped the first parent's deny")
	}
	b, err := json.Marshal(child)
	if err != nil {
		t.Fatal(err)
	}
	var stored quiver.Policy
	if err := json.Unmarshal(b, &stored); err != nil {
		t.Fatal(err)
	}
	d := &quiver.Dispatcher{Registry: reg, Policy: stored}
	wantError(t, dispatch(t, d, "shell", "{}"), quiver.CodePolicyDenied, "parent agent's policy")
	wantSuccess(t, dispatch(t, d, "search", "{}"))
}

// A call whose context is already over is not started.
func TestCancelledContextRunsNothing(t *testing.T) {
	runs := 0
	tool := rawTool(t, "count", "", func(context.Context, json.RawMessage) (any, error) { runs++; return "ran", nil })
	d := &quiver.Dispatcher{Registry: newRegistry(t, tool)}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	results, err := d.Each(ctx, quiver.Call{Name: "count"}, quiver.Call{Name: "count"})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		wantError(t, r, quiver.CodeCancelled, "was cancelled")
	}
	if runs != 0 {
		t.Fatalf("handler ran %d times under a cancelled context", runs)
	}
}

// encoding/json treats an embedded struct with a json name as one field: the case guard must
// see it the same way.
func TestKeyGuardEmbeddedNamedStruct(t *testing.T) {
	type Inner struct {
		N int `json:"n"`
	}
	type args struct {
		Inner `json:"inner"`
	}
	open := mustSchema(t, `{"type":"object","properties":{"inner":{"type":"object","properties":{"n":{"type":"integer","maximum":10}}}}}`)
	var got []int
	tool := quiver.Func("nested", "Nested.", func(_ context.Context, a args) (string, error) {
		got = append(got, a.N)
		return "ok", nil
	}, quiver.WithInputSchema(open))
	d := &quiver.Dispatcher{Registry: newRegistry(t, tool)}
	wantError(t, dispatch(t, d, "nested", `{"INNER":{"n":500}}`), quiver.CodeInvalidArguments, `use "inner"`)
	wantError(t, dispatch(t, d, "nested", `{"inner":{"N":500}}`), quiver.CodeInvalidArguments, `/inner/N`, `use "n"`)
	wantSuccess(t, dispatch(t, d, "nested", `{"inner":{"n":5}}`))
	if len(got) != 1 || got[0] != 5 {
		t.Fatalf("handler got %v, want only 5", got)
	}
}

func TestDefinitionRejectsUnusableTools(t *testing.T) {
	if _, err := quiver.NewFunc("ids", "Takes an id.", func(context.Context, struct {
		ID string `json:"_id"`
	}) (string, error) {
		return "", nil
	}); err == nil || !strings.Contains(err.Error(), `argument "_id" starts with an underscore`) {
		t.Errorf("underscore argument: %v", err)
	}
	if err := (&quiver.Registry{}).Register(&quiver.Tool{}); err == nil {
		t.Error("a zero Tool was registered")
	}
	if _, err := quiver.NewTool(quiver.Spec{Name: "t", Description: "d", InputSchema: mustSchema(t, `{"type":["object"]}`)}, nil); err != nil {
		t.Errorf(`"type": ["object"] is an object schema: %v`, err)
	}
}

// A schema-only tool shaped as a map keeps its argument schema.
func TestSchemaToolMapArguments(t *testing.T) {
	tool, err := quiver.ParseSchemaTool([]byte(`{"type":"object","description":"Sets environment values.",
		"additionalProperties":{"type":"string"},"properties":{"_tool":{"const":"set_env"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	reg := newRegistry(t, tool)
	if err := reg.RegisterActivity("set_env", func(_ context.Context, args json.RawMessage) (any, error) { return string(args), nil }); err != nil {
		t.Fatal(err)
	}
	d := &quiver.Dispatcher{Registry: reg}
	r := dispatch(t, d, "set_env", `{"env":"prod"}`)
	wantSuccess(t, r)
	if r.Text != `{"env":"prod"}` {
		t.Errorf("activity got %s", r.Text)
	}
	wantError(t, dispatch(t, d, "set_env", `{"env":1}`), quiver.CodeInvalidArguments, "/env")
}

func TestArgsForHistory(t *testing.T) {
	for in, want := range map[string]string{
		`{"a":1}`: `{"a":1}`, ` {"a":[1]} `: ` {"a":[1]} `, `{"a":`: `{}`, `[1]`: `{}`, `"x"`: `{}`,
		``: `{}`, `null`: `{}`, "{\"a\":\"\xff\"}": `{}`, `{"a":1} trailing`: `{}`,
	} {
		if got := string(quiver.ArgsForHistory(json.RawMessage(in))); got != want {
			t.Errorf("ArgsForHistory(%q) = %q, want %q", in, got, want)
		}
	}
}

// quiver.CheckPath accepts exactly the paths the thread file system does.
func TestCheckPathMatchesTheStore(t *testing.T) {
	long := "/" + strings.Repeat("a", 256)
	for _, p := range []string{"/a\nb", "/tab\there", "/del\x7f", long, "/ok/" + strings.Repeat("b", 255)} {
		qerr := quiver.CheckPath(p)
		serr := store.CheckPath(p)
		if (qerr == nil) != (serr == nil) {
			t.Errorf("CheckPath(%q): quiver %v, store %v", p, qerr, serr)
		}
	}
}
