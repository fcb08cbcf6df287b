package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/server"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/sqlite"
)

type echoArgs struct {
	Text string `json:"text" minLength:"1"`
}

func testRegistry(t *testing.T) *quiver.Registry {
	t.Helper()
	reg := &quiver.Registry{}
	err := reg.Register(
		quiver.Func("echo", "Echoes its text.", func(_ context.Context, a echoArgs) (string, error) { return a.Text, nil }),
		quiver.Func("boom", "Fails.", func(context.Context, struct{}) (string, error) { return "", errors.New("boom") }),
	)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// spyStore is the SQLite store, noting the threads created.
type spyStore struct {
	*sqlite.Store
	mu      sync.Mutex
	threads []*store.Thread
}

func (s *spyStore) CreateThread(ctx context.Context, t *store.Thread) error {
	err := s.Store.CreateThread(ctx, t)
	if err == nil {
		s.mu.Lock()
		s.threads = append(s.threads, t)
		s.mu.Unlock()
	}
	return err
}

type running struct {
	url   string
	st    *spyStore
	p     *platform.Platform
	stop  context.CancelFunc
	done  chan error
	srv   *server.Server
	wsID  string
	close func()
}

// newPlatform assembles a platform of st and reg (quiver.Default when nil) for a test's
// server.
func newPlatform(t testing.TB, st store.Backend, reg *quiver.Registry) *platform.Platform {
	t.Helper()
	p, err := platform.New(platform.Config{Store: st, Registry: reg, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// start runs a server on a random 127.0.0.1 port with a SQLite store in a temp file, over a
// platform of testRegistry's tools recording through a journal in journalDir ("": none).
func start(t *testing.T, cfg server.Config, journalDir string) *running {
	t.Helper()
	return startWith(t, cfg, journalDir, "")
}

// startConfigured is start with the platform serving configuration (a quiver.yaml's text):
// its tool sources, remote MCP servers included.
func startConfigured(t *testing.T, cfg server.Config, configuration string) *running {
	t.Helper()
	return startWith(t, cfg, "", configuration)
}

// serveConfiguration has p serve configuration, a quiver.yaml's text, as a node started with
// that file on a database without a fleet configuration does.
func serveConfiguration(t *testing.T, p *platform.Platform, configuration string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "quiver.yaml")
	if err := os.WriteFile(file, []byte(configuration), 0o600); err != nil {
		t.Fatal(err)
	}
	files, err := platform.NodeConfiguration(context.Background(), "", file)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.ServeConfiguration(context.Background(), files); err != nil {
		t.Fatal(err)
	}
}

func startWith(t *testing.T, cfg server.Config, journalDir, configuration string) *running {
	t.Helper()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "quiver.db"))
	if err != nil {
		t.Fatal(err)
	}
	st := &spyStore{Store: db}
	p := newPlatform(t, st, testRegistry(t))
	if journalDir != "" {
		if err := p.OpenJournal(context.Background(), journalDir); err != nil {
			t.Fatal(err)
		}
	}
	if configuration != "" {
		serveConfiguration(t, p, configuration)
	}
	cfg.Platform = p
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := server.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &running{url: "http://" + ln.Addr().String(), st: st, p: p, stop: cancel, done: make(chan error, 1), srv: srv, wsID: "wsp_local"}
	go func() { r.done <- srv.Serve(ctx, ln) }()
	stopped := false
	r.close = func() {
		if !stopped {
			stopped = true
			cancel()
			<-r.done
		}
	}
	t.Cleanup(func() { r.close(); _ = p.Close(); st.Close() })
	return r
}

// connect opens an MCP session (2025-11-25, the newest protocol with sessions).
func connect(t *testing.T, url, name string) *sdk.ClientSession {
	t.Helper()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: name, Version: "1"}, nil).
		Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: url + "/mcp", MaxRetries: -1}, &sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func TestCallsArePersistedPerSession(t *testing.T) {
	for _, journaled := range []bool{false, true} {
		t.Run(map[bool]string{false: "direct", true: "journal"}[journaled], func(t *testing.T) {
			testCallsArePersistedPerSession(t, journaled)
		})
	}
}

func testCallsArePersistedPerSession(t *testing.T, journaled bool) {
	dir := ""
	if journaled {
		dir = filepath.Join(t.TempDir(), "journal")
	}
	r := start(t, server.Config{}, dir)
	ctx := context.Background()
	calls := []struct {
		client, tool string
		args         any
		wantStatus   string
		wantText     string
	}{
		{"alpha", "echo", map[string]any{"text": "one"}, "success", "one"},
		{"alpha", "echo", map[string]any{"text": ""}, "error", "/text"},
		{"alpha", "boom", nil, "error", "boom"},
		{"beta", "echo", map[string]any{"text": "two"}, "success", "two"},
		{"beta", "missing", nil, "error", "unknown tool"},
	}
	sessions := map[string]*sdk.ClientSession{}
	for _, c := range calls {
		cs := sessions[c.client]
		if cs == nil {
			cs = connect(t, r.url, c.client)
			sessions[c.client] = cs
		}
		if _, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: c.tool, Arguments: c.args}); err != nil {
			t.Fatal(err)
		}
	}
	if journaled {
		checkJournalHealth(t, r.url)
		if err := r.p.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	threads := mcpThreads(t, r)
	if len(threads) != 2 {
		t.Fatalf("%d threads tagged mcp, want one per session (2)", len(threads))
	}
	for client, th := range threads {
		msgs, err := r.st.Messages(ctx, r.wsID, th.ID, store.Page{})
		if err != nil {
			t.Fatal(err)
		}
		var want []int
		for i, c := range calls {
			if c.client == client {
				want = append(want, i)
			}
		}
		if len(msgs) != 2*len(want) {
			t.Fatalf("%s: %d messages, want %d", client, len(msgs), 2*len(want))
		}
		for j, i := range want {
			call, result := msgs[2*j], msgs[2*j+1]
			c := calls[i]
			if call.Role != store.RoleAssistant || len(call.ToolCalls) != 1 || call.ToolCalls[0].Name != c.tool {
				t.Errorf("%s call %d: assistant message %+v", client, j, call)
				continue
			}
			if result.Role != store.RoleTool || result.ToolCallID != call.ToolCalls[0].ID || result.Result == nil {
				t.Errorf("%s call %d: tool message %+v does not answer %s", client, j, result, call.ToolCalls[0].ID)
				continue
			}
			got := result.Result.Text + result.Result.Error
			if result.Result.Status != c.wantStatus || !strings.Contains(got, c.wantText) {
				t.Errorf("%s call %d: stored %s %q, want %s containing %q", client, j, result.Result.Status, got, c.wantStatus, c.wantText)
			}
		}
		pending, err := r.st.PendingCalls(ctx, r.wsID, th.ID)
		if err != nil || len(pending) != 0 {
			t.Errorf("%s: pending calls %v %v, want none", client, pending, err)
		}
	}
}

