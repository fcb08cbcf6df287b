package server_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/internal/apicontract"
	"github.com/quiverhq/quiver/jobs"
	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/model/scripted"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/server"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/secret"
	"github.com/quiverhq/quiver/store/vars"
)

// ruWorld is a server on a real store with background runs, on 127.0.0.1, whose workspace has
// an admin (ada), the member who calls (cal), a member tools run as (rex) and another, the
// workspace's default runtime user once set (dee). Each has TOKEN set as a user variable;
// the stored tools as_rex (runtime user rex) and as_default (none) say which TOKEN they see.
type ruWorld struct {
	url, ws string
	key     map[string]string // admin, caller
	user    map[string]string // ada, cal, rex, dee: their ids
}

// ruCode is the function both tools run: it says which user's TOKEN it resolved.
const ruCode = `export default (args, state) => "token=" + (state.env("TOKEN") ?? "none")`

func newRUWorld(t *testing.T, be isoBackend) *ruWorld {
	t.Helper()
	ctx := context.Background()
	st := be.st
	w := &ruWorld{key: map[string]string{}, user: map[string]string{}}
	ws := &store.Workspace{Name: "runtimes"}
	mustDo(t, st.CreateWorkspace(ctx, ws))
	w.ws = ws.ID
	for _, u := range []struct {
		name string
		role store.MemberRole
	}{{"ada", store.MemberRoleAdmin}, {"cal", store.MemberRoleMember}, {"rex", store.MemberRoleMember}, {"dee", store.MemberRoleMember}} {
		rec := &store.User{Email: u.name + "@runtimes.test", Name: u.name}
		mustDo(t, st.CreateUser(ctx, rec))
		mustDo(t, st.AddMember(ctx, &store.Membership{WorkspaceID: ws.ID, UserID: rec.ID, Role: u.role}))
		w.user[u.name] = rec.ID
	}
	for who, k := range map[string]struct {
		user string
		role store.KeyRole
	}{"admin": {w.user["ada"], store.KeyRoleAdmin}, "caller": {w.user["cal"], store.KeyRoleMember}} {
		secretKey, err := platform.IssueAPIKey(ctx, st, &store.APIKey{WorkspaceID: ws.ID, UserID: k.user, Name: who, Role: k.role})
		mustDo(t, err)
		w.key[who] = secretKey
	}
	k, _, err := secret.GenerateKey()
	mustDo(t, err)
	// The agent calls both tools in its first turn, and ends in its second: a script of its
	// own for each run.
	runner := &agent.Agent{Name: "runner", Prompt: &agent.Prompt{Name: "runner", Model: "scripted:runner", Tools: []string{"as_rex", "as_default"}}}
	// strict's tool requires a variable (see TestThreadForAToolThatRunsAsAnother).
	strict := &agent.Agent{Name: "strict", Prompt: &agent.Prompt{Name: "strict", Model: "scripted:runner", Tools: []string{"needs_rex"}}}
	script := func(string) (model.Model, error) {
		return scripted.Turns(scripted.Turn{Calls: []scripted.Call{{Name: "as_rex", Args: map[string]any{}}, {Name: "as_default", Args: map[string]any{}}}},
			scripted.Turn{Text: "done"}), nil
	}
	p, err := platform.New(platform.Config{Store: st, Registry: &quiver.Registry{}, Resolver: vars.New(st, secret.NewKeyring(k)),
		Logger: slog.New(slog.DiscardHandler), Catalog: &agent.Catalog{Agents: map[string]*agent.Agent{"runner": runner, "strict": strict}}, OpenModel: script})
	mustDo(t, err)
	mustDo(t, be.openJournal(ctx, p))
	mustDo(t, p.StartJobs(ctx, func(_ context.Context, c jobs.Config) (*jobs.Jobs, error) { return be.startJobs(t, c), nil }))
	srv, err := server.New(ctx, server.Config{Platform: p, Auth: &server.Authenticator{Keys: st},
		Logger: slog.New(slog.DiscardHandler)})
	mustDo(t, err)
	ts := httptest.NewServer(apicontract.Handler(t, srv.Handler()))
	t.Cleanup(func() { ts.Close(); srv.Close(); _ = p.Close() })
	w.url = ts.URL

	// Everything else through the API: the function, the tools, the users' values.
	var fn, v struct {
		ID string `json:"id"`
	}
	w.ok(t, "admin", "POST", "/v1/functions", map[string]any{"name": "whoami"}, 201, &fn)
	w.ok(t, "admin", "POST", "/v1/functions/"+fn.ID+"/versions", map[string]any{"code": ruCode}, 201, &v)
	in := json.RawMessage(`{"type":"object","description":"Says whose TOKEN it sees.","properties":{},"variables":[{"name":"TOKEN"}]}`)
	w.ok(t, "admin", "POST", "/v1/tools", map[string]any{"name": "as_rex", "target": "server", "function_id": fn.ID,
		"input_schema": in, "runtime_user_id": w.user["rex"]}, 201, nil)
	w.ok(t, "admin", "POST", "/v1/tools", map[string]any{"name": "as_default", "target": "server", "function_id": fn.ID,
		"input_schema": in}, 201, nil)
	for _, name := range []string{"cal", "rex", "dee"} {
		w.ok(t, "admin", "PUT", "/v1/users/"+w.user[name]+"/variables/TOKEN", map[string]any{"value": name + "-token"}, 200, nil)
	}
	return w
}

