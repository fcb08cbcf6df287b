package server_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/config"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/server"
	"github.com/quiverhq/quiver/store/sqlite"
)

// A server offers a platform's tools over MCP and /v1; the platform records every call in the
// store, here through a journal beside the SQLite file, as quiver serve does. (Serve or
// ListenAndServe run it on an address; the example mounts its handler on a test server.)
func ExampleNew() {
	dir, err := os.MkdirTemp("", "quiver-server-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()

	st, err := sqlite.Open(filepath.Join(dir, "quiver.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	reg := &quiver.Registry{}
	type greetArgs struct {
		Name string `json:"name" minLength:"1"`
	}
	reg.Register(quiver.Func("greet", "Greets someone by name.", func(_ context.Context, a greetArgs) (string, error) {
		return "Hello, " + a.Name + "!", nil
	}))
	p, err := platform.New(platform.Config{Store: st, Registry: reg})
	if err != nil {
		log.Fatal(err)
	}
	if err := p.OpenJournal(ctx, filepath.Join(dir, "quiver.db.journal")); err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	srv, err := server.New(ctx, server.Config{Platform: p, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()

	cs, err := sdk.NewClient(&sdk.Implementation{Name: "example", Version: "1"}, nil).
		Connect(ctx, &sdk.StreamableClientTransport{Endpoint: ts.URL + "/mcp"}, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "greet", Arguments: map[string]any{"name": "Ada"}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Content[0].(*sdk.TextContent).Text)
	res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "greet", Arguments: map[string]any{"name": ""}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("error result:", res.IsError)

	// Both calls are recorded in the session's thread once the journal's writer has stored them.
	if err := p.Flush(ctx); err != nil {
		log.Fatal(err)
	}
	db, err := sql.Open("sqlite", filepath.Join(dir, "quiver.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM messages WHERE role = 'tool'`).Scan(&n); err != nil {
		log.Fatal(err)
	}
	fmt.Println("recorded results:", n)
	// Output:
	// Hello, Ada!
	// error result: true
	// recorded results: 2
}

// A server that also takes the access tokens of an OpenID Connect provider: members of the
// provider's "engineering" group act as members of one workspace, beside the server's API
// keys. The provider is read when the first token arrives; until then nothing is fetched.
func ExampleTokenAuth() {
	dir, err := os.MkdirTemp("", "quiver-token-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	st, err := sqlite.Open(filepath.Join(dir, "quiver.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	tokens := &server.TokenAuth{
		Issuer:    "https://id.example.com/",
		Audiences: []string{"https://quiver.example.com/mcp"},
		Rules:     []config.ClaimRule{{Claim: "groups", Value: "engineering", Workspace: "wsp_engineering", Role: "member"}},
		Users:     st,
	}
	if err := tokens.Check(); err != nil {
		log.Fatal(err)
	}
	auth := &server.Authenticator{Keys: st, Tokens: tokens}
	_ = auth // server.Config{Auth: auth, ...}
	fmt.Println(tokens.MetadataURL())
	// Output: https://quiver.example.com/.well-known/oauth-protected-resource/mcp
}
