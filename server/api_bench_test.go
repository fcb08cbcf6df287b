package server_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/jobs"
	_ "github.com/quiverhq/quiver/model/scripted" // the agent's model: "scripted:FILE"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/server"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/postgres"
	"github.com/quiverhq/quiver/store/postgres/pgtest"
	"github.com/quiverhq/quiver/store/secret"
	"github.com/quiverhq/quiver/store/sqlite"
	"github.com/quiverhq/quiver/store/vars"
	"github.com/quiverhq/quiver/thread"
)

// The API's performance targets (issue 13), measured over real HTTP on 127.0.0.1 against a
// server built as quiver serve builds it on SQLite: API keys on (a member's key, checked by a
// server.Authenticator over the store), the variables resolver, the journal beside the
// database, and, for runs, River in the same database with a scripted model. The figures and
// the commands that produce them are in docs/PERFORMANCE.md ("The API (issue 13)"). These
// benchmarks only run with -bench.

// benchServer is a running server and what a client needs to reach it.
type benchServer struct {
	base string // http://127.0.0.1:PORT
	key  string // a member's API key
	ws   string
	st   benchStore
	path string // the SQLite database; "" on PostgreSQL
	// dsn is the PostgreSQL store's DSN, its schema as the search path; "" on SQLite.
	dsn string
	srv *server.Server
	// client keeps connections alive, enough for every goroutine of a parallel benchmark.
	client *http.Client
	runs   *jobs.Jobs
	p      *platform.Platform // the platform of the runs; nil without them
	keys   *secret.Keyring    // its secret keyring, which the nodes of a fleet share
}

// benchStore is what the server asks of a store (both backends are all of it).
type benchStore interface {
	store.Backend
	thread.Store
}

// benchAgent is the agent runs use: a scripted model that answers in one turn, no tools.
const benchAgent = "greeter"

// newBenchServer starts a server on a random 127.0.0.1 port with a SQLite store in a temporary
// directory, a workspace, a member and the member's key; with runs, it also runs agents in the
// background as quiver serve does (jobs.StartSQLite, a Runner calling the workspace's tools,
// River configured as quiver serve configures it).
func newBenchServer(b *testing.B, runs bool) *benchServer {
	b.Helper()
	path := filepath.Join(b.TempDir(), "quiver.db")
	st, err := sqlite.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	var start startJobs
	if runs {
		start = func(ctx context.Context, c jobs.Config) (*jobs.Jobs, error) { return jobs.StartSQLite(ctx, path, c) }
	}
	return serveBench(b, st, path, start)
}

// newBenchServerPostgres is newBenchServer on PostgreSQL (QUIVER_TEST_POSTGRES, a schema of its
// own), its runs on River there; it skips the benchmark when no server is configured (fails
// under CI).
func newBenchServerPostgres(b testing.TB, runs bool) *benchServer {
	b.Helper()
	dsn := pgtest.DSN(b)
	return postgresNode(b, dsn, pgtest.Schema(b, dsn), runs)
}

