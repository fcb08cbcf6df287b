package interop

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// protocolVersions are the MCP versions Quiver accepts (the go-sdk's), oldest first.
var protocolVersions = []string{"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"}

// record is one message Quiver sent: the answer to a request of method (kind "result" or
// "error") or a notification, in a session that negotiated version.
type record struct {
	Transport string          `json:"transport"`
	Version   string          `json:"version"`
	Method    string          `json:"method"`
	Kind      string          `json:"kind"`
	Message   json.RawMessage `json:"message"`
	// Expect names the error the specification says the request is answered with
	// (schemas.mjs has each version's code for it); URI is the resource a resources/read
	// asked for, which a resource-not-found error's data names.
	Expect string `json:"expect,omitempty"`
	URI    string `json:"uri,omitempty"`
}

// exchange is one line a client sends: a request (method and params), or a raw line that is
// not one.
type exchange struct {
	method, params string
	raw            string // sent as is when set; its answer is an error without id
	expect, uri    string // the error the answer must be (see record.Expect), and the URI read
	// overHTTP, when set, is the error the answer must be over HTTP at 2026-07-28, where the
	// transport checks the request's headers first.
	overHTTP string
}

// failing is a request whose answer the specification says is the error expect.
func failing(method, params, expect string) exchange {
	var p struct{ URI string }
	_ = json.Unmarshal([]byte(params), &p)
	return exchange{method: method, params: params, expect: expect, uri: p.URI}
}

// script is what a session sends after it is set up: every kind of answer Quiver gives
// (lists, calls of each content type, prompts, resources, completions), the errors it
// gives, and calls that make it send progress and log notifications.
func script(modern bool) []exchange {
	s := []exchange{}
	if !modern {
		s = append(s, exchange{method: "ping", params: `{}`}, exchange{method: "logging/setLevel", params: `{"level":"debug"}`})
	}
	call := func(name, args string) exchange {
		return exchange{method: "tools/call", params: fmt.Sprintf(`{"name":%q,"arguments":%s}`, name, args)}
	}
	s = append(s,
		exchange{method: "tools/list", params: `{}`},
		call("get_current_time", `{"timezone":"UTC"}`),
		call("get_current_time", `{"timezone":5}`),
		call("no_such_tool", `{}`),
		call("test_simple_text", `{}`),
		call("test_image_content", `{}`),
		call("test_audio_content", `{}`),
		call("test_embedded_resource", `{}`),
		call("test_multiple_content_types", `{}`),
		call("test_error_handling", `{}`),
		call("test_tool_with_logging", `{}`),
		exchange{method: "tools/call", params: `{"name":"test_tool_with_progress","arguments":{},"_meta":{"progressToken":"p1"}}`},
		exchange{method: "prompts/list", params: `{}`},
		exchange{method: "prompts/get", params: `{"name":"test_simple_prompt"}`},
		exchange{method: "prompts/get", params: `{"name":"test_prompt_with_arguments","arguments":{"arg1":"a","arg2":"b"}}`},
		exchange{method: "prompts/get", params: `{"name":"test_prompt_with_image"}`},
		exchange{method: "prompts/get", params: `{"name":"test_prompt_with_embedded_resource","arguments":{"resourceUri":"test://static-text"}}`},
		failing("prompts/get", `{"name":"no_such_prompt"}`, "invalid-params"),
		exchange{method: "resources/list", params: `{}`},
		exchange{method: "resources/templates/list", params: `{}`},
		exchange{method: "resources/read", params: `{"uri":"test://static-text"}`},
		exchange{method: "resources/read", params: `{"uri":"test://static-binary"}`},
		exchange{method: "resources/read", params: `{"uri":"test://template/7/data"}`},
		failing("resources/read", `{"uri":"test://no-such-resource"}`, "resource-not-found"),
		exchange{method: "completion/complete", params: `{"ref":{"type":"ref/prompt","name":"test_prompt_with_arguments"},"argument":{"name":"arg1","value":"a"}}`},
		failing("no/such_method", `{}`, "method-not-found"),
		// Over HTTP at 2026-07-28, a call without a name cannot have the Mcp-Name header the
		// transport requires: header mismatch.
		exchange{method: "tools/call", params: `{"arguments":{}}`, expect: "invalid-params", overHTTP: "header-mismatch"},
		exchange{raw: `{"jsonrpc":"2.0","id":99,"method":`, expect: "parse-error"},
	)
	return s
}

// envelope adds the per-request _meta of protocol 2026-07-28 (which has no initialize) to
// params.
func envelope(version, params string) string {
	var p map[string]any
	if err := json.Unmarshal([]byte(params), &p); err != nil {
		panic(err)
	}
	meta, _ := p["_meta"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
	}
	meta["io.modelcontextprotocol/protocolVersion"] = version
	meta["io.modelcontextprotocol/clientInfo"] = map[string]string{"name": "schema-check", "version": "1"}
	meta["io.modelcontextprotocol/clientCapabilities"] = map[string]any{}
	meta["io.modelcontextprotocol/logLevel"] = "debug"
	p["_meta"] = meta
	out, _ := json.Marshal(p)
	return string(out)
}

