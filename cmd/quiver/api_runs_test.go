package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/quiverhq/quiver/store/postgres/pgtest"
	"github.com/quiverhq/quiver/store/secret"
)

// sseEvent is one Server-Sent Event as a client reads it.
type sseEvent struct {
	ID, Event, Data string
}

// openEvents connects to a thread's event stream (with Last-Event-ID when lastID is not "")
// and returns its events as they come; the stream closes with the test.
func openEvents(t testing.TB, url, key, lastID string) <-chan sseEvent {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	out := make(chan sseEvent, 256)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.Event != "" {
					out <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, "id: "):
				ev.ID = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "event: "):
				ev.Event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.Data = strings.TrimPrefix(line, "data: ")
			}
		}
	}()
	t.Cleanup(func() { cancel(); resp.Body.Close(); wg.Wait() })
	return out
}

// next returns the first event for which want holds, failing after 20 seconds; the events
// before it are returned too.
func next(t testing.TB, events <-chan sseEvent, what string, want func(sseEvent) bool) (sseEvent, []sseEvent) {
	t.Helper()
	var seen []sseEvent
	timeout := time.After(20 * time.Second)
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("the stream ended before %s; saw %v", what, seen)
			}
			if want(ev) {
				return ev, seen
			}
			seen = append(seen, ev)
		case <-timeout:
			t.Fatalf("no %s in 20 s; saw %v", what, seen)
		}
	}
}

// A run over the API, followed on its event stream: the run pauses on a client tool's call,
// the client posts the result, and the run finishes; a second result, a result for a call
// that does not wait and a reconnection with Last-Event-ID behave as a client relies on.
func TestServeEventsAndClientTools(t *testing.T) {
	for _, b := range serveBackends(t) {
		t.Run(b.name, func(t *testing.T) { testServeEventsAndClientTools(t, b.args(t)) })
	}
}

// serveBackend is a database quiver serve runs on in a test: the flags that name it.
type serveBackend struct {
	name string
	args func(t *testing.T) []string
}