// postgresNode is a benchmark server on schema of dsn's database, which other nodes may share.
func postgresNode(b testing.TB, dsn, schema string, runs bool, adjust ...func(*platform.Config)) *benchServer {
	b.Helper()
	st, err := postgres.Open(context.Background(), dsn, postgres.WithSchema(schema))
	if err != nil {
		b.Fatal(err)
	}
	u, err := url.Parse(dsn)
	if err != nil {
		b.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	var start startJobs
	if runs {
		start = func(ctx context.Context, c jobs.Config) (*jobs.Jobs, error) {
			pool, err := pgxpool.New(ctx, u.String())
			if err != nil {
				return nil, err
			}
			b.Cleanup(pool.Close)
			return jobs.StartPostgres(ctx, pool, c)
		}
	}
	bs := serveBench(b, st, "", start, adjust...)
	bs.dsn = u.String()
	return bs
}

// startJobs starts a benchmark server's background runs on its database.
type startJobs func(context.Context, jobs.Config) (*jobs.Jobs, error)

// serveBench serves st as quiver serve would (see newBenchServer); path is its SQLite file, ""
// for PostgreSQL (no journal then); start, when set, starts the runs of the bench agent. The
// server stops, and st is closed, when the benchmark ends.
func serveBench(b testing.TB, st benchStore, path string, start startJobs, adjust ...func(*platform.Config)) *benchServer {
	b.Helper()
	ctx := context.Background()
	dir := b.TempDir()
	ws, u := &store.Workspace{Name: "bench"}, &store.User{Email: "bench-" + strings.ToLower(rand.Text()[:8]) + "@example.test"}
	benchMust(b, st.CreateWorkspace(ctx, ws))
	benchMust(b, st.CreateUser(ctx, u))
	benchMust(b, st.AddMember(ctx, &store.Membership{WorkspaceID: ws.ID, UserID: u.ID, Role: store.MemberRoleMember}))
	secret, prefix, hash := platform.NewAPIKey()
	benchMust(b, st.CreateAPIKey(ctx, &store.APIKey{WorkspaceID: ws.ID, UserID: u.ID, Name: "bench", Role: store.KeyRoleMember, Prefix: prefix, Hash: hash}))
	keys, err := vars.LoadKeyring(filepath.Join(dir, "secret.key"))
	if err != nil {
		b.Fatal(err)
	}
	resolver := vars.New(st, keys)
	reg := &quiver.Registry{}
	benchMust(b, reg.Register(quiver.Func("echo", "Echoes its text.", func(_ context.Context, a benchEchoArgs) (string, error) { return a.Text, nil })))
	benchMust(b, reg.Register(quiver.Func("guarded_echo", "Echoes its text once a person allows it.",
		func(_ context.Context, a benchEchoArgs) (string, error) { return a.Text, nil }, quiver.WithConfirmation())))
	logger := slog.New(slog.DiscardHandler)
	pcfg := platform.Config{Store: st, Registry: reg, Resolver: resolver, Logger: logger}
	bs := &benchServer{key: secret, ws: ws.ID, st: st, path: path, keys: keys}
	if start != nil {
		script := filepath.Join(dir, "turns.yaml")
		benchMust(b, os.WriteFile(script, []byte("turns:\n  - text: Hello.\n"), 0o600))
		ag := &agent.Agent{Name: benchAgent, Prompt: &agent.Prompt{Name: benchAgent, Model: "scripted:" + script, Stop: agent.StopRules{MaxSteps: 4}}}
		pcfg.Catalog = &agent.Catalog{Agents: map[string]*agent.Agent{benchAgent: ag}}
	}
	for _, f := range adjust {
		f(&pcfg)
	}
	p, err := platform.New(pcfg)
	benchMust(b, err)
	if path != "" {
		benchMust(b, p.OpenJournal(ctx, path+".journal"))
	}
	if start != nil {
		benchMust(b, p.StartJobs(ctx, start))
		bs.runs = p.Jobs()
	}
	bs.p = p
	cfg := server.Config{Platform: p, Auth: &server.Authenticator{Keys: st}, Logger: logger}
	sctx, cancel := context.WithCancel(ctx)
	srv, err := server.New(sctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	bs.srv = srv
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	bs.base = "http://" + ln.Addr().String()
	done := make(chan error, 1)
	go func() { done <- srv.Serve(sctx, ln) }()
	bs.client = &http.Client{Transport: &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256, IdleConnTimeout: time.Minute}}
	b.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			b.Error(err)
		}
		bs.client.CloseIdleConnections()
		if bs.runs != nil {
			_ = bs.runs.Stop(context.Background())
		}
		_ = p.Close()
		st.Close()
	})
	return bs
}

type benchEchoArgs struct {
	Text string `json:"text" minLength:"1"`
}

func benchMust(b testing.TB, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
}

// do sends a request with the member's key and returns the status and the body.
func (bs *benchServer) do(ctx context.Context, method, path, body string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, bs.base+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+bs.key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := bs.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// bearer adds the API key to every request of an MCP client.
type bearer struct {
	key  string
	base http.RoundTripper
}

func (t bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+t.key)
	return t.base.RoundTrip(r)
}

// mcpSession opens an MCP session with the official go-sdk client, its requests carrying the
// key (no standalone SSE stream: only the calls' requests).
func (bs *benchServer) mcpSession(b *testing.B) *sdk.ClientSession {
	b.Helper()
	hc := &http.Client{Transport: bearer{key: bs.key, base: bs.client.Transport}}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "1"}, nil).Connect(context.Background(),
		&sdk.StreamableClientTransport{Endpoint: bs.base + "/mcp", HTTPClient: hc, MaxRetries: -1, DisableStandaloneSSE: true}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cs.Close() })
	return cs
}

// benchParallelism times GOMAXPROCS is how many goroutines the parallel benchmarks call
// from (16 on 2 cores), each with its own MCP session or sharing the API's keep-alive client.
const benchParallelism = 8

