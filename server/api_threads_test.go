package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/internal/apicontract"
	"github.com/quiverhq/quiver/internal/backendtest"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/server"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/secret"
	"github.com/quiverhq/quiver/store/vars"
)

// thrStore is what the thread endpoints need of a store; both backends provide it.
type thrStore = store.Backend

// thrWorld is a server on a real store, served over HTTP on 127.0.0.1, with two workspaces: A,
// where a member's and a viewer's keys act, and B, with a member key of its own, whose threads
// A's keys must never reach. Every answer is kept, so that a test can say what no answer held.
type thrWorld struct {
	st     thrStore
	url    string
	a, b   string // workspace ids
	key    map[string]string
	keys   *secret.Keyring
	client *http.Client // follows no redirect: the test sees each answer
	logs   *lockedBuffer

	mu      sync.Mutex
	answers [][]byte
}

// thrEach runs fn against a fresh world on each backend: SQLite, and PostgreSQL when
// QUIVER_TEST_POSTGRES names a server.
func thrEach(t *testing.T, fn func(t *testing.T, w *thrWorld)) {
	backendtest.Each(t, func(t *testing.T, st backendtest.Store) {
		ts, ok := st.(thrStore)
		if !ok {
			t.Fatalf("%T keeps no entities, keys or variables", st)
		}
		fn(t, newThrWorld(t, ts, true))
	})
}

// newThrWorld starts the server; withKeys gives it a resolver with a keyring, as quiver serve
// does, so that it can seal secrets.
func newThrWorld(t *testing.T, st thrStore, withKeys bool) *thrWorld {
	t.Helper()
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	a, b := &store.Workspace{Name: "acme"}, &store.Workspace{Name: "globex"}
	must(st.CreateWorkspace(ctx, a))
	must(st.CreateWorkspace(ctx, b))
	ua, ub := &store.User{Email: "bob@acme.test"}, &store.User{Email: "gil@globex.test"}
	must(st.CreateUser(ctx, ua))
	must(st.CreateUser(ctx, ub))
	must(st.AddMember(ctx, &store.Membership{WorkspaceID: a.ID, UserID: ua.ID, Role: store.MemberRoleMember}))
	must(st.AddMember(ctx, &store.Membership{WorkspaceID: b.ID, UserID: ub.ID, Role: store.MemberRoleMember}))
	w := &thrWorld{st: st, a: a.ID, b: b.ID, key: map[string]string{}, logs: &lockedBuffer{},
		client: &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	for _, k := range []struct {
		who, ws, user string
		role          store.KeyRole
	}{{"member", a.ID, ua.ID, store.KeyRoleMember}, {"viewer", a.ID, ua.ID, store.KeyRoleViewer}, {"b", b.ID, ub.ID, store.KeyRoleMember}} {
		secret, prefix, hash := platform.NewAPIKey()
		must(st.CreateAPIKey(ctx, &store.APIKey{WorkspaceID: k.ws, UserID: k.user, Name: k.who, Role: k.role, Prefix: prefix, Hash: hash}))
		w.key[k.who] = secret
	}
	logger := slog.New(slog.NewTextHandler(w.logs, nil))
	pcfg := platform.Config{Store: st, Logger: logger}
	if withKeys {
		k, _, err := secret.GenerateKey()
		must(err)
		w.keys = secret.NewKeyring(k)
		pcfg.Resolver = vars.New(st, w.keys)
	}
	p, err := platform.New(pcfg)
	must(err)
	srv, err := server.New(ctx, server.Config{Platform: p, Auth: &server.Authenticator{Keys: st}, Logger: logger})
	must(err)
	ts := httptest.NewServer(apicontract.Handler(t, srv.Handler()))
	t.Cleanup(func() { ts.Close(); srv.Close() })
	w.url = ts.URL
	return w
}

type thrResp struct {
	status int
	header http.Header
	body   []byte
}

// do sends a request with the key of who; body is sent as is when a string, else as JSON.
func (w *thrWorld) do(t *testing.T, who, method, path string, body any) thrResp {
	t.Helper()
	res, data := sendAPI(t, w.client, method, w.url+path, w.key[who], body)
	w.mu.Lock()
	w.answers = append(w.answers, data)
	w.mu.Unlock()
	return thrResp{status: res.StatusCode, header: res.Header, body: data}
}

// ok sends a request that must answer want, and decodes the answer into out (when not nil).
func (w *thrWorld) ok(t *testing.T, who, method, path string, body any, want int, out any) thrResp {
	t.Helper()
	r := w.do(t, who, method, path, body)
	if r.status != want {
		t.Fatalf("%s %s: %d %s, want %d", method, path, r.status, r.body, want)
	}
	if out != nil {
		if err := json.Unmarshal(r.body, out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, path, err, r.body)
		}
	}
	return r
}

