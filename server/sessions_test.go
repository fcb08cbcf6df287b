package server_test

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/quiverhq/quiver/server"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/sqlite"
)

// An MCP session outlives a restart of its server: the client goes on with the same session
// id, its calls recorded in the same thread, and a DELETE closes it for good.
func TestSessionsOutliveARestart(t *testing.T) {
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "quiver.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	serve := func(ln net.Listener) (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		srv, err := server.New(ctx, server.Config{Platform: newPlatform(t, db, testRegistry(t)), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- srv.Serve(ctx, ln) }()
		return func() { cancel(); <-done }
	}
	stop := serve(ln)
	ctx := context.Background()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "restarts", Version: "1"}, nil).
		Connect(ctx, &sdk.StreamableClientTransport{Endpoint: "http://" + addr + "/mcp"}, &sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	call := func(text string) {
		t.Helper()
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": text}})
		if err != nil || res.IsError {
			t.Fatalf("echo %q: %+v, %v", text, res, err)
		}
	}
	call("before")
	stop()

	ln, err = net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listening again on %s: %v", addr, err)
	}
	stop = serve(ln)
	defer stop()
	call("after")
	threads, _, err := db.Threads(ctx, "wsp_local", store.ThreadFilter{Tag: "mcp"})
	if err != nil || len(threads) != 1 {
		t.Fatalf("threads of MCP sessions: %d, %v; want the one session's", len(threads), err)
	}
	msgs, err := db.Messages(ctx, "wsp_local", threads[0].ID, store.Page{})
	if err != nil || len(msgs) != 4 {
		t.Fatalf("the session's thread holds %d messages (%v), want both calls and their results (4)", len(msgs), err)
	}

	id := cs.ID()
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/mcp", nil)
	req.Header.Set("Mcp-Session-Id", id)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("a request of the closed session: %d, want 404", resp.StatusCode)
	}
}