// BenchmarkAPICall compares a call of a trivial tool (echo) over the API, POST
// /v1/tools/echo/call, with the same call over MCP (tools/call through the official go-sdk
// client, each goroutine its own session), on one server, with a member's API key on both.
// "api" records each call on a new thread, as a call without thread_id does; "api-thread"
// names a thread, one per goroutine, as an MCP session records its calls on its own thread.
// "seq" makes calls one after another; "par" from benchParallelism x GOMAXPROCS goroutines.
// Each op is one call, answered and decoded by the client; the journal's records are all in
// SQLite when the timing ends. Client and server share the machine's cores.
func BenchmarkAPICall(b *testing.B) {
	bs := newBenchServer(b, false)
	ctx := context.Background()
	if os.Getenv("QUIVER_BENCH_LIMITS") == "1" {
		// Limits every call counts against and none reaches (bench/compare's measure of what
		// limits and usage metering add to a call, against a commit without them).
		lim := &store.WorkspaceLimits{WorkspaceID: bs.ws, Document: json.RawMessage(limitsNoneReach)}
		if err := bs.st.(store.Backend).PutWorkspaceLimits(ctx, lim, 0); err != nil {
			b.Fatal(err)
		}
		time.Sleep(1500 * time.Millisecond) // the server follows within a recheck
	}
	const body = `{"args":{"text":"hi"}}`
	// apiCall makes one call over the API; thread "" makes a new thread.
	apiCall := func(thread string) error {
		in := body
		if thread != "" {
			in = `{"args":{"text":"hi"},"thread_id":"` + thread + `"}`
		}
		status, out, err := bs.do(ctx, "POST", "/v1/tools/echo/call", in)
		if err != nil {
			return err
		}
		var res struct {
			ThreadID string `json:"thread_id"`
			Result   struct {
				Status string          `json:"status"`
				Value  json.RawMessage `json:"value"`
			} `json:"result"`
		}
		if err := json.Unmarshal(out, &res); err != nil || status != http.StatusOK || res.Result.Status != "success" {
			return fmt.Errorf("API call: %d %s (%v)", status, out, err)
		}
		return nil
	}
	newThread := func() string {
		status, out, err := bs.do(ctx, "POST", "/v1/tools/echo/call", body)
		var res struct {
			ThreadID string `json:"thread_id"`
		}
		if err != nil || status != http.StatusOK || json.Unmarshal(out, &res) != nil {
			b.Fatalf("a thread: %d %s %v", status, out, err)
		}
		return res.ThreadID
	}
	params := &sdk.CallToolParams{Name: "echo", Arguments: json.RawMessage(`{"text":"hi"}`)}
	mcpCall := func(cs *sdk.ClientSession) error {
		res, err := cs.CallTool(ctx, params)
		if err == nil && res.IsError {
			err = fmt.Errorf("tool error: %v", res.Content)
		}
		return err
	}
	goroutines := benchParallelism * runtime.GOMAXPROCS(0)
	sessions := make([]*sdk.ClientSession, goroutines)
	threads := make([]string, goroutines)
	for i := range sessions {
		sessions[i] = bs.mcpSession(b)
		threads[i] = newThread()
		for range 20 { // warm both doors up: connections, the tenant, the caches
			benchMust(b, mcpCall(sessions[i]))
			benchMust(b, apiCall(threads[i]))
		}
	}
	finish := func(b *testing.B) {
		benchMust(b, bs.p.Flush(ctx))
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
	}
	doors := []struct {
		name string
		call func(i int) error
	}{
		{"api", func(int) error { return apiCall("") }},
		{"api-thread", func(i int) error { return apiCall(threads[i]) }},
		{"mcp", func(i int) error { return mcpCall(sessions[i]) }},
	}
	for _, d := range doors {
		b.Run(d.name+"/seq", func(b *testing.B) {
			b.ReportAllocs()
			for range b.N { // not b.Loop, whose timer stops before finish
				if err := d.call(0); err != nil {
					b.Fatal(err)
				}
			}
			finish(b)
		})
		b.Run(d.name+"/par", func(b *testing.B) {
			var next atomic.Int64
			b.ReportAllocs()
			b.SetParallelism(benchParallelism)
			b.RunParallel(func(pb *testing.PB) {
				i := int(next.Add(1)-1) % goroutines
				for pb.Next() {
					if err := d.call(i); err != nil {
						b.Error(err)
						return
					}
				}
			})
			finish(b)
		})
	}
}