// neverSaid fails the test if any answer so far, or the server's log, holds s.
func (w *thrWorld) neverSaid(t *testing.T, s string) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, a := range w.answers {
		if bytes.Contains(a, []byte(s)) {
			t.Errorf("an answer holds %q: %s", s, a)
		}
	}
	if strings.Contains(w.logs.String(), s) {
		t.Errorf("the server's log holds %q", s)
	}
}

type thrProblem struct {
	Status int    `json:"status"`
	Code   string `json:"code"`
	Detail string `json:"detail"`
	Errors []struct {
		Location string `json:"location"`
		Message  string `json:"message"`
	} `json:"errors"`
}

// problem checks that r is a problem of status (or, with status 0, any 4xx) and code naming
// the field at loc (when loc is not empty).
func problem(t *testing.T, what string, r thrResp, status int, code, loc string) {
	t.Helper()
	var p thrProblem
	if err := json.Unmarshal(r.body, &p); err != nil || r.header.Get("Content-Type") != "application/problem+json" {
		t.Errorf("%s: a %d answer that is not a problem (%s): %s", what, r.status, r.header.Get("Content-Type"), r.body)
		return
	}
	if status == 0 && (r.status < 400 || r.status > 499) || status != 0 && r.status != status || p.Status != r.status || p.Code != code {
		t.Errorf("%s: %d %s, want %d %s", what, r.status, r.body, status, code)
	}
	if loc != "" && !slices.ContainsFunc(p.Errors, func(e struct {
		Location string `json:"location"`
		Message  string `json:"message"`
	}) bool {
		return e.Location == loc && e.Message != ""
	}) {
		t.Errorf("%s: %s names no field %s", what, r.body, loc)
	}
}

