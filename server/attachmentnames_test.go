package server_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/internal/apicontract"
	"github.com/quiverhq/quiver/internal/backendtest"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/server"
	"github.com/quiverhq/quiver/store"
)

// storedAttachment is the path the store gives an attachment: of its own making, so that
// paths never collide.
var storedAttachment = regexp.MustCompile(`^/attachments/\d{8}T\d{6}\.\d{3}Z-[0-9a-z]{13}\.[a-z0-9]+$`)

// TestAttachmentKeepsItsName (issue 49): a tool's attachment keeps the name the tool gave it
// wherever it is returned or listed: the reference in the result (/v1 and MCP, where it is
// the resource link's name), the stored message, GET /v1/threads/{id}/files (original_name)
// and the download's Content-Disposition. Its path stays one of the store's making: two
// attachments of one name are two files. On SQLite and PostgreSQL, over real HTTP.
func TestAttachmentKeepsItsName(t *testing.T) {
	cases := []struct {
		name  string
		given []string // the names the tool gives its attachments
		kept  []string // the names every door shows
	}{
		{"the seed's chart", []string{"chart.png"}, []string{"chart.png"}},
		{"one name twice", []string{"chart.png", "chart.png"}, []string{"chart.png", "chart.png"}},
		{"spaces, capitals and another script", []string{"Quarterly report (final).PDF", "график.svg"},
			[]string{"Quarterly report (final).PDF", "график.svg"}},
	}
	backendtest.Each(t, func(t *testing.T, st backendtest.Store) {
		base, key := attachmentServer(t, st)
		cs := promptsSession(t, base, key)
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				args := map[string]any{"names": c.given}
				// /v1: the reference in the result.
				var called struct {
					ThreadID string        `json:"thread_id"`
					Result   quiver.Result `json:"result"`
				}
				apiJSON(t, base, key, "POST", "/v1/tools/draw/call", map[string]any{"args": args}, &called)
				paths := checkRefs(t, "/v1", called.Result.Attachments, c.kept)
				// The stored message carries the same reference.
				var msgs struct {
					Messages []store.Message `json:"messages"`
				}
				apiJSON(t, base, key, "GET", "/v1/threads/"+called.ThreadID+"/messages", nil, &msgs)
				var stored []quiver.Attachment
				for _, m := range msgs.Messages {
					if m.Result != nil && len(m.Result.Attachments) > 0 {
						mustDo(t, json.Unmarshal(m.Result.Attachments, &stored))
					}
				}
				checkRefs(t, "the stored message", stored, c.kept)
				// The thread's files list the name, and the download is saved under it.
				var listed filesPage
				apiJSON(t, base, key, "GET", "/v1/threads/"+called.ThreadID+"/files?path=/attachments", nil, &listed)
				byPath := map[string]*store.FileInfo{}
				for _, f := range listed.Files {
					byPath[f.Path] = f
				}
				for i, p := range paths {
					if f := byPath[p]; f == nil || f.OriginalName != c.kept[i] || f.Name != store.BaseName(p) {
						t.Errorf("GET files lists %s as %+v; want original_name %q", p, f, c.kept[i])
					}
					res := apiDo(t, base, key, "GET", "/v1/threads/"+called.ThreadID+"/files"+p, nil)
					_, params, err := mime.ParseMediaType(res.Header.Get("Content-Disposition"))
					if res.StatusCode != 200 || err != nil || params["filename"] != c.kept[i] {
						t.Errorf("download of %s: %d, Content-Disposition %q; want the filename %q", p, res.StatusCode,
							res.Header.Get("Content-Disposition"), c.kept[i])
					}
				}
				// MCP: the result's resource links are named so.
				raw, err := json.Marshal(args)
				mustDo(t, err)
				res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "draw", Arguments: json.RawMessage(raw)})
				mustDo(t, err)
				var links []quiver.Attachment
				for _, ct := range res.Content {
					if l, ok := ct.(*sdk.ResourceLink); ok {
						links = append(links, quiver.Attachment{Path: strings.TrimPrefix(l.URI, "quiver://files"), Name: l.Name, MimeType: l.MIMEType})
					}
				}
				checkRefs(t, "MCP", links, c.kept)
			})
		}
	})
}

// checkRefs checks that refs are references named kept, each at a path of its own of the
// store's making, and returns their paths.
func checkRefs(t *testing.T, door string, refs []quiver.Attachment, kept []string) []string {
	t.Helper()
	if len(refs) != len(kept) {
		t.Fatalf("%s: %d attachments %+v, want %d", door, len(refs), refs, len(kept))
	}
	var paths []string
	seen := map[string]bool{}
	for i, a := range refs {
		if a.Name != kept[i] || !storedAttachment.MatchString(a.Path) || seen[a.Path] {
			t.Errorf("%s: attachment %d is %+v; want the name %q at a path of its own like /attachments/<time>-<random>.<ext>", door, i, a, kept[i])
		}
		seen[a.Path] = true
		paths = append(paths, a.Path)
	}
	return paths
}

// attachmentServer serves, over HTTP on 127.0.0.1, a platform on st whose tool draw returns an
// attachment of each name it is given; it returns the server's URL and a member's key.
func attachmentServer(t *testing.T, st backendtest.Store) (base, key string) {
	t.Helper()
	_, key = newMember(t, st, "charts")
	backend, ok := st.(store.Backend)
	if !ok {
		t.Fatalf("%T is not a whole backend", st)
	}
	png := base64.StdEncoding.EncodeToString(pngBytes)
	reg := &quiver.Registry{}
	mustDo(t, reg.Register(quiver.Func("draw", "Draws charts.", func(_ context.Context, in struct {
		Names []string `json:"names"`
	}) (*quiver.Result, error) {
		r := &quiver.Result{Text: "drawn"}
		for _, n := range in.Names {
			r.Attachments = append(r.Attachments, quiver.Attachment{Name: n, MimeType: "image/png", Data: png})
		}
		return r, nil
	})))
	p, err := platform.New(platform.Config{Store: backend, Registry: reg, Logger: slog.New(slog.DiscardHandler)})
	mustDo(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := server.New(ctx, server.Config{Platform: p, Auth: &server.Authenticator{Keys: backend}, Logger: slog.New(slog.DiscardHandler)})
	mustDo(t, err)
	ts := httptest.NewServer(apicontract.Handler(t, srv.Handler()))
	t.Cleanup(func() { cancel(); ts.Close(); srv.Close(); _ = p.Close() })
	return ts.URL, key
}

func apiDo(t *testing.T, base, key, method, path string, body any) *http.Response {
	t.Helper()
	res, _ := sendAPI(t, http.DefaultClient, method, base+path, key, body)
	return res
}

func apiJSON(t *testing.T, base, key, method, path string, body, out any) {
	t.Helper()
	u, err := url.Parse(base + path)
	mustDo(t, err)
	res, data := sendAPI(t, http.DefaultClient, method, u.String(), key, body)
	if res.StatusCode/100 != 2 {
		t.Fatalf("%s %s: %d %s", method, path, res.StatusCode, data)
	}
	mustDo(t, json.Unmarshal(data, out))
}