// sseEvent is an event of a thread's stream, and when it arrived.
type sseEvent struct {
	name, data string
	at         time.Time
}

// openEvents opens GET /v1/threads/{id}/events and sends its events on the returned channel
// as they arrive, until ctx ends or the stream does (the channel is then closed).
func (bs *benchServer) openEvents(ctx context.Context, threadID string) (<-chan sseEvent, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", bs.base+"/v1/threads/"+threadID+"/events", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+bs.key)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := bs.client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return nil, fmt.Errorf("events: %d %s", resp.StatusCode, out)
	}
	ch := make(chan sseEvent, 64)
	go func() {
		defer close(ch)
		defer resp.Body.Close()
		r := bufio.NewReader(resp.Body)
		var ev sseEvent
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			line = strings.TrimRight(line, "\n")
			switch {
			case line == "":
				if ev.name != "" {
					ev.at = time.Now()
					select {
					case ch <- ev:
					case <-ctx.Done():
						return
					}
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, "event: "):
				ev.name = line[len("event: "):]
			case strings.HasPrefix(line, "data: "):
				ev.data = line[len("data: "):]
			}
		}
	}()
	return ch, nil
}

// BenchmarkAPIRunFirstEvent is how long a run started over the API (POST
// /v1/threads/{id}/runs, a scripted model, River on SQLite with its default configuration)
// takes to show on the thread's event stream, opened before the POST on a fresh thread: from
// sending the POST to the first event after it ("first", which is the user's message) and to
// the user's message event ("message"), and to the model's answer ("answer": the run has
// started, and its scripted model answered at once). Beside them, in the same run: the POST's
// own answer (202, "post") and the plain round trip of GET /v1/threads/{id} ("get", the
// baseline). Each op
// is one run, waited for to its end; "back-to-back" starts the next at once, "idle" waits
// 200 to 300 ms first, at random (longer than River's fetch cooldown, 100 ms by default, and
// not in step with its 50 ms notification poll on SQLite), as on a server that is not busy.
// Run it with -benchtime 200x (or more) for the percentiles.
func BenchmarkAPIRunFirstEvent(b *testing.B) {
	modes := func(b *testing.B, bs *benchServer) {
		for _, mode := range []struct {
			name string
			gap  time.Duration
		}{{"back-to-back", 0}, {"idle", 200 * time.Millisecond}} {
			b.Run(mode.name, func(b *testing.B) {
				var first, message, answer, post, get []time.Duration
				for i := 0; b.Loop(); i++ {
					d := bs.oneRun(b, mode.gap)
					first, message, answer = append(first, d.first), append(message, d.message), append(answer, d.answer)
					post, get = append(post, d.post), append(get, d.get)
				}
				reportPercentiles(b, "first", first)
				reportPercentiles(b, "message", message)
				reportPercentiles(b, "answer", answer)
				reportPercentiles(b, "post", post)
				reportPercentiles(b, "get", get)
			})
		}
	}
	// SQLite's figures keep their names (back-to-back, idle); PostgreSQL's are beside them.
	modes(b, newBenchServer(b, true))
	b.Run("postgres", func(b *testing.B) { modes(b, newBenchServerPostgres(b, true)) })
}

// runTimes are the durations of one run BenchmarkAPIRunFirstEvent reports.
type runTimes struct{ first, message, answer, post, get time.Duration }