// thread creates a thread in workspace ws with the store, its status set as a run sets it.
func (w *thrWorld) thread(t *testing.T, ws, agent string, status store.ThreadStatus, tags ...string) *store.Thread {
	t.Helper()
	ctx := context.Background()
	th := &store.Thread{WorkspaceID: ws, AgentID: agent, Tags: tags}
	if err := w.st.CreateThread(ctx, th); err != nil {
		t.Fatal(err)
	}
	if status != "" {
		if _, err := w.st.UpdateThread(ctx, ws, th.ID, func(th *store.Thread) error { th.Status = status; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	stored, err := w.st.Thread(ctx, ws, th.ID)
	if err != nil {
		t.Fatal(err)
	}
	return stored
}

type threadPage struct {
	Threads    []*store.Thread `json:"threads"`
	NextCursor string          `json:"next_cursor"`
}

// TestThreadAPIListFilters lists the workspace's threads by agent, tag and status, alone and
// together, over several pages: exactly the threads each filter keeps, newest first, none of
// the other workspace; and every bad parameter is a problem naming it.
func TestThreadAPIListFilters(t *testing.T) {
	thrEach(t, func(t *testing.T, w *thrWorld) {
		specs := []struct {
			agent  string
			status store.ThreadStatus
			tags   []string
		}{
			{"agent_a", "", []string{"red"}},
			{"agent_a", store.StatusRunning, []string{"red", "blue"}},
			{"agent_b", store.StatusRunning, []string{"red"}},
			{"agent_a", store.StatusTerminated, nil},
			{"", "", []string{"blue"}},
			{"agent_a", "", []string{"red"}},
			{"agent_b", store.StatusTerminated, []string{"blue", "red"}},
			{"agent_a", store.StatusRunning, []string{"red"}},
			{"agent_a", "", []string{"red", "blue"}},
		}
		var mine []*store.Thread
		for _, sp := range specs {
			mine = append(mine, w.thread(t, w.a, sp.agent, sp.status, sp.tags...))
			w.thread(t, w.b, sp.agent, sp.status, sp.tags...) // the same, in the other workspace
		}
		for _, c := range []struct {
			query string
			keep  func(*store.Thread) bool
			pages int // at the page size of 2
		}{
			{"", func(*store.Thread) bool { return true }, 5},
			{"agent=agent_a", func(th *store.Thread) bool { return th.AgentID == "agent_a" }, 3},
			{"tag=red", func(th *store.Thread) bool { return slices.Contains(th.Tags, "red") }, 4},
			{"status=running", func(th *store.Thread) bool { return th.Status == store.StatusRunning }, 2},
			{"status=idle", func(th *store.Thread) bool { return th.Status == store.StatusIdle }, 2},
			{"agent=agent_a&tag=red", func(th *store.Thread) bool { return th.AgentID == "agent_a" && slices.Contains(th.Tags, "red") }, 3},
			{"tag=red&status=running", func(th *store.Thread) bool {
				return slices.Contains(th.Tags, "red") && th.Status == store.StatusRunning
			}, 2},
			{"agent=agent_a&tag=blue&status=idle", func(th *store.Thread) bool {
				return th.AgentID == "agent_a" && slices.Contains(th.Tags, "blue") && th.Status == store.StatusIdle
			}, 1},
			{"tag=green", func(*store.Thread) bool { return false }, 1},
		} {
			var kept []*store.Thread
			for _, th := range mine {
				if c.keep(th) {
					kept = append(kept, th)
				}
			}
			want := newestIDs(kept)
			var got []string
			pages, cursor := 0, ""
			for {
				q := "limit=2&" + c.query
				if cursor != "" {
					q += "&cursor=" + url.QueryEscape(cursor)
				}
				var page threadPage
				w.ok(t, "viewer", "GET", "/v1/threads?"+q, nil, 200, &page)
				pages++
				if page.Threads == nil || len(page.Threads) > 2 || page.NextCursor != "" && len(page.Threads) != 2 {
					t.Fatalf("%s: a page of %d threads, next %q", q, len(page.Threads), page.NextCursor)
				}
				for _, th := range page.Threads {
					if th.WorkspaceID != w.a {
						t.Errorf("%s: thread %s of workspace %s listed", q, th.ID, th.WorkspaceID)
					}
					got = append(got, th.ID)
				}
				if page.NextCursor == "" || pages > 10 {
					break
				}
				cursor = page.NextCursor
			}
			if !slices.Equal(got, want) || pages != c.pages {
				t.Errorf("%q in pages of 2: %v in %d pages, want %v in %d", c.query, got, pages, want, c.pages)
			}
		}

		var red, theirs threadPage
		w.ok(t, "member", "GET", "/v1/threads?limit=2&tag=red", nil, 200, &red)
		w.ok(t, "b", "GET", "/v1/threads?limit=2&tag=red", nil, 200, &theirs)
		altered := []byte(red.NextCursor)
		altered[len(altered)/2] ^= 1
		for _, c := range []struct{ what, query, loc string }{
			{"a limit of 0", "limit=0", "query.limit"},
			{"a limit of 1000", "limit=1000", "query.limit"},
			{"a negative limit", "limit=-1", "query.limit"},
			{"a limit that is no number", "limit=ten", "query.limit"},
			{"an unknown status", "status=paused", "query.status"},
			{"an agent over 128 characters", "agent=" + strings.Repeat("a", 129), "query.agent"},
			{"a tag that is not UTF-8", "tag=%FF", "query.tag"},
			{"a tag with NUL", "tag=a%00b", "query.tag"},
			{"a forged cursor", "cursor=not-a-cursor", "query.cursor"},
			{"a made-up cursor", "cursor=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "query.cursor"},
			{"an altered cursor", "tag=red&cursor=" + url.QueryEscape(string(altered)), "query.cursor"},
			{"a cursor of another tag", "tag=blue&cursor=" + url.QueryEscape(red.NextCursor), "query.cursor"},
			{"a cursor without its filter", "cursor=" + url.QueryEscape(red.NextCursor), "query.cursor"},
			{"a cursor with a filter added", "tag=red&status=idle&cursor=" + url.QueryEscape(red.NextCursor), "query.cursor"},
			{"a cursor of another workspace", "tag=red&cursor=" + url.QueryEscape(theirs.NextCursor), "query.cursor"},
			{"a cursor over 1024 characters", "cursor=" + strings.Repeat("A", 1025), "query.cursor"},
		} {
			problem(t, c.what, w.do(t, "member", "GET", "/v1/threads?"+c.query, nil), 0, server.CodeInvalidRequest, c.loc)
		}
		// The same cursor with its own filter goes on where the page ended.
		var next threadPage
		w.ok(t, "member", "GET", "/v1/threads?limit=2&tag=red&cursor="+url.QueryEscape(red.NextCursor), nil, 200, &next)
		if len(next.Threads) != 2 || slices.ContainsFunc(next.Threads, func(th *store.Thread) bool {
			return th.ID == red.Threads[0].ID || th.ID == red.Threads[1].ID
		}) {
			t.Errorf("the second page by tag: %v", next.Threads)
		}
	})
}

func newestIDs(ths []*store.Thread) []string {
	ths = slices.Clone(ths)
	slices.SortFunc(ths, func(a, b *store.Thread) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	ids := []string{}
	for _, th := range ths {
		ids = append(ids, th.ID)
	}
	return ids
}

type filesPage struct {
	Path      string            `json:"path"`
	Files     []*store.FileInfo `json:"files"`
	Truncated bool              `json:"truncated"`
}

func paths(fs []*store.FileInfo) []string {
	out := []string{}
	for _, f := range fs {
		out = append(out, f.Path)
	}
	return out
}

// TestThreadAPIFiles lists a thread's file system and downloads its files as stored, and
// refuses every path that is not one of the thread's.
func TestThreadAPIFiles(t *testing.T) {
	thrEach(t, func(t *testing.T, w *thrWorld) {
		ctx := context.Background()
		th := w.thread(t, w.a, "", "")
		pdf := []byte("%PDF-1.7\n%\xe2\xe3\xcf\xd3\nnot really a pdf\n")
		blob := bytes.Repeat([]byte{0, 1, 2, 0xff, '\n'}, 200_000) // a megabyte, NULs included
		write := func(p string, data []byte, mime string) {
			t.Helper()
			if _, err := w.st.WriteFile(ctx, w.a, th.ID, p, data, store.FileMeta{MimeType: mime}); err != nil {
				t.Fatal(err)
			}
		}
		write("/attachments/report.pdf", pdf, "application/pdf")
		write("/docs/readme.md", []byte("# Hello\n"), "")
		write("/docs/deep/blob.bin", blob, "application/octet-stream")
		write("/docs/page.html", []byte("<script>alert(1)</script>"), "")
		added, err := w.st.AddAttachment(ctx, w.a, th.ID, store.NewAttachment{Name: "chart.png", MimeType: "image/png", Data: []byte("\x89PNG\r\n"), Width: 2, Height: 1})
		if err != nil {
			t.Fatal(err)
		}
		base := "/v1/threads/" + th.ID + "/files"

		var all filesPage
		w.ok(t, "viewer", "GET", base, nil, 200, &all)
		want := []string{"/attachments", added.Path, "/attachments/report.pdf", "/docs", "/docs/deep", "/docs/deep/blob.bin", "/docs/page.html", "/docs/readme.md"}
		if got := paths(all.Files); !slices.Equal(got, want) || all.Truncated || all.Path != "/" {
			t.Fatalf("all files: %v (truncated %v, path %q), want %v", got, all.Truncated, all.Path, want)
		}
		for _, f := range all.Files {
			switch f.Path {
			case "/docs/deep/blob.bin":
				if f.Size != int64(len(blob)) || f.MimeType != "application/octet-stream" || f.ID == "" {
					t.Errorf("blob listed as %+v", f)
				}
			case added.Path:
				if f.MimeType != "image/png" || f.Width != 2 || f.Height != 1 || f.Size != 6 || f.OriginalName != "chart.png" {
					t.Errorf("the attachment listed as %+v", f)
				}
			case "/docs":
				if !f.IsDir || f.Size != 0 {
					t.Errorf("a directory listed as %+v", f)
				}
			}
		}
		var atts filesPage
		w.ok(t, "member", "GET", base+"?path=/attachments", nil, 200, &atts)
		if got := paths(atts.Files); !slices.Equal(got, []string{added.Path, "/attachments/report.pdf"}) || atts.Path != "/attachments" {
			t.Errorf("the attachments: %v", got)
		}
		var one filesPage
		w.ok(t, "member", "GET", base+"?path=/docs/readme.md", nil, 200, &one)
		if got := paths(one.Files); !slices.Equal(got, []string{"/docs/readme.md"}) || one.Files[0].MimeType != "text/markdown; charset=utf-8" {
			t.Errorf("a file listed alone: %+v", one.Files)
		}
		var cut filesPage
		w.ok(t, "member", "GET", base+"?limit=3", nil, 200, &cut)
		if got := paths(cut.Files); !slices.Equal(got, want[:3]) || !cut.Truncated {
			t.Errorf("a listing of 3: %v, truncated %v", got, cut.Truncated)
		}
		w.ok(t, "member", "GET", base+"?limit=8", nil, 200, &cut)
		if len(cut.Files) != 8 || cut.Truncated {
			t.Errorf("a listing of exactly what there is: %d, truncated %v", len(cut.Files), cut.Truncated)
		}

		// Downloads: the bytes as stored, with their type and size, to be saved, not rendered.
		for _, c := range []struct {
			path, ctype string
			data        []byte
		}{
			{"attachments/report.pdf", "application/pdf", pdf},
			{"docs/deep/blob.bin", "application/octet-stream", blob},
			{"docs/page.html", "text/html; charset=utf-8", []byte("<script>alert(1)</script>")},
			{strings.TrimPrefix(added.Path, "/"), "image/png", []byte("\x89PNG\r\n")},
		} {
			r := w.ok(t, "viewer", "GET", base+"/"+c.path, nil, 200, nil)
			name := c.path[strings.LastIndexByte(c.path, '/')+1:]
			if "/"+c.path == added.Path {
				name = "chart.png" // the name the attachment came with (issue 49)
			}
			if !bytes.Equal(r.body, c.data) || r.header.Get("Content-Type") != c.ctype || r.header.Get("Content-Length") != fmt.Sprint(len(c.data)) ||
				r.header.Get("Content-Disposition") != "attachment; filename="+name || r.header.Get("X-Content-Type-Options") != "nosniff" ||
				r.header.Get("Content-Security-Policy") != "sandbox" {
				t.Errorf("%s: %d bytes (want %d), headers %v", c.path, len(r.body), len(c.data), r.header)
			}
		}

		for _, c := range []struct {
			what, path string
			status     int
			code, loc  string
		}{
			{"a relative path", base + "?path=attachments", 400, server.CodeInvalidRequest, "query.path"},
			{"a path stepping out", base + "?path=/docs/../..", 400, server.CodeInvalidRequest, "query.path"},
			{"a path with a dot segment", base + "?path=/docs/./deep", 400, server.CodeInvalidRequest, "query.path"},
			{"a path with a trailing slash", base + "?path=/docs/", 400, server.CodeInvalidRequest, "query.path"},
			{"a host path of Windows", base + "?path=" + url.QueryEscape(`C:\Windows`), 400, server.CodeInvalidRequest, "query.path"},
			{"a host path with backslashes", base + "?path=" + url.QueryEscape(`\etc\passwd`), 400, server.CodeInvalidRequest, "query.path"},
			{"a path with NUL", base + "?path=/docs%00", 400, server.CodeInvalidRequest, "query.path"},
			{"a path with a newline", base + "?path=/docs%0Aevil", 400, server.CodeInvalidRequest, "query.path"},
			{"a path over 1024 characters", base + "?path=/" + strings.Repeat("a", 1024), 0, server.CodeInvalidRequest, "query.path"},
			{"a missing directory", base + "?path=/nothing", 404, server.CodeNotFound, "query.path"},
			{"a limit of 0", base + "?limit=0", 0, server.CodeInvalidRequest, "query.limit"},
			{"a limit of 1001", base + "?limit=1001", 0, server.CodeInvalidRequest, "query.limit"},
			{"a missing file", base + "/docs/nothing.txt", 404, server.CodeNotFound, "path.path"},
			{"a directory", base + "/docs", 400, server.CodeInvalidRequest, "path.path"},
			{"the root", base + "/", 0, server.CodeInvalidRequest, "path.path"},
			{"a file with a trailing slash", base + "/docs/readme.md/", 400, server.CodeInvalidRequest, "path.path"},
			{"a backslash", base + "/docs%5C..%5Creadme.md", 400, server.CodeInvalidRequest, "path.path"},
			{"a host path of Windows", base + "/C:%5CWindows%5Cwin.ini", 400, server.CodeInvalidRequest, "path.path"},
			{"NUL", base + "/docs/readme.md%00.txt", 400, server.CodeInvalidRequest, "path.path"},
			{"a path over 1024 characters", base + "/" + strings.Repeat("a", 1025), 0, server.CodeInvalidRequest, "path.path"},
		} {
			problem(t, c.what, w.do(t, "member", "GET", c.path, nil), c.status, c.code, c.loc)
		}

		// Dot segments in the URL are cleaned by the HTTP server, which redirects to the clean
		// URL: a way out of the thread leads to another thread's URL, answered as any other.
		other := w.thread(t, w.b, "", "")
		if _, err := w.st.WriteFile(ctx, w.b, other.ID, "/secret.txt", []byte("globex only"), store.FileMeta{}); err != nil {
			t.Fatal(err)
		}
		r := w.do(t, "member", "GET", base+"/docs/../../../"+other.ID+"/files/secret.txt", nil)
		if r.status < 300 || r.status > 399 || r.header.Get("Location") != "/v1/threads/"+other.ID+"/files/secret.txt" {
			t.Fatalf("a URL with dot segments: %d, Location %q", r.status, r.header.Get("Location"))
		}
		problem(t, "the cleaned URL of another workspace's file", w.do(t, "member", "GET", r.header.Get("Location"), nil), 404, server.CodeNotFound, "")
		w.neverSaid(t, "globex only")
	})
}

type variablesPage struct {
	Variables []map[string]any `json:"variables"`
}

// TestThreadAPIVariables sets, lists and removes a thread's variables; a secret is encrypted
// at rest as quiver vars set encrypts it and its value is in no answer or log, whatever is sent.
func TestThreadAPIVariables(t *testing.T) {
	thrEach(t, func(t *testing.T, w *thrWorld) {
		ctx := context.Background()
		const token = "s3cr3t-t0ken-9f8e7d6c"
		th := w.thread(t, w.a, "", "")
		base := "/v1/threads/" + th.ID + "/variables"

		got := map[string]any{}
		w.ok(t, "member", "PUT", base+"/REGION", map[string]any{"value": "eu-west"}, 200, &got)
		if got["name"] != "REGION" || got["value"] != "eu-west" || got["secret"] != false || got["set"] != true || got["updated_at"] == nil {
			t.Errorf("a text variable set: %v", got)
		}
		got = map[string]any{}
		w.ok(t, "member", "PUT", base+"/API_TOKEN", map[string]any{"value": token, "secret": true}, 200, &got)
		if _, has := got["value"]; has || got["secret"] != true || got["set"] != true {
			t.Errorf("a secret set: %v", got)
		}
		got = map[string]any{}
		w.ok(t, "member", "PUT", base+"/repo.name", map[string]any{"value": "quiver", "scoped": true}, 200, &got)
		if got["scoped"] != true || got["value"] != "quiver" {
			t.Errorf("a scoped variable set: %v", got)
		}
		got = map[string]any{}
		w.ok(t, "member", "PUT", base+"/EMPTY", map[string]any{"value": ""}, 200, &got)
		if v, has := got["value"]; !has || v != "" {
			t.Errorf("an empty text value: %v", got)
		}
		w.ok(t, "member", "PUT", base+"/REGION", map[string]any{"value": "us-east"}, 200, nil) // replaced

		list := func() []map[string]any {
			t.Helper()
			var page variablesPage
			w.ok(t, "viewer", "GET", base, nil, 200, &page)
			return page.Variables
		}
		vs := list()
		var names []string
		for _, v := range vs {
			names = append(names, v["name"].(string))
			if v["name"] == "API_TOKEN" {
				if _, has := v["value"]; has || v["set"] != true || v["secret"] != true {
					t.Errorf("the secret listed as %v", v)
				}
			}
			if v["name"] == "REGION" && v["value"] != "us-east" {
				t.Errorf("REGION listed as %v", v)
			}
		}
		if !slices.Equal(names, []string{"API_TOKEN", "EMPTY", "REGION", "repo.name"}) {
			t.Errorf("variables listed: %v", names)
		}

		// At rest the secret is sealed, bound to its place; the resolver quiver serve gives the
		// tools opens it.
		stored, err := w.st.Variables(ctx, w.a, store.LayerThread, th.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range stored {
			if v.Name == "API_TOKEN" && (!v.Secret || strings.Contains(v.Value, token) || !strings.HasPrefix(v.Value, "qv1.")) {
				t.Errorf("the secret is stored as %+v", v)
			}
		}
		values, err := vars.New(w.st, w.keys).Resolve(ctx, quiver.Scope{WorkspaceID: w.a, ThreadID: th.ID},
			[]quiver.Variable{{Name: "API_TOKEN", Type: quiver.VarSecret, Required: true}, {Name: "REGION", Required: true}})
		if err != nil || values["API_TOKEN"] != token || values["REGION"] != "us-east" {
			t.Errorf("resolved: %v, %v", values, err)
		}

		w.ok(t, "member", "DELETE", base+"/EMPTY", nil, 204, nil)
		problem(t, "removing it again", w.do(t, "member", "DELETE", base+"/EMPTY", nil), 404, server.CodeNotFound, "path.name")

		before := list()
		// A viewer reads, and changes nothing.
		problem(t, "a viewer setting", w.do(t, "viewer", "PUT", base+"/REGION", map[string]any{"value": "mars"}), 403, server.CodeForbidden, "")
		problem(t, "a viewer removing", w.do(t, "viewer", "DELETE", base+"/REGION", nil), 403, server.CodeForbidden, "")

		// Hostile requests, most carrying the secret: each a problem naming the field, nothing
		// written, the secret in no answer.
		long := strings.Repeat("x", 65537)
		wide := strings.Repeat("é", 33000) // 33000 characters, 66000 bytes
		for _, c := range []struct {
			what, name, body, loc string
		}{
			{"malformed JSON", "NEW", `{"value": "` + token + `", "secret": true`, "body"},
			{"no body", "NEW", ``, ""},
			{"null", "NEW", `null`, "body"},
			{"a null value", "NEW", `{"value": null, "secret": true}`, "body.value"},
			{"a null flag", "NEW", `{"value": "` + token + `", "secret": null}`, "body.secret"},
			{"not an object", "NEW", `["` + token + `"]`, "body"},
			{"an unknown field", "NEW", `{"value": "` + token + `", "secret": true, "colour": "red"}`, "body.colour"},
			{"a value that is a number", "NEW", `{"value": 42, "secret": true}`, "body.value"},
			{"a value that is an object", "NEW", `{"value": {"token": "` + token + `"}, "secret": true}`, "body.value"},
			{"a flag that is a string", "NEW", `{"value": "` + token + `", "secret": "yes"}`, "body.secret"},
			{"no value", "NEW", `{"secret": true}`, "body.value"},
			{"a value over 65536 characters", "NEW", `{"value": "` + long + `", "secret": true}`, "body.value"},
			{"a value over 65536 bytes", "NEW", `{"value": "` + wide + `", "secret": true}`, "body.value"},
			{"a value with NUL", "NEW", `{"value": "` + token + `\u0000", "secret": true}`, "body.value"},
			{"a name with a space", "BAD%20NAME", `{"value": "` + token + `", "secret": true}`, "path.name"},
			{"a name over 128 characters", strings.Repeat("N", 129), `{"value": "` + token + `"}`, "path.name"},
			{"a name starting with a dot", ".hidden", `{"value": "` + token + `"}`, "path.name"},
			{"a name starting with a dash", "-x", `{"value": "` + token + `"}`, "path.name"},
			{"a name with a slash", "a%2Fb", `{"value": "` + token + `"}`, "path.name"},
			{"a name that is not ASCII", "r%C3%A9gion", `{"value": "` + token + `"}`, "path.name"},
		} {
			problem(t, c.what, w.do(t, "member", "PUT", base+"/"+c.name, c.body), 0, server.CodeInvalidRequest, c.loc)
		}
		if after := list(); !jsonEqualAny(before, after) {
			t.Errorf("refused requests changed the variables: %v, then %v", before, after)
		}
		for _, c := range []struct{ what, method, path, loc string }{
			{"a message id", "GET", "/v1/threads/msg_01/variables", "path.id"},
			{"a message id", "PUT", "/v1/threads/msg_01/variables/X", "path.id"},
			{"a message id", "DELETE", "/v1/threads/msg_01/variables/X", "path.id"},
			{"a bare prefix", "GET", "/v1/threads/thr_/variables", "path.id"},
			{"an id over 64 characters", "GET", "/v1/threads/thr_" + strings.Repeat("a", 61) + "/variables", "path.id"},
			{"a bad name to remove", "DELETE", base + "/a%20b", "path.name"},
		} {
			problem(t, c.what, w.do(t, "member", c.method, c.path, `{"value": "`+token+`"}`), 0, server.CodeInvalidRequest, c.loc)
		}
		// The server still serves.
		if after := list(); !jsonEqualAny(before, after) {
			t.Errorf("refused requests changed the variables: %v, then %v", before, after)
		}
		w.neverSaid(t, token)
	})
}

func jsonEqualAny(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// TestThreadAPISecretNeedsAKey: a server without a keyring refuses to set a secret, and stores
// nothing, rather than keep it in the clear.
func TestThreadAPISecretNeedsAKey(t *testing.T) {
	backendtest.Each(t, func(t *testing.T, st backendtest.Store) {
		w := newThrWorld(t, st.(thrStore), false)
		th := w.thread(t, w.a, "", "")
		base := "/v1/threads/" + th.ID + "/variables"
		problem(t, "a secret", w.do(t, "member", "PUT", base+"/TOKEN", map[string]any{"value": "hunter2", "secret": true}), 503, server.CodeUnavailable, "")
		w.ok(t, "member", "PUT", base+"/REGION", map[string]any{"value": "eu"}, 200, nil)
		var page variablesPage
		w.ok(t, "member", "GET", base, nil, 200, &page)
		if len(page.Variables) != 1 || page.Variables[0]["name"] != "REGION" {
			t.Errorf("variables: %v", page.Variables)
		}
		w.neverSaid(t, "hunter2")
	})
}

// TestThreadAPIOtherWorkspace: every endpoint of a thread answers 404 for another workspace's
// thread, as for one that does not exist, and changes nothing of it; an id that is not a
// thread's is a 400 naming path.id.
func TestThreadAPIOtherWorkspace(t *testing.T) {
	thrEach(t, func(t *testing.T, w *thrWorld) {
		ctx := context.Background()
		theirs := w.thread(t, w.b, "agent_a", "", "red")
		if _, err := w.st.WriteFile(ctx, w.b, theirs.ID, "/attachments/plan.txt", []byte("globex plans"), store.FileMeta{}); err != nil {
			t.Fatal(err)
		}
		w.ok(t, "b", "PUT", "/v1/threads/"+theirs.ID+"/variables/REGION", map[string]any{"value": "globex-region"}, 200, nil)
		missing := store.NewID(store.PrefixThread)
		for _, id := range []string{theirs.ID, missing} {
			base := "/v1/threads/" + id
			for _, c := range []struct {
				method, path string
				body         any
			}{
				{"GET", base + "/files", nil},
				{"GET", base + "/files?path=/attachments", nil},
				{"GET", base + "/files/attachments/plan.txt", nil},
				{"GET", base + "/variables", nil},
				{"PUT", base + "/variables/REGION", map[string]any{"value": "acme-region"}},
				{"PUT", base + "/variables/NEW", map[string]any{"value": "x", "secret": true}},
				{"DELETE", base + "/variables/REGION", nil},
			} {
				problem(t, c.method+" "+c.path, w.do(t, "member", c.method, c.path, c.body), 404, server.CodeNotFound, "")
			}
			for _, c := range []struct{ method, path string }{
				{"GET", "/files"}, {"GET", "/files/attachments/plan.txt"}, {"GET", "/variables"}, {"PUT", "/variables/X"}, {"DELETE", "/variables/X"},
			} {
				bad := "/v1/threads/wsp_" + strings.TrimPrefix(id, "thr_") + c.path
				problem(t, c.method+" "+bad, w.do(t, "member", c.method, bad, `{"value": "x"}`), 400, server.CodeInvalidRequest, "path.id")
			}
		}
		var page threadPage
		w.ok(t, "member", "GET", "/v1/threads?tag=red&agent=agent_a", nil, 200, &page)
		if len(page.Threads) != 0 {
			t.Errorf("another workspace's threads listed: %v", page.Threads)
		}
		var vs variablesPage
		w.ok(t, "b", "GET", "/v1/threads/"+theirs.ID+"/variables", nil, 200, &vs)
		if len(vs.Variables) != 1 || vs.Variables[0]["value"] != "globex-region" {
			t.Errorf("the other workspace's variables after A's requests: %v", vs.Variables)
		}
		w.neverSaid(t, "globex plans")
	})
}

// TestThreadAPIDocument: the new endpoints are in the OpenAPI document, the download's path
// parameter under OpenAPI's name for it.
func TestThreadAPIDocument(t *testing.T) {
	paths := documentPaths(t, map[string][]string{
		"/v1/threads":                       {"get"},
		"/v1/threads/{id}/files":            {"get"},
		"/v1/threads/{id}/files/{path}":     {"get"},
		"/v1/threads/{id}/variables":        {"get"},
		"/v1/threads/{id}/variables/{name}": {"put", "delete"},
	})
	for p := range paths {
		if strings.Contains(p, "...") {
			t.Errorf("the document has Go's pattern %s", p)
		}
	}
	if !bytes.Contains(paths["/v1/threads/{id}/files/{path}"]["get"], []byte(`"application/octet-stream"`)) {
		t.Errorf("the download is not described as bytes: %s", paths["/v1/threads/{id}/files/{path}"]["get"])
	}
}