func (w *ruWorld) ok(t *testing.T, who, method, path string, body any, want int, out any) {
	t.Helper()
	res, data := sendAPI(t, http.DefaultClient, method, w.url+path, w.key[who], body)
	if res.StatusCode != want {
		t.Fatalf("%s %s: %d %s, want %d", method, path, res.StatusCode, data, want)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, path, err, data)
		}
	}
}

// ruResult is a call's result as the API answers and records it.
type ruResult struct {
	Status string `json:"status"`
	Text   string `json:"result"`
	Error  string `json:"error"`
	Code   string `json:"code"`
	Meta   struct {
		Caller  string `json:"caller_user_id"`
		Runtime string `json:"runtime_user_id"`
	} `json:"meta"`
}

// call calls the tool over POST /v1/tools/{name}/call with the caller's key; it returns the
// result and its thread.
func (w *ruWorld) call(t *testing.T, tool string) (ruResult, string) {
	t.Helper()
	var out struct {
		ThreadID string   `json:"thread_id"`
		Result   ruResult `json:"result"`
	}
	w.ok(t, "caller", "POST", "/v1/tools/"+tool+"/call", map[string]any{"args": map[string]any{}}, 200, &out)
	return out.Result, out.ThreadID
}

// toolResults returns the results of the thread's tool messages, by tool name, as the API
// shows the thread.
func (w *ruWorld) toolResults(t *testing.T, threadID string) map[string]ruResult {
	t.Helper()
	var page struct {
		Messages []struct {
			Role     string    `json:"role"`
			Content  string    `json:"content"`
			ToolName string    `json:"tool_name"`
			Result   *ruResult `json:"result"`
		} `json:"messages"`
	}
	w.ok(t, "caller", "GET", "/v1/threads/"+threadID+"/messages", nil, 200, &page)
	out := map[string]ruResult{}
	for _, m := range page.Messages {
		if m.Result != nil {
			out[m.ToolName] = *m.Result
		}
		if m.Role == "assistant" && m.Content == "done" {
			out[""] = ruResult{Text: "done"} // the run ended
		}
	}
	return out
}

// recorded returns the result of the tool's call as the thread records it, once it does (a
// call over the API is recorded through the journal, a moment after it is answered).
func (w *ruWorld) recorded(t *testing.T, threadID, tool string) ruResult {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if r, ok := w.toolResults(t, threadID)[tool]; ok {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("thread %s records no result of %s within 10 s", threadID, tool)
		}
	}
}

// want checks a result: its text, or for an error what its message holds; and the users its
// meta names ("" for none).
func (w *ruWorld) want(t *testing.T, what string, r ruResult, text string, errHas []string, caller, runtime string) {
	t.Helper()
	if errHas == nil && (r.Status != "success" || r.Text != text) {
		t.Errorf("%s: %+v, want the text %q", what, r, text)
	}
	if errHas != nil {
		if r.Status != "error" || r.Code != string(quiver.CodeRejected) {
			t.Errorf("%s: %+v, want an error result (%s)", what, r, quiver.CodeRejected)
		}
		for _, s := range errHas {
			if !strings.Contains(r.Error, s) {
				t.Errorf("%s: the error %q does not say %q", what, r.Error, s)
			}
		}
	}
	if r.Meta.Caller != caller || r.Meta.Runtime != runtime {
		t.Errorf("%s: meta names caller %q and runtime user %q, want %q and %q", what, r.Meta.Caller, r.Meta.Runtime, caller, runtime)
	}
}