// oneRun makes a thread for the agent, reads it once (the baseline), opens its event stream,
// starts a run and waits for the run's end.
func (bs *benchServer) oneRun(b *testing.B, gap time.Duration) (d runTimes) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	status, out, err := bs.do(ctx, "POST", "/v1/threads", `{"agent":"`+benchAgent+`"}`)
	var th struct{ ID string }
	if err != nil || status != http.StatusCreated || json.Unmarshal(out, &th) != nil {
		b.Fatalf("a thread: %d %s %v", status, out, err)
	}
	if gap > 0 {
		time.Sleep(gap + mrand.N(gap/2))
	}
	t := time.Now()
	if status, out, err := bs.do(ctx, "GET", "/v1/threads/"+th.ID, ""); err != nil || status != http.StatusOK {
		b.Fatalf("GET the thread: %d %s %v", status, out, err)
	}
	d.get = time.Since(t)
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	events, err := bs.openEvents(sctx, th.ID)
	if err != nil {
		b.Fatal(err)
	}
	if ev := <-events; ev.name != "state" { // the stream is open: its first event is the state
		b.Fatalf("the stream's first event: %+v", ev)
	}
	t = time.Now()
	status, out, err = bs.do(ctx, "POST", "/v1/threads/"+th.ID+"/runs", `{"agent":"`+benchAgent+`","message":"Hi"}`)
	d.post = time.Since(t)
	if err != nil || status != http.StatusAccepted {
		b.Fatalf("starting the run: %d %s %v", status, out, err)
	}
	ended := false
	for {
		var ev sseEvent
		var ok bool
		select {
		case ev, ok = <-events:
		case <-ctx.Done():
			b.Fatalf("the run did not end: %v", ctx.Err())
		}
		if !ok {
			b.Fatal("the stream ended before the run")
		}
		if d.first == 0 {
			d.first = ev.at.Sub(t)
		}
		if d.message == 0 && ev.name == "message" && strings.Contains(ev.data, `"role":"user"`) {
			d.message = ev.at.Sub(t)
		}
		if d.answer == 0 && ev.name == "message" && strings.Contains(ev.data, `"role":"assistant"`) {
			d.answer = ev.at.Sub(t)
		}
		if ev.name == "run" {
			if !strings.Contains(ev.data, `"finished"`) {
				b.Fatalf("the run: %s", ev.data)
			}
			ended = true
		}
		// The run's end is live, its messages are read from the store: either may come first.
		if ended && d.message != 0 && d.answer != 0 {
			return d
		}
	}
}

// reportPercentiles reports the p50, p90 and p99 of ds in milliseconds, as name-p50-ms...
func reportPercentiles(b *testing.B, name string, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	for _, p := range []int{50, 90, 99} {
		i := min(len(s)-1, (len(s)*p+99)/100-1)
		b.ReportMetric(float64(s[max(i, 0)])/float64(time.Millisecond), fmt.Sprintf("%s-p%d-ms", name, p))
	}
}

// benchTools is how many stored tools BenchmarkAPIToolPages lists, benchPage tools a page.
const (
	benchTools = 10000
	benchPage  = 100
)

// BenchmarkAPIToolPages lists a workspace's 10,000 stored tools (client tools, created through
// the store) 100 at a time over GET /v1/tools?limit=100&cursor=..., on SQLite and on
// PostgreSQL (QUIVER_TEST_POSTGRES; skipped without it, except under CI=true). Each page is
// reached once by walking the cursors, then fetched again and again: "api" is the whole
// request (keys, huma, the store's keyset query, JSON), one op a page. Beside it, on the same
// table through database/sql: "keyset-sql", the query the store sends for that page ((created_at,
// id) > the cursor's), and "offset-sql", the same page with OFFSET, the baseline: keyset
// paging is flat when page 100 costs what page 1 does, where OFFSET grows with the page. On
// PostgreSQL the table is analyzed after the insert, as autovacuum soon does.
func BenchmarkAPIToolPages(b *testing.B) {
	for _, backend := range []string{"sqlite", "postgres"} {
		b.Run(backend, func(b *testing.B) {
			var bs *benchServer
			var db *sql.DB
			var err error
			if backend == "sqlite" {
				bs = newBenchServer(b, false)
				db, err = sql.Open("sqlite", "file:"+bs.path+"?_pragma=busy_timeout(5000)&_pragma=query_only(1)")
			} else {
				bs = newBenchServerPostgres(b, false)
				db, err = sql.Open("pgx", bs.dsn)
			}
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { db.Close() })
			bs.createTools(b, benchTools)
			if backend == "postgres" {
				// As autovacuum would within a minute of the bulk insert: without statistics the
				// planner sorts the whole workspace's tools for every page (see docs/PERFORMANCE.md).
				if _, err := db.Exec(`ANALYZE tools`); err != nil {
					b.Fatal(err)
				}
			}
			cursors := bs.walkTools(b)
			for _, page := range []int{1, 50, 100} {
				cursor := cursors[page-1]
				b.Run(fmt.Sprintf("page%03d/api", page), func(b *testing.B) {
					path := "/v1/tools?limit=" + strconv.Itoa(benchPage)
					if cursor != "" {
						path += "&cursor=" + url.QueryEscape(cursor)
					}
					for b.Loop() {
						status, out, err := bs.do(context.Background(), "GET", path, "")
						var res struct {
							Tools []json.RawMessage `json:"tools"`
						}
						if err != nil || status != http.StatusOK || json.Unmarshal(out, &res) != nil || len(res.Tools) != benchPage {
							b.Fatalf("page %d: %d %.200s %v", page, status, out, err)
						}
					}
				})
				b.Run(fmt.Sprintf("page%03d/keyset-sql", page), func(b *testing.B) {
					q, args := benchToolsQuery+` ORDER BY created_at, id LIMIT $2`, []any{bs.ws, benchPage + 1}
					if page > 1 {
						// The last tool of the page before: what the page's cursor holds.
						var createdAt any
						var id string
						if err := db.QueryRow(`SELECT created_at, id FROM tools WHERE workspace_id = $1 AND deleted_at IS NULL
							ORDER BY created_at, id LIMIT 1 OFFSET $2`, bs.ws, (page-1)*benchPage-1).Scan(&createdAt, &id); err != nil {
							b.Fatal(err)
						}
						q = benchToolsQuery + ` AND (created_at, id) > ($3, $4) ORDER BY created_at, id LIMIT $2`
						args = append(args, createdAt, id)
					}
					for b.Loop() {
						benchRows(b, db, q, args...)
					}
				})
				b.Run(fmt.Sprintf("page%03d/offset-sql", page), func(b *testing.B) {
					q := benchToolsQuery + ` ORDER BY created_at, id LIMIT $2 OFFSET $3`
					for b.Loop() {
						benchRows(b, db, q, bs.ws, benchPage+1, (page-1)*benchPage)
					}
				})
			}
		})
	}
}