const initializeParams = `{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"schema-check","version":"1"}}`

// session sends lines and returns every message that came back up to the answer to the
// line (all of them, for a notification or a raw line).
type session interface {
	send(t *testing.T, id int, line string) [][]byte
}

// recordSession runs the script in one session at version and records what came back. At
// 2026-07-28 there is no session: server/discover, then every request on its own, with its
// version in its _meta (and over HTTP in the Mcp-Protocol-Version, Mcp-Method and Mcp-Name
// headers).
func recordSession(t *testing.T, transport, version string, s session) []record {
	t.Helper()
	var out []record
	id := 0
	negotiated := version
	do := func(method, params string) {
		id++
		line := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, method, params)
		for _, m := range s.send(t, id, line) {
			out = append(out, classify(t, transport, negotiated, method, m))
		}
	}
	// expect marks the answer, the last message sent back, with the error it must be.
	modern := version >= "2026-07-28"
	expect := func(e exchange) {
		if e.expect != "" {
			out[len(out)-1].Expect, out[len(out)-1].URI = e.expect, e.uri
		}
		if e.overHTTP != "" && transport == "http" && modern {
			out[len(out)-1].Expect = e.overHTTP
		}
	}
	if modern {
		do("server/discover", envelope(version, `{}`))
	}
	if !modern {
		do("initialize", fmt.Sprintf(initializeParams, version))
		var init struct {
			Result struct{ ProtocolVersion string }
		}
		_ = json.Unmarshal(out[len(out)-1].Message, &init)
		if init.Result.ProtocolVersion == "" {
			t.Fatalf("initialize at %s was answered %s", version, out[len(out)-1].Message)
		}
		out[len(out)-1].Version = init.Result.ProtocolVersion
		negotiated = init.Result.ProtocolVersion
		s.send(t, 0, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	}
	for _, e := range script(modern) {
		if e.raw != "" {
			for _, m := range s.send(t, -1, e.raw) {
				out = append(out, classify(t, transport, negotiated, "(not JSON)", m))
			}
			expect(e)
			continue
		}
		params := e.params
		if modern {
			params = envelope(version, params)
		}
		do(e.method, params)
		expect(e)
	}
	return out
}

func classify(t *testing.T, transport, version, method string, msg []byte) record {
	var m struct {
		ID     json.RawMessage
		Method string
		Error  json.RawMessage
	}
	if err := json.Unmarshal(msg, &m); err != nil {
		t.Fatalf("%s %s: %q is not JSON: %v", transport, version, msg, err)
	}
	r := record{Transport: transport, Version: version, Method: method, Kind: "result", Message: msg}
	switch {
	case m.Method != "" && m.ID != nil:
		t.Fatalf("%s %s: the server sent a request %s the check does not expect", transport, version, msg)
	case m.Method != "":
		r.Kind, r.Method = "notification", m.Method
	case m.Error != nil:
		r.Kind = "error"
	}
	return r
}

// stdioSession drives quiver mcp stdio --conformance.
type stdioSession struct {
	in    io.Writer
	lines chan []byte
}

func newStdioSession(t *testing.T) *stdioSession {
	cmd := exec.Command(quiverBinary(t), "mcp", "stdio", "--conformance")
	cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+t.TempDir(), "QUIVER_CONFIG=")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &stdioSession{in: in, lines: make(chan []byte, 64)}
	go func() {
		defer close(s.lines)
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 4<<20)
		for sc.Scan() {
			s.lines <- bytes.Clone(sc.Bytes())
		}
	}()
	t.Cleanup(func() {
		in.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("quiver mcp stdio: %v\n%s", err, stderr.String())
		}
	})
	return s
}

func (s *stdioSession) send(t *testing.T, id int, line string) [][]byte {
	t.Helper()
	if _, err := io.WriteString(s.in, line+"\n"); err != nil {
		t.Fatal(err)
	}
	if id == 0 {
		return nil // a notification has no answer
	}
	var got [][]byte
	for {
		select {
		case m, ok := <-s.lines:
			if !ok {
				t.Fatalf("quiver mcp stdio ended before answering %s", line)
			}
			got = append(got, m)
			var probe struct{ ID json.RawMessage }
			_ = json.Unmarshal(m, &probe)
			if (id < 0 && probe.ID == nil && !bytes.Contains(m, []byte(`"method"`))) || string(probe.ID) == fmt.Sprint(id) {
				return got
			}
		case <-time.After(time.Minute):
			t.Fatalf("no answer to %s", line)
		}
	}
}

