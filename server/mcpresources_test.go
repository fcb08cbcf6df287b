package server_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/quiverhq/quiver/mcp"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/server"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/memstore"
)

// resourcesServer serves two workspaces over real HTTP, each with a thread holding a text
// file and a binary one; it returns the server's URL, a member key of each workspace and
// the id of each workspace's thread.
func resourcesServer(t *testing.T) (url, keyA, keyB, threadA, threadB string) {
	t.Helper()
	ctx := context.Background()
	st := memstore.New()
	t.Cleanup(func() { st.Close() })
	wsA, keyA := newMember(t, st, "alpha")
	wsB, keyB := newMember(t, st, "beta")
	for _, th := range []struct {
		ws string
		id *string
	}{{wsA, &threadA}, {wsB, &threadB}} {
		thr := &store.Thread{WorkspaceID: th.ws}
		mustDo(t, st.CreateThread(ctx, thr))
		*th.id = thr.ID
		_, err := st.WriteFile(ctx, th.ws, thr.ID, "/notes/hello.md", []byte("# hello from "+th.ws), store.FileMeta{MimeType: "text/markdown"})
		mustDo(t, err)
		_, err = st.WriteFile(ctx, th.ws, thr.ID, "/attachments/pixel.png", pngBytes, store.FileMeta{MimeType: "image/png"})
		mustDo(t, err)
	}
	p, err := platform.New(platform.Config{Store: st, Registry: testRegistry(t), Logger: slog.New(slog.DiscardHandler)})
	mustDo(t, err)
	sctx, cancel := context.WithCancel(ctx)
	srv, err := server.New(sctx, server.Config{Platform: p, Auth: &server.Authenticator{Keys: st}, Logger: slog.New(slog.DiscardHandler)})
	mustDo(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	mustDo(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(sctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })
	return "http://" + ln.Addr().String(), keyA, keyB, threadA, threadB
}

// pngBytes is the start of a PNG file: not UTF-8, so it is served as a blob.
var pngBytes = []byte{0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 0x0d, 'I', 'H', 'D', 'R', 0xff, 0xfe}

func fileURI(threadID, path string) string {
	return "quiver://threads/" + threadID + "/files/" + path
}

// TestMCPThreadFileResources: each workspace's MCP server lists the thread file template and
// the resources capability, lists no resource (a thread's files are unbounded), and reads a
// file of its workspace's threads: text as text, anything else as a blob, with the MIME type.
func TestMCPThreadFileResources(t *testing.T) {
	url, keyA, _, threadA, _ := resourcesServer(t)
	ctx := context.Background()
	cs := promptsSession(t, url, keyA)
	if caps := cs.InitializeResult().Capabilities; caps.Resources == nil {
		t.Errorf("capabilities %+v: no resources", caps)
	}
	tl, err := cs.ListResourceTemplates(ctx, nil)
	mustDo(t, err)
	if len(tl.ResourceTemplates) != 1 || tl.ResourceTemplates[0].URITemplate != mcp.ThreadFileTemplate {
		t.Fatalf("templates: %+v, want one, %s", tl.ResourceTemplates, mcp.ThreadFileTemplate)
	}
	rl, err := cs.ListResources(ctx, nil)
	mustDo(t, err)
	if len(rl.Resources) != 0 {
		t.Errorf("resources/list: %+v, want none", rl.Resources)
	}

	uri := fileURI(threadA, "notes/hello.md")
	res, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: uri})
	mustDo(t, err)
	if len(res.Contents) != 1 {
		t.Fatalf("contents: %+v", res.Contents)
	}
	if c := res.Contents[0]; c.URI != uri || c.MIMEType != "text/markdown" || !strings.HasPrefix(c.Text, "# hello from ") || c.Blob != nil {
		t.Errorf("text file: %+v", c)
	}

	uri = fileURI(threadA, "attachments/pixel.png")
	res, err = cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: uri})
	mustDo(t, err)
	if c := res.Contents[0]; c.URI != uri || c.MIMEType != "image/png" || c.Text != "" || !bytes.Equal(c.Blob, pngBytes) {
		t.Errorf("binary file: %+v", c)
	}
}