// checkJournalHealth: /healthz reports the journal, and nothing refused.
func checkJournalHealth(t *testing.T, url string) {
	t.Helper()
	resp, err := http.Get(url + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h server.Health
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatal(err)
	}
	if h.Journal == nil || h.Journal.Refused != 0 || h.Journal.Pending < 0 {
		t.Fatalf("/healthz journal: %+v", h.Journal)
	}
}

// mcpThreads returns the threads of MCP sessions by client name.
func mcpThreads(t *testing.T, r *running) map[string]*store.Thread {
	t.Helper()
	out := map[string]*store.Thread{}
	r.st.mu.Lock()
	defer r.st.mu.Unlock()
	for _, th := range r.st.threads {
		stored, err := r.st.Thread(context.Background(), r.wsID, th.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(stored.Tags, "mcp") {
			continue
		}
		for _, tag := range stored.Tags {
			if name, ok := strings.CutPrefix(tag, "mcp-client:"); ok {
				out[name] = th
			}
		}
	}
	return out
}

func TestHealthAndShutdown(t *testing.T) {
	r := start(t, server.Config{}, "")
	resp, err := http.Get(r.url + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	var h server.Health
	err = json.NewDecoder(resp.Body).Decode(&h)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || h.Status != "ok" || h.Tools != 2 {
		t.Fatalf("healthz: %d %+v %v", resp.StatusCode, h, err)
	}
	cs := connect(t, r.url, "watcher") // an open session with its event stream
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	r.close() // graceful shutdown with a session open
	if _, err := http.Get(r.url + "/healthz"); err == nil {
		t.Error("the server still answers after shutdown")
	}
}

// downStore is the SQLite store with appends failing as a database that is down does.
type downStore struct {
	*spyStore
	down bool
}

func (d *downStore) AppendBatch(ctx context.Context, ops []store.AppendOp) error {
	if d.down {
		return errors.New("database is down")
	}
	return d.Store.AppendBatch(ctx, ops)
}

// TestJournaledCallsSurviveAStoreOutage: with a journal, calls are answered while the store
// cannot take their records; what the server could not store by shutdown stays in the journal,
// and the next server on the same directory stores it before serving.
func TestJournaledCallsSurviveAStoreOutage(t *testing.T) {
	ctx := context.Background()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "quiver.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	dir := filepath.Join(t.TempDir(), "journal")
	st := &downStore{spyStore: &spyStore{Store: db}, down: true}
	p := newPlatform(t, st, testRegistry(t))
	if err := p.OpenJournal(ctx, dir); err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(ctx, server.Config{Platform: p, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(sctx, ln) }()
	cs := connect(t, "http://"+ln.Addr().String(), "outage")
	for _, text := range []string{"one", "two", "three"} {
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": text}})
		if err != nil || res.IsError {
			t.Fatalf("call while the store is down: %v %+v", err, res)
		}
	}
	// Once the journal's writer has tried, the server says it is degraded, and why.
	var h server.Health
	for deadline := time.Now().Add(10 * time.Second); ; {
		resp, err := http.Get("http://" + ln.Addr().String() + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		h = server.Health{}
		err = json.NewDecoder(resp.Body).Decode(&h)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if h.Status == "degraded" || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if h.Status != "degraded" || h.Journal == nil || h.Journal.Pending != 3 || !strings.Contains(h.Journal.Error, "database is down") {
		t.Fatalf("/healthz while the store is down: %+v %+v", h, h.Journal)
	}
	cs.Close()
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	_ = p.Close() // the store is down: what the journal holds stays in its files
	files, _ := filepath.Glob(filepath.Join(dir, "*.journal"))
	if len(files) != 1 {
		t.Fatalf("journal files after shutting down with the store down: %v", files)
	}

	st.down = false
	p2 := newPlatform(t, st, testRegistry(t))
	if err := p2.OpenJournal(ctx, dir); err != nil {
		t.Fatal(err)
	}
	defer p2.Close()
	srv2, err := server.New(ctx, server.Config{Platform: p2, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv2.Close()
	// The session's thread holds the three calls, in order.
	if len(st.threads) != 1 {
		t.Fatalf("%d threads created, want the session's", len(st.threads))
	}
	var texts []string
	page, err := db.Messages(ctx, "wsp_local", st.threads[0].ID, store.Page{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range page {
		if m.Role == store.RoleTool {
			texts = append(texts, m.Result.Text)
		}
	}
	if strings.Join(texts, ",") != "one,two,three" {
		t.Fatalf("stored after the restart: %v", texts)
	}
}