// httpSession drives quiver serve --conformance over streamable HTTP.
type httpSession struct {
	endpoint, key, sessionID, version string
}

func (s *httpSession) send(t *testing.T, id int, line string) [][]byte {
	t.Helper()
	req, err := http.NewRequest("POST", s.endpoint, strings.NewReader(line))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+s.key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if s.sessionID != "" {
		req.Header.Set("Mcp-Session-Id", s.sessionID)
		req.Header.Set("Mcp-Protocol-Version", s.version)
	}
	if version, method, name, ok := sessionless(line); ok {
		req.Header.Set("Mcp-Protocol-Version", version)
		req.Header.Set("Mcp-Method", method)
		if name != "" {
			req.Header.Set("Mcp-Name", name)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" {
		s.sessionID = sid
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode == http.StatusAccepted || len(bytes.TrimSpace(body)) == 0 {
		if id != 0 {
			t.Fatalf("%s: HTTP %d without an answer", line, resp.StatusCode)
		}
		return nil
	}
	var msgs [][]byte
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for _, l := range strings.Split(string(body), "\n") {
			if data, ok := strings.CutPrefix(l, "data:"); ok && strings.TrimSpace(data) != "" {
				msgs = append(msgs, []byte(strings.TrimSpace(data)))
			}
		}
	} else {
		msgs = append(msgs, bytes.TrimSpace(body))
	}
	for _, m := range msgs {
		var init struct {
			Result struct{ ProtocolVersion string }
		}
		if json.Unmarshal(m, &init) == nil && init.Result.ProtocolVersion != "" {
			s.version = init.Result.ProtocolVersion
		}
	}
	return msgs
}

// sessionless reads a request of the sessionless protocol: its version (in its _meta), its
// method, and the name the Mcp-Name header repeats (a tool's, a prompt's, a resource's URI);
// false for a request of a session.
func sessionless(line string) (version, method, name string, ok bool) {
	var req struct {
		Method string
		Params struct {
			Name, URI string
			Meta      map[string]any `json:"_meta"`
		}
	}
	if json.Unmarshal([]byte(line), &req) != nil {
		return "", "", "", false
	}
	version, ok = req.Params.Meta["io.modelcontextprotocol/protocolVersion"].(string)
	return version, req.Method, req.Params.Name + req.Params.URI, ok
}

// Every message Quiver's MCP server sends (answers to initialize, discovery, lists, calls,
// prompts, resources and completions, its errors, and its progress and log notifications)
// matches the official TypeScript SDK's schemas for the protocol version the session
// negotiated, for every version Quiver accepts, over stdio and over HTTP; and each error the
// specification names has that version's code (resource not found: -32002 up to 2025-11-25,
// -32602 from 2026-07-28 on) and is read as what it is by the SDK. It found a parse error
// answered with "id": null, which MCP's schema refuses (the id is left out now), quiver mcp
// stdio ending at a line that was not JSON, and a resource not found answered -32602 at
// 2025-11-25.
func TestMCPMessagesMatchTheOfficialSchemas(t *testing.T) {
	npmDir(t)
	endpoint, key := serve(t, "--conformance")
	var all []record
	for _, version := range protocolVersions {
		all = append(all, recordSession(t, "stdio", version, newStdioSession(t))...)
		all = append(all, recordSession(t, "http", version, &httpSession{endpoint: endpoint, key: key})...)
	}
	// What the check must have seen, per transport and version: without these the schemas
	// would pass for want of messages.
	for _, transport := range []string{"stdio", "http"} {
		for _, version := range protocolVersions {
			seen := map[string]bool{}
			for _, r := range all {
				if r.Transport == transport && r.Version == version {
					seen[r.Kind+" "+r.Method] = true
					if r.Expect != "" && r.Kind == "error" {
						seen[r.Expect+" "+r.Method] = true
					}
				}
			}
			if version >= "2026-07-28" && !seen["result server/discover"] {
				t.Errorf("%s %s: server/discover was not answered: %v", transport, version, seen)
			}
			if !seen["resource-not-found resources/read"] {
				t.Errorf("%s %s: no resource not found was checked: %v", transport, version, seen)
			}
			for _, want := range []string{"result tools/list", "result tools/call", "result prompts/get", "error prompts/get", "error resources/read",
				"result resources/read", "result completion/complete", "error no/such_method", "error (not JSON)",
				"notification notifications/message", "notification notifications/progress"} {
				if !seen[want] {
					t.Errorf("%s %s: no %s among %v", transport, version, want, seen)
				}
			}
		}
	}
	transcript := filepath.Join(t.TempDir(), "transcript.json")
	data, _ := json.MarshalIndent(all, "", " ")
	if err := os.WriteFile(transcript, data, 0o644); err != nil {
		t.Fatal(err)
	}
	runJS(t, "schemas.mjs", transcript)
}