// serveBackends are SQLite in a temporary file and, when QUIVER_TEST_POSTGRES names a server
// (always in CI), a PostgreSQL schema of the test's own, named in the DSN's search_path.
func serveBackends(t testing.TB) []serveBackend {
	out := []serveBackend{{"sqlite", func(t *testing.T) []string { return []string{"--db", filepath.Join(t.TempDir(), "q.db")} }}}
	if os.Getenv(pgtest.EnvDSN) == "" && os.Getenv("CI") != "true" {
		t.Logf("quiver serve on PostgreSQL not tested: %s is not set", pgtest.EnvDSN)
		return out
	}
	return append(out, serveBackend{"postgres", func(t *testing.T) []string {
		// The commands a test runs on one database are nodes of one fleet, each with a data
		// directory of its own (startServeWith's): they share the database's secrets key, as
		// every node of a fleet must, or the second is refused.
		t.Setenv(secret.EnvKey, strings.Repeat("5e", 32))
		dsn := pgtest.DSN(t)
		name := pgtest.Schema(t, dsn)
		conn, err := pgx.Connect(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(context.Background(), "CREATE SCHEMA "+pgx.Identifier{name}.Sanitize()); err != nil {
			t.Fatal(err)
		}
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		q.Set("search_path", name)
		u.RawQuery = q.Encode()
		return []string{"--postgres", u.String()}
	}})
}

func testServeEventsAndClientTools(t *testing.T, dbArgs []string) {
	dir := t.TempDir()
	script := filepath.Join(dir, "turns.yaml")
	agents := filepath.Join(dir, "agents")
	for name, text := range map[string]string{
		script:                               "turns:\n  - calls: [{name: open_file, args: {path: /etc/motd}}]\n  - text: Opened it.\n",
		filepath.Join(agents, "opener.yaml"): "name: opener\nmodel: scripted:" + script + "\ntools: [open_file]\n",
	} {
		if err := os.MkdirAll(filepath.Dir(name), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	endpoint, _, stderr := startServeWith(t, append(dbArgs, "--agents", agents)...)
	admin := firstKeyRE.FindString(stderr.String())
	base := strings.TrimSuffix(endpoint, "/mcp") + "/v1"

	// The client tool is defined over the API: the client runs it, the server only offers it.
	status, _, tool := apiDo(t, "POST", base+"/tools", admin, `{"name":"open_file","description":"Opens a file on the user's machine.","target":"client",`+
		`"input_schema":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}}`)
	if status != 201 {
		t.Fatalf("creating the client tool: %d %v", status, tool)
	}
	_, _, th := apiDo(t, "POST", base+"/threads", admin, `{"agent":"opener"}`)
	threadID, _ := th["id"].(string)
	events := openEvents(t, base+"/threads/"+threadID+"/events", admin, "")
	first, _ := next(t, events, "the first state", func(e sseEvent) bool { return e.Event == "state" })
	if !strings.Contains(first.Data, `"status":"idle"`) {
		t.Fatalf("the first state: %s", first.Data)
	}
	if status, _, out := apiDo(t, "POST", base+"/threads/"+threadID+"/runs", admin, `{"agent":"opener","message":"open the motd"}`); status != 202 {
		t.Fatalf("the run: %d %v", status, out)
	}
	user, _ := next(t, events, "the user's message", func(e sseEvent) bool { return e.Event == "message" && strings.Contains(e.Data, "open the motd") })
	if user.ID != "1" {
		t.Errorf("the first message's event id is %q, want 1 (its seq)", user.ID)
	}
	paused, _ := next(t, events, "the pause on the client tool", func(e sseEvent) bool {
		return e.Event == "state" && strings.Contains(e.Data, `"reason":"client_tool"`)
	})
	var state struct {
		Pending struct {
			Call struct{ ID, Name string }
		}
	}
	if err := json.Unmarshal([]byte(paused.Data), &state); err != nil || state.Pending.Call.Name != "open_file" {
		t.Fatalf("the paused state: %s (%v)", paused.Data, err)
	}
	callID := state.Pending.Call.ID
	_, _, pending := apiDo(t, "GET", base+"/threads/"+threadID+"/pending", admin, "")
	if b, _ := json.Marshal(pending); !strings.Contains(string(b), callID) || !strings.Contains(string(b), "client_tool") {
		t.Fatalf("GET pending: %s", b)
	}

	for _, tt := range []struct {
		name, body string
		status     int
		code       string
	}{
		{"a call that does not wait", `{"agent":"opener","call_id":"call_nope","status":"success","text":"x"}`, 409, "not_pending"},
		{"an error without a message", `{"agent":"opener","call_id":"` + callID + `","status":"error"}`, 400, "invalid_request"},
		{"an unknown status", `{"agent":"opener","call_id":"` + callID + `","status":"maybe"}`, 422, "invalid_request"},
		{"an unknown field", `{"agent":"opener","call_id":"` + callID + `","status":"success","extra":1}`, 422, "invalid_request"},
	} {
		if status, _, p := apiDo(t, "POST", base+"/threads/"+threadID+"/results", admin, tt.body); status != tt.status || p["code"] != tt.code {
			t.Errorf("%s: %d %v, want %d %s", tt.name, status, p, tt.status, tt.code)
		}
	}
	body := `{"agent":"opener","call_id":"` + callID + `","status":"success","text":"Welcome to the machine."}`
	if status, _, out := apiDo(t, "POST", base+"/threads/"+threadID+"/results", admin, body); status != 202 {
		t.Fatalf("posting the result: %d %v", status, out)
	}
	if status, _, p := apiDo(t, "POST", base+"/threads/"+threadID+"/results", admin, body); status != 409 || p["code"] != "not_pending" {
		t.Errorf("a second result: %d %v, want 409 not_pending", status, p)
	}
	result, _ := next(t, events, "the client's result", func(e sseEvent) bool {
		return e.Event == "message" && strings.Contains(e.Data, "Welcome to the machine.")
	})
	last, _ := next(t, events, "the model's answer", func(e sseEvent) bool { return e.Event == "message" && strings.Contains(e.Data, "Opened it.") })
	next(t, events, "the idle state at the end", func(e sseEvent) bool {
		return e.Event == "state" && strings.Contains(e.Data, `"status":"idle"`) && strings.Contains(e.Data, `"status":"finished"`) &&
			!strings.Contains(e.Data, `"pending"`)
	})

	// A client that reconnects after the result gets what came after it, and nothing before.
	again := openEvents(t, base+"/threads/"+threadID+"/events", admin, result.ID)
	ev, _ := next(t, again, "the first message after Last-Event-ID", func(e sseEvent) bool { return e.Event == "message" })
	if ev.ID != last.ID && ev.ID <= result.ID {
		t.Errorf("after Last-Event-ID %s the stream sent message %s", result.ID, ev.ID)
	}
	if ev.ID != last.ID {
		t.Errorf("after Last-Event-ID %s the first message is %s, want %s", result.ID, ev.ID, last.ID)
	}
	req, _ := http.NewRequest("GET", base+"/threads/"+threadID+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+admin)
	req.Header.Set("Last-Event-ID", "not-a-number")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Errorf("a forged Last-Event-ID: %d, want 400", resp.StatusCode)
	}
}
