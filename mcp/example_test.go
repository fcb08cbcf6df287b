package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/quiverhq/quiver"
	qmcp "github.com/quiverhq/quiver/mcp"
)

// Serve a Quiver tool set over streamable HTTP and call it with the official SDK client.
// Every call goes through the dispatcher: here its argument validation rejects a bad call.
func ExampleNewServer() {
	type args struct {
		City string `json:"city" description:"city name" minLength:"1"`
	}
	reg := &quiver.Registry{}
	reg.Register(quiver.Func("weather", "Current weather in a city.", func(_ context.Context, a args) (string, error) {
		return "Sunny in " + a.City, nil
	}))
	d := &quiver.Dispatcher{Registry: reg, Confirm: qmcp.Confirm(nil)}
	srv := qmcp.NewServer(d, nil)
	ts := httptest.NewServer(srv.HTTPHandler(nil)) // mount at /mcp in a real server
	defer ts.Close()
	defer srv.Close()

	ctx := context.Background()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "example", Version: "1"}, nil).
		Connect(ctx, &sdk.StreamableClientTransport{Endpoint: ts.URL}, nil)
	if err != nil {
		panic(err)
	}
	defer cs.Close()
	for _, a := range []map[string]any{{"city": "Paris"}, {"city": ""}} {
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "weather", Arguments: a})
		if err != nil {
			panic(err)
		}
		fmt.Println(res.IsError, res.Content[0].(*sdk.TextContent).Text)
	}
	// Output:
	// false Sunny in Paris
	// true invalid arguments for weather: /city: minimum length 1, got 0. Correct them and call the tool again.
}

// Import the tools of a remote MCP server under a prefix and call one through a dispatcher,
// with Quiver's policy and validation.
func ExampleImport() {
	// A remote MCP server (another Quiver here; any MCP server over stdio or HTTP works).
	remoteReg := &quiver.Registry{}
	remoteReg.Register(quiver.Func("echo", "Echoes its text.", func(_ context.Context, a struct {
		Text string `json:"text"`
	}) (string, error) {
		return a.Text, nil
	}))
	remote := qmcp.NewServer(&quiver.Dispatcher{Registry: remoteReg}, nil)
	ts := httptest.NewServer(remote.HTTPHandler(nil))
	defer ts.Close()
	defer remote.Close()

	ctx := context.Background()
	// Imported names contain a dot, outside the snake_case convention: a registry warns about
	// such names (and providers that reject dots see a mapped name). Silence it here.
	reg := &quiver.Registry{Logger: slog.New(slog.DiscardHandler)}
	im, err := qmcp.Import(ctx, reg, []qmcp.Remote{{Name: "everything", URL: ts.URL}}, nil)
	if err != nil {
		panic(err)
	}
	defer im.Close()
	for _, t := range reg.Tools() {
		fmt.Println(t.Name())
	}
	d := &quiver.Dispatcher{Registry: reg}
	res, _ := d.Dispatch(ctx, quiver.Call{Name: "everything.echo", Args: json.RawMessage(`{"text":"hello"}`)})
	fmt.Println(res.Text)
	// Output:
	// everything.echo
	// hello
}

// Receive users back from an authorization server. Callbacks is the Authorizer that
// [qmcp.Import] hands each authorization URL to, and the handler of the redirect URL: here a
// browser is played by an HTTP GET of the redirect the authorization server would send.
func ExampleCallbacks() {
	cb := &qmcp.Callbacks{Logger: slog.New(slog.DiscardHandler)}
	redirect, stop, err := qmcp.ListenForCallbacks(context.Background(), cb, "http://127.0.0.1:0/oauth/callback")
	if err != nil {
		panic(err)
	}
	defer stop()
	cb.OnPending = func(remote, authURL string) {
		// A user opens authURL, approves, and the authorization server redirects them:
		go func() {
			if resp, err := http.Get(redirect + "?code=the-code&state=xyz"); err == nil {
				resp.Body.Close()
			}
		}()
	}
	res, err := cb.Authorize(context.Background(), "tracker", "https://as.example.com/authorize?state=xyz")
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Code, res.State)
	// Output: the-code xyz
}

// Confirm puts a call that requires confirmation to the client's user. The SDK's client speaks
// the sessionless protocol (2026-07-28) by default: the server answers the call with the
// question, the client's elicitation handler answers it, and the client calls again with the
// answer, all inside CallTool. A client of a session is asked in the middle of the call instead.
func ExampleConfirm() {
	reg := &quiver.Registry{}
	reg.Register(quiver.Func("delete_branch", "Deletes a branch.", func(_ context.Context, a struct {
		Branch string `json:"branch"`
	}) (string, error) {
		return "deleted " + a.Branch, nil
	}, quiver.WithConfirmation()))
	d := &quiver.Dispatcher{Registry: reg, Confirm: qmcp.Confirm(nil)}
	srv := qmcp.NewServer(d, nil)
	ts := httptest.NewServer(srv.HTTPHandler(nil))
	defer ts.Close()
	defer srv.Close()

	ctx := context.Background()
	client := sdk.NewClient(&sdk.Implementation{Name: "example", Version: "1"}, &sdk.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			fmt.Println("asked:", strings.SplitN(req.Params.Message, "\n", 2)[0])
			return &sdk.ElicitResult{Action: "accept"}, nil
		},
	})
	cs, err := client.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: ts.URL}, nil)
	if err != nil {
		panic(err)
	}
	defer cs.Close()
	fmt.Println("protocol:", cs.InitializeResult().ProtocolVersion)
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "delete_branch", Arguments: map[string]any{"branch": "old"}})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.IsError, res.Content[0].(*sdk.TextContent).Text)
	// Output:
	// protocol: 2026-07-28
	// asked: Allow the tool delete_branch to run with these arguments?
	// false deleted old
}