// mcpCall calls the tool over MCP with the caller's key.
func (w *ruWorld) mcpCall(t *testing.T, tool string) ruResult {
	t.Helper()
	ctx := context.Background()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "runtime-user-test", Version: "1"}, nil).Connect(ctx,
		&sdk.StreamableClientTransport{Endpoint: w.url + "/mcp", MaxRetries: -1, HTTPClient: &http.Client{Transport: isoBearer{w.key["caller"]}}}, nil)
	mustDo(t, err)
	defer cs.Close()
	r, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: map[string]any{}})
	mustDo(t, err)
	out := ruResult{Status: "success", Text: isoText(r)}
	if r.IsError {
		out = ruResult{Status: "error", Error: isoText(r), Code: string(quiver.CodeRejected)}
	}
	out.Meta.Caller, _ = r.Meta["caller_user_id"].(string)
	out.Meta.Runtime, _ = r.Meta["runtime_user_id"].(string)
	return out
}

// run runs the agent on a new thread of the caller's and returns its tool results once it has
// ended.
func (w *ruWorld) run(t *testing.T) map[string]ruResult {
	t.Helper()
	var th struct {
		ID string `json:"id"`
	}
	w.ok(t, "caller", "POST", "/v1/threads", map[string]any{"agent": "runner"}, 201, &th)
	w.ok(t, "caller", "POST", "/v1/threads/"+th.ID+"/runs", map[string]any{"message": "whose token?"}, 202, nil)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		got := w.toolResults(t, th.ID)
		if _, ended := got[""]; ended {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run of thread %s did not end within 30 s: %+v", th.ID, got)
		}
	}
}

// SPEC E3, seed 004's runtimeUserId: a stored server tool runs as its runtime user, else as
// the workspace's default runtime user, else as the caller: its user variables are that
// user's, its result's meta names the caller and the runtime user, and once that user is no
// longer a member the tool refuses to run, saying who and what to do. At every door: the
// API's tool call (and the thread it records), MCP's tools/call and an agent's run in the
// background.
func TestToolsRunAsTheirRuntimeUser(t *testing.T) {
	isoEach(t, func(t *testing.T, be isoBackend) {
		w := newRUWorld(t, be)
		cal, rex, dee := w.user["cal"], w.user["rex"], w.user["dee"]

		// No default runtime user: as_default runs as the caller, and says nothing of it.
		r, _ := w.call(t, "as_default")
		w.want(t, "as_default without a default runtime user", r, "token=cal-token", nil, "", "")
		r, th := w.call(t, "as_rex")
		w.want(t, "as_rex", r, "token=rex-token", nil, cal, rex)
		w.want(t, "as_rex as its thread records it", w.recorded(t, th, "as_rex"), "token=rex-token", nil, cal, rex)
		w.want(t, "as_rex over MCP", w.mcpCall(t, "as_rex"), "token=rex-token", nil, cal, rex)

		// A default runtime user: the tool that names none runs as them.
		w.ok(t, "admin", "PATCH", "/v1/workspaces/"+w.ws, map[string]any{"default_runtime_user_id": dee}, 200, nil)
		r, th = w.call(t, "as_default")
		w.want(t, "as_default with a default runtime user", r, "token=dee-token", nil, cal, dee)
		w.want(t, "as_default as its thread records it", w.recorded(t, th, "as_default"), "token=dee-token", nil, cal, dee)
		w.want(t, "as_default over MCP", w.mcpCall(t, "as_default"), "token=dee-token", nil, cal, dee)
		r, _ = w.call(t, "as_rex")
		w.want(t, "as_rex with a default runtime user", r, "token=rex-token", nil, cal, rex)
		ran := w.run(t)
		w.want(t, "as_rex in a run", ran["as_rex"], "token=rex-token", nil, cal, rex)
		w.want(t, "as_default in a run", ran["as_default"], "token=dee-token", nil, cal, dee)

		// Runtime users removed from the workspace: their tools refuse, naming them.
		w.ok(t, "admin", "DELETE", "/v1/members/"+rex, nil, 204, nil)
		w.ok(t, "admin", "DELETE", "/v1/members/"+dee, nil, 204, nil)
		rexGone := []string{"as_rex was not run", "user " + rex, "no longer a member", "runtime_user_id"}
		deeGone := []string{"as_default was not run", "user " + dee, "no longer a member", "default_runtime_user_id"}
		r, th = w.call(t, "as_rex")
		w.want(t, "as_rex once rex left", r, "", rexGone, cal, rex)
		w.want(t, "as_rex once rex left, as its thread records it", w.recorded(t, th, "as_rex"), "", rexGone, cal, rex)
		w.want(t, "as_rex over MCP once rex left", w.mcpCall(t, "as_rex"), "", rexGone, cal, rex)
		r, _ = w.call(t, "as_default")
		w.want(t, "as_default once dee left", r, "", deeGone, cal, dee)
		ran = w.run(t)
		w.want(t, "as_rex in a run once rex left", ran["as_rex"], "", rexGone, cal, rex)
		w.want(t, "as_default in a run once dee left", ran["as_default"], "", deeGone, cal, dee)

		// Back as a member, rex is run as again; with the default cleared, the caller is.
		w.ok(t, "admin", "POST", "/v1/members", map[string]any{"email": "rex@runtimes.test"}, 201, nil)
		w.ok(t, "admin", "PATCH", "/v1/workspaces/"+w.ws, map[string]any{"default_runtime_user_id": nil}, 200, nil)
		r, _ = w.call(t, "as_rex")
		w.want(t, "as_rex once rex is back", r, "token=rex-token", nil, cal, rex)
		r, _ = w.call(t, "as_default")
		w.want(t, "as_default once the default is cleared", r, "token=cal-token", nil, "", "")
		if t.Failed() {
			t.Logf("users: %v", w.user)
		}
	})
}