// benchToolsQuery is the store's listing of a workspace's tools (store/sqlstore ListTools).
const benchToolsQuery = `SELECT id, workspace_id, name, description, target, function_id, function_version_id, input_schema_id,
	output_schema_id, examples, requires_confirmation, enabled, system, created_by, runtime_user_id, deleted_at,
	retention_tier, created_at, updated_at FROM tools WHERE workspace_id = $1 AND deleted_at IS NULL`

// benchRows runs q and reads every row, checking that it is a page and one more.
func benchRows(b *testing.B, db *sql.DB, q string, args ...any) {
	rows, err := db.Query(q, args...)
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	n := 0
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			b.Fatal(err)
		}
		n++
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	if n != benchPage+1 && n != benchPage { // the last page has no row after it
		b.Fatalf("%d rows, want %d", n, benchPage+1)
	}
}

// createTools stores n client tools in the workspace (sharing one input and one output schema).
func (bs *benchServer) createTools(b *testing.B, n int) {
	b.Helper()
	ctx := context.Background()
	in := &store.Schema{WorkspaceID: bs.ws, Content: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)}
	out := &store.Schema{WorkspaceID: bs.ws, Content: json.RawMessage(`true`)}
	benchMust(b, bs.st.CreateSchema(ctx, in))
	benchMust(b, bs.st.CreateSchema(ctx, out))
	for i := range n {
		benchMust(b, bs.st.CreateTool(ctx, &store.Tool{WorkspaceID: bs.ws, Name: fmt.Sprintf("open_file_%05d", i), Description: "Opens a file on the user's machine.",
			Target: store.TargetClient, InputSchemaID: in.ID, OutputSchemaID: out.ID, Enabled: true}))
	}
}

// walkTools walks every page of the workspace's tools over the API and returns the cursor of
// each ("" for the first), checking that the pages hold every tool once.
func (bs *benchServer) walkTools(b *testing.B) []string {
	b.Helper()
	cursors := []string{""}
	seen := map[string]bool{}
	for {
		path := "/v1/tools?limit=" + strconv.Itoa(benchPage)
		if c := cursors[len(cursors)-1]; c != "" {
			path += "&cursor=" + url.QueryEscape(c)
		}
		status, out, err := bs.do(context.Background(), "GET", path, "")
		var page struct {
			Tools []struct {
				ID string `json:"id"`
			} `json:"tools"`
			NextCursor string `json:"next_cursor"`
		}
		if err != nil || status != http.StatusOK || json.Unmarshal(out, &page) != nil {
			b.Fatalf("GET %s: %d %.200s %v", path, status, out, err)
		}
		for _, t := range page.Tools {
			if seen[t.ID] {
				b.Fatalf("tool %s on two pages", t.ID)
			}
			seen[t.ID] = true
		}
		if page.NextCursor == "" {
			break
		}
		cursors = append(cursors, page.NextCursor)
	}
	if len(seen) != benchTools || len(cursors) != benchTools/benchPage {
		b.Fatalf("%d tools on %d pages, want %d on %d", len(seen), len(cursors), benchTools, benchTools/benchPage)
	}
	return cursors
}