// TestMCPThreadFileResourcesRefused: a file of another workspace's thread is not found, exactly
// as a missing file or thread is (nothing tells them apart); a path with a . or .. segment,
// escaped or not, is refused before anything is read; and without a key there is no session.
func TestMCPThreadFileResourcesRefused(t *testing.T) {
	url, keyA, keyB, threadA, threadB := resourcesServer(t)
	ctx := context.Background()
	cs := promptsSession(t, url, keyA)

	notFound := map[string]string{
		"another workspace's thread": fileURI(threadB, "notes/hello.md"),
		"a missing file":             fileURI(threadA, "notes/nothing.md"),
		"a missing thread":           fileURI("thr_00000000000000000000000000", "notes/hello.md"),
	}
	var messages []string
	// A resource not found has the code of the session's protocol version (-32002 up to
	// 2025-11-25, which the go-sdk's client negotiates here) and the go-sdk's message.
	version := cs.InitializeResult().ProtocolVersion
	for what, uri := range notFound {
		_, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: uri})
		var we *jsonrpc.Error
		if !errors.As(err, &we) || we.Code != mcp.ResourceNotFoundCode(version) || we.Message != "Resource not found" {
			t.Errorf("%s (%s): %v, want resource not found with code %d (%s)", what, uri, err, mcp.ResourceNotFoundCode(version), version)
			continue
		}
		if strings.Contains(we.Message, "beta") || strings.Contains(we.Message, "hello") {
			t.Errorf("%s: %q says too much", what, we.Message)
		}
		messages = append(messages, we.Message)
	}
	if len(messages) != len(notFound) {
		t.Fatalf("%d of %d reads said resource not found", len(messages), len(notFound))
	}
	for _, m := range messages[1:] {
		if m != messages[0] {
			t.Errorf("not-found messages differ: %q", messages)
		}
	}

	for _, path := range []string{"../" + threadB + "/files/notes/hello.md", "notes/../notes/hello.md", "%2e%2e/x", "notes/./hello.md", "notes/%2E%2E/hello.md"} {
		uri := fileURI(threadA, path)
		_, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: uri})
		var we *jsonrpc.Error
		if !errors.As(err, &we) || we.Code != jsonrpc.CodeInvalidParams {
			t.Errorf("%s: %v, want the path refused", uri, err)
		} else if !strings.Contains(we.Message, "..") {
			t.Errorf("%s: %q does not say why", uri, we.Message)
		}
	}

	// The other workspace reads its own file.
	res, err := promptsSession(t, url, keyB).ReadResource(ctx, &sdk.ReadResourceParams{URI: fileURI(threadB, "notes/hello.md")})
	mustDo(t, err)
	if !strings.Contains(res.Contents[0].Text, "hello") {
		t.Errorf("workspace B's own file: %+v", res.Contents[0])
	}

	// Without a key: no session, nothing read.
	_, err = sdk.NewClient(&sdk.Implementation{Name: "no-key", Version: "1"}, nil).Connect(ctx,
		&sdk.StreamableClientTransport{Endpoint: url + "/mcp", MaxRetries: -1}, nil)
	if err == nil {
		t.Error("a client without a key connected")
	}
	for _, k := range []string{"", "qk_not_a_key"} {
		req, _ := http.NewRequest(http.MethodPost, url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"`+fileURI(threadA, "notes/hello.md")+`"}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if k != "" {
			req.Header.Set("Authorization", "Bearer "+k)
		}
		resp, err := http.DefaultClient.Do(req)
		mustDo(t, err)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("key %q: status %d, want 401", k, resp.StatusCode)
		}
	}
}
