package mcp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/quiverhq/quiver"
	qmcp "github.com/quiverhq/quiver/mcp"
)

// stdioSession serves one session over a pipe and returns a function that sends a line and
// reads the answer to it (notifications sent in between are skipped).
func stdioSession(t *testing.T, srv *qmcp.Server) func(line string) map[string]json.RawMessage {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, &sdk.IOTransport{Reader: inR, Writer: outW}) }()
	t.Cleanup(func() { cancel(); inW.Close(); outR.Close(); <-done })
	lines := bufio.NewScanner(outR)
	lines.Buffer(nil, 1<<20)
	return func(line string) map[string]json.RawMessage {
		t.Helper()
		if _, err := io.WriteString(inW, line+"\n"); err != nil {
			t.Fatal(err)
		}
		var sent struct{ ID json.RawMessage }
		_ = json.Unmarshal([]byte(line), &sent)
		if sent.ID == nil {
			return nil // a notification has no answer
		}
		for lines.Scan() {
			var m map[string]json.RawMessage
			if err := json.Unmarshal(lines.Bytes(), &m); err != nil {
				t.Fatalf("answer %q is not JSON: %v", lines.Text(), err)
			}
			if string(m["id"]) == string(sent.ID) {
				return m
			}
		}
		t.Fatalf("no answer to %s: %v", line, lines.Err())
		return nil
	}
}

// The fields a list answer may carry depend on the protocol version: ttlMs, cacheScope and
// resultType exist from 2026-07-28 on, where cacheScope must be "public" or "private" (an
// empty one made the OpenAI Agents SDK refuse the list). Older versions get none of them.
func TestListAnswersCarryTheFieldsOfTheirVersion(t *testing.T) {
	d := &quiver.Dispatcher{Registry: fixtureTools(t, &blockSignals{})}
	srv := qmcp.NewServer(d, nil)
	srv.SDK().AddPrompt(&sdk.Prompt{Name: "hello"}, func(context.Context, *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
		return &sdk.GetPromptResult{}, nil
	})
	// A client may also ask initialize for 2026-07-28 (mcp-go 1.2 does over HTTP): it is
	// served at 2025-11-25, and was sent 2026-era fields, since the SDK shapes answers by the
	// version a client asked for.
	const viaInitialize = "2026-07-28 through initialize"
	for _, name := range append(sdk.SupportedProtocolVersions(), viaInitialize) {
		t.Run(name, func(t *testing.T) {
			send := stdioSession(t, srv)
			version, asked := name, name
			if name == viaInitialize {
				version, asked = "2025-11-25", "2026-07-28"
			}
			meta := ""
			if version >= "2026-07-28" {
				meta = fmt.Sprintf(`"_meta":{"io.modelcontextprotocol/protocolVersion":%q,"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`, version)
			} else {
				init := send(fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`, asked))
				if init["error"] != nil {
					t.Fatalf("initialize: %s", init["error"])
				}
				if want := fmt.Sprintf(`"protocolVersion":%q`, version); !strings.Contains(string(init["result"]), want) {
					t.Fatalf("initialize asking for %s was answered %s, want %s", asked, init["result"], want)
				}
				send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			}
			for i, method := range []string{"tools/list", "prompts/list"} {
				params := "{}"
				if meta != "" {
					params = "{" + meta + "}"
				}
				answer := send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, i+2, method, params))
				var result map[string]json.RawMessage
				if err := json.Unmarshal(answer["result"], &result); err != nil {
					t.Fatalf("%s: answer %v has no result: %v", method, answer, err)
				}
				if result["tools"] == nil && result["prompts"] == nil {
					t.Fatalf("%s: result %v lists nothing", method, result)
				}
				if version < "2026-07-28" {
					for _, field := range []string{"ttlMs", "cacheScope", "resultType"} {
						if v, ok := result[field]; ok {
							t.Errorf("%s at %s: result has %s = %s, a field this version does not define", method, version, field, v)
						}
					}
					continue
				}
				var scope string
				if err := json.Unmarshal(result["cacheScope"], &scope); err != nil || !slices.Contains([]string{"public", "private"}, scope) {
					t.Errorf("%s at %s: cacheScope %s, want \"public\" or \"private\"", method, version, result["cacheScope"])
				}
				var ttl int
				if err := json.Unmarshal(result["ttlMs"], &ttl); err != nil || ttl < 0 {
					t.Errorf("%s at %s: ttlMs %s, want a number of at least 0", method, version, result["ttlMs"])
				}
				if method == "tools/list" && scope != "private" {
					t.Errorf("tools/list at %s: cacheScope %q, want private (the list depends on who asks)", version, scope)
				}
			}
			// A call's answer says it is complete from 2026-07-28 on (the TypeScript SDK refuses
			// one that does not), and only then.
			params := `{"name":"greet","arguments":{"name":"v"}}`
			if meta != "" {
				params = `{"name":"greet","arguments":{"name":"v"},` + meta + `}`
			}
			answer := send(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":` + params + `}`)
			var result map[string]json.RawMessage
			if err := json.Unmarshal(answer["result"], &result); err != nil || result["content"] == nil {
				t.Fatalf("tools/call: answer %v", answer)
			}
			rt, has := result["resultType"]
			if version >= "2026-07-28" && string(rt) != `"complete"` {
				t.Errorf("tools/call at %s: resultType %s, want \"complete\"", version, rt)
			} else if version < "2026-07-28" && has {
				t.Errorf("tools/call at %s: resultType %s, a field this version does not define", version, rt)
			}
		})
	}
}

// Over stdio the connection is the session, whatever the protocol: a client of 2026-07-28 has
// its calls recorded on one thread (the session hook asked once), and its confirmations go
// through multi round-trip requests, recorded on that thread too.
func TestStdioSessionlessClientsKeepOneThread(t *testing.T) {
	rec := &memRecorder{}
	d := &quiver.Dispatcher{Registry: fixtureTools(t, &blockSignals{}), Recorder: rec, Confirm: qmcp.Confirm(nil)}
	var asked []qmcp.SessionInfo
	srv := qmcp.NewServer(d, &qmcp.ServerOptions{Session: func(_ context.Context, s qmcp.SessionInfo) (quiver.Scope, error) {
		asked = append(asked, s)
		return quiver.Scope{WorkspaceID: "wsp_test", ThreadID: fmt.Sprintf("thr_%d", len(asked))}, nil
	}})
	st, ct := sdk.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, st) }()
	t.Cleanup(func() { cancel(); <-done })
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "c", Version: "1"}, &sdk.ClientOptions{
		ElicitationHandler: func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			return &sdk.ElicitResult{Action: "accept"}, nil
		}}).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Fatalf("the client speaks %s over stdio, want 2026-07-28", v)
	}
	for _, call := range []sdk.CallToolParams{
		{Name: "greet", Arguments: map[string]any{"name": "x"}}, {Name: "greet", Arguments: map[string]any{"name": "y"}}, {Name: "dangerous"},
	} {
		res, err := cs.CallTool(ctx, &call)
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %+v", call.Name, err, res)
		}
	}
	if len(asked) != 1 {
		t.Errorf("the session hook was asked %d times: %+v; want once", len(asked), asked)
	}
	if n := len(rec.all()); n != 4 {
		t.Errorf("%d calls recorded, want 4 (the confirmed one twice)", n)
	}
	for _, r := range rec.all() {
		if r.Scope.ThreadID != "thr_1" {
			t.Errorf("%s recorded on %s, want the session's thr_1", r.Call.Name, r.Scope.ThreadID)
		}
	}
}
