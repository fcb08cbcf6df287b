package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/schema"
	"github.com/quiverhq/quiver/server"
	"github.com/quiverhq/quiver/store/memstore"
)

// promptsServer serves a catalog with two prompts other prompts may call (critic, with an
// argument schema; helper, without) and one they may not (private), to two workspaces over
// real HTTP; it returns the server's URL and a member key of each workspace.
func promptsServer(t *testing.T) (url, keyA, keyB string) {
	t.Helper()
	ctx := context.Background()
	st := memstore.New()
	t.Cleanup(func() { st.Close() })
	_, keyA = newMember(t, st, "alpha")
	_, keyB = newMember(t, st, "beta")
	var criticArgs schema.Schema
	mustDo(t, json.Unmarshal([]byte(`{"type":"object","required":["draft"],"additionalProperties":false,"properties":{
		"draft":{"type":"string","description":"The text to grade."},
		"tone":{"type":"string","enum":["gentle","blunt"],"default":"gentle","description":"How to say it."},
		"max_words":{"type":"integer","minimum":1,"description":"At most this many words."}}}`), &criticArgs))
	cat := &agent.Catalog{Prompts: map[string]*agent.Prompt{
		"critic": {Name: "critic", Description: "Grades a draft.", System: "You grade drafts. Sign as ${SIGNER}.",
			ExposeAsTool: true, Args: &criticArgs},
		"helper":  {Name: "helper", Description: "Answers anything.", System: "You help.", ExposeAsTool: true},
		"private": {Name: "private", System: "Only for agents of this server."},
	}}
	p, err := platform.New(platform.Config{Store: st, Registry: testRegistry(t), Catalog: cat, Logger: slog.New(slog.DiscardHandler)})
	mustDo(t, err)
	sctx, cancel := context.WithCancel(ctx)
	srv, err := server.New(sctx, server.Config{Platform: p, Auth: &server.Authenticator{Keys: st}, Logger: slog.New(slog.DiscardHandler)})
	mustDo(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	mustDo(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(sctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })
	return "http://" + ln.Addr().String(), keyA, keyB
}

func promptsSession(t *testing.T, url, key string) *sdk.ClientSession {
	t.Helper()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "prompts-test", Version: "1"}, nil).Connect(context.Background(),
		&sdk.StreamableClientTransport{Endpoint: url + "/mcp", MaxRetries: -1, HTTPClient: &http.Client{Transport: isoBearer{key}}}, nil)
	mustDo(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// TestMCPPromptsList: every workspace's MCP server lists the catalog's prompts exposed as
// tools, with their arguments from the argument schema (required ones marked, descriptions
// carried; "message" for a prompt without one), and the prompts capability.
func TestMCPPromptsList(t *testing.T) {
	url, keyA, keyB := promptsServer(t)
	for _, key := range []string{keyA, keyB} {
		cs := promptsSession(t, url, key)
		if caps := cs.InitializeResult().Capabilities; caps.Prompts == nil {
			t.Errorf("capabilities %+v: no prompts", caps)
		}
		res, err := cs.ListPrompts(context.Background(), nil)
		mustDo(t, err)
		got := map[string]*sdk.Prompt{}
		var names []string
		for _, p := range res.Prompts {
			got[p.Name] = p
			names = append(names, p.Name)
		}
		if strings.Join(names, ",") != "critic,helper" {
			t.Fatalf("prompts %v, want critic and helper (private is not exposed)", names)
		}
		critic := got["critic"]
		if critic.Description != "Grades a draft." || len(critic.Arguments) != 3 {
			t.Fatalf("critic: %+v", critic)
		}
		args := map[string]*sdk.PromptArgument{}
		for _, a := range critic.Arguments {
			args[a.Name] = a
		}
		if a := args["draft"]; a == nil || !a.Required || a.Description != "The text to grade." {
			t.Errorf("critic's draft: %+v", a)
		}
		if a := args["tone"]; a == nil || a.Required || a.Description != "How to say it." {
			t.Errorf("critic's tone: %+v", a)
		}
		if critic.Arguments[0].Name != "draft" {
			t.Errorf("critic's first argument is %q, want the required draft", critic.Arguments[0].Name)
		}
		helper := got["helper"]
		if len(helper.Arguments) != 1 || helper.Arguments[0].Name != "message" || !helper.Arguments[0].Required {
			t.Errorf("helper's arguments: %+v", helper.Arguments)
		}
	}
}

// TestMCPPromptsGet: prompts/get answers with the definition's system text (unresolved) as
// the first user message and the arguments as the second; a bad, missing or unknown argument
// and an unknown prompt are invalid-params errors that say which and what is allowed.
func TestMCPPromptsGet(t *testing.T) {
	url, keyA, _ := promptsServer(t)
	cs := promptsSession(t, url, keyA)
	ctx := context.Background()
	get := func(name string, args map[string]string) (*sdk.GetPromptResult, error) {
		return cs.GetPrompt(ctx, &sdk.GetPromptParams{Name: name, Arguments: args})
	}
	texts := func(res *sdk.GetPromptResult) []string {
		var out []string
		for _, m := range res.Messages {
			tc, ok := m.Content.(*sdk.TextContent)
			if m.Role != "user" || !ok {
				t.Errorf("message %+v: want a user text message", m)
				continue
			}
			out = append(out, tc.Text)
		}
		return out
	}

	res, err := get("critic", map[string]string{"draft": "Dear sir", "max_words": "50"})
	mustDo(t, err)
	msgs := texts(res)
	if res.Description != "Grades a draft." || len(msgs) != 2 || msgs[0] != "You grade drafts. Sign as ${SIGNER}." {
		t.Fatalf("critic: %+v %q", res, msgs)
	}
	var sent map[string]any
	mustDo(t, json.Unmarshal([]byte(msgs[1]), &sent))
	if sent["draft"] != "Dear sir" || sent["max_words"] != float64(50) || sent["tone"] != "gentle" || len(sent) != 3 {
		t.Errorf("critic's arguments message: %s", msgs[1])
	}

	res, err = get("helper", map[string]string{"message": "What is 2+2?"})
	mustDo(t, err)
	if msgs := texts(res); len(msgs) != 2 || msgs[0] != "You help." || msgs[1] != "What is 2+2?" {
		t.Errorf("helper: %q", msgs)
	}

	for _, c := range []struct {
		name string
		args map[string]string
		want []string
	}{
		{"critic", map[string]string{"tone": "blunt"}, []string{"draft", "arguments: draft (required, string)"}},
		{"critic", map[string]string{"draft": "x", "tone": "rude"}, []string{"/tone", `one of ["gentle","blunt"]`}},
		{"critic", map[string]string{"draft": "x", "max_words": "many"}, []string{"/max_words", "max_words (integer)"}},
		{"critic", map[string]string{"draft": "x", "colour": "red"}, []string{"colour"}},
		{"helper", nil, []string{"message", "arguments: message (required, string)"}},
		{"no_such_prompt", nil, []string{"no_such_prompt"}},
		{"private", map[string]string{"message": "hi"}, []string{"private"}},
	} {
		_, err := get(c.name, c.args)
		var we *jsonrpc.Error
		if !errors.As(err, &we) || we.Code != jsonrpc.CodeInvalidParams {
			t.Errorf("%s %v: %v (%T), want an invalid-params error", c.name, c.args, err, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(we.Message, w) {
				t.Errorf("%s %v: %q does not say %q", c.name, c.args, we.Message, w)
			}
		}
	}
}

// TestMCPPromptsNeedKey: prompts are behind the same door as tools: without a key, or with a
// wrong one, /mcp refuses the request.
func TestMCPPromptsNeedKey(t *testing.T) {
	url, _, _ := promptsServer(t)
	for _, key := range []string{"", "qk_wrong"} {
		for _, body := range []string{
			`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`,
			`{"jsonrpc":"2.0","id":2,"method":"prompts/list"}`,
			`{"jsonrpc":"2.0","id":3,"method":"prompts/get","params":{"name":"helper","arguments":{"message":"hi"}}}`,
		} {
			req, err := http.NewRequest("POST", url+"/mcp", strings.NewReader(body))
			mustDo(t, err)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if key != "" {
				req.Header.Set("Authorization", "Bearer "+key)
			}
			resp, err := http.DefaultClient.Do(req)
			mustDo(t, err)
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("key %q, %s: %d, want 401", key, body, resp.StatusCode)
			}
		}
		cs, err := sdk.NewClient(&sdk.Implementation{Name: "prompts-test", Version: "1"}, nil).Connect(context.Background(),
			&sdk.StreamableClientTransport{Endpoint: url + "/mcp", MaxRetries: -1, HTTPClient: &http.Client{Transport: isoBearer{key}}}, nil)
		if err == nil {
			cs.Close()
			t.Errorf("key %q: a client connected", key)
		}
	}
}