// A thread for an agent whose tool runs as another user requires that tool's variables of
// that user, as its calls will resolve them: creating it is not refused for a value only the
// runtime user has, and is refused, naming the tool and who it runs as, when they have none.
func TestThreadForAToolThatRunsAsAnother(t *testing.T) {
	isoEach(t, func(t *testing.T, be isoBackend) {
		w := newRUWorld(t, be)
		rex := w.user["rex"]
		var fn struct {
			ID string `json:"id"`
		}
		w.ok(t, "admin", "POST", "/v1/functions", map[string]any{"name": "strict"}, 201, &fn)
		w.ok(t, "admin", "POST", "/v1/functions/"+fn.ID+"/versions", map[string]any{"code": `export default (args, state) => state.env("REX_ONLY")`}, 201, nil)
		in := json.RawMessage(`{"type":"object","description":"Needs rex's value.","properties":{},"variables":[{"name":"REX_ONLY","required":true}]}`)
		w.ok(t, "admin", "POST", "/v1/tools", map[string]any{"name": "needs_rex", "target": "server", "function_id": fn.ID,
			"input_schema": in, "runtime_user_id": rex}, 201, nil)
		w.ok(t, "admin", "PUT", "/v1/users/"+rex+"/variables/REX_ONLY", map[string]any{"value": "rex's"}, 200, nil)
		w.ok(t, "caller", "POST", "/v1/threads", map[string]any{"agent": "strict"}, 201, nil)
		r, _ := w.call(t, "needs_rex")
		w.want(t, "needs_rex", r, "rex's", nil, w.user["cal"], rex)

		w.ok(t, "admin", "DELETE", "/v1/users/"+rex+"/variables/REX_ONLY", nil, 204, nil)
		w.ok(t, "admin", "PUT", "/v1/users/"+w.user["cal"]+"/variables/REX_ONLY", map[string]any{"value": "cal's"}, 200, nil)
		res, data := sendAPI(t, http.DefaultClient, "POST", w.url+"/v1/threads", w.key["caller"], map[string]any{"agent": "strict"})
		if res.StatusCode != 422 || !strings.Contains(string(data), "REX_ONLY") || !strings.Contains(string(data), "tool needs_rex (it runs as user "+rex+")") {
			t.Errorf("a thread whose tool's runtime user lacks its value: %d %s", res.StatusCode, data)
		}
	})
}
