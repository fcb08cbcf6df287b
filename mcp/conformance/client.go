package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/mcp"
)

// scenarioCalls are the tools each client scenario expects the client to call (without the
// import prefix), with their arguments. Scenarios not listed only need the client to connect
// and list the tools, which importing does.
var scenarioCalls = map[string]struct {
	tool string
	args string
}{
	"tools_call":                          {"add_numbers", `{"a":5,"b":3}`},
	"elicitation-sep1034-client-defaults": {"test_client_elicitation_defaults", `{}`},
	"sse-retry":                           {"test_reconnection", `{}`},
}

// clientMetadataURL is the client ID metadata document URL Quiver presents in the auth
// scenarios; the suite's authorization servers accept it without fetching it.
const clientMetadataURL = "https://conformance-test.local/client-metadata.json"

// RunClient plays one client scenario of the suite against the server at url, the way Quiver
// uses remote servers: the server is imported (its tools registered under the prefix
// "conformance"), and the scenario's tool is called through a dispatcher. Elicitation requests
// are accepted with the schema's defaults. The auth/* scenarios run the OAuth flow of
// [mcp.OAuth] with a [mcp.Callbacks] on a loopback port, and a user agent that opens each
// authorization URL and follows the authorization server's redirect back to it; the suite's
// context (MCP_CONFORMANCE_CONTEXT) may name a client registered beforehand.
func RunClient(ctx context.Context, url, scenario string, logger *slog.Logger) error {
	reg := &quiver.Registry{Logger: slog.New(slog.DiscardHandler)}
	remote := mcp.Remote{Name: "conformance", URL: url, Timeout: 20 * time.Second}
	opts := &mcp.ImportOptions{
		Logger:     logger,
		ClientName: "quiver-conformance-client",
		Elicit: func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			// Accept without values: the SDK fills in the requested schema's defaults.
			return &sdk.ElicitResult{Action: "accept", Content: map[string]any{}}, nil
		},
		MaxBackoff:       time.Second,
		KeepAlive:        -1,
		AuthorizeTimeout: 20 * time.Second,
	}
	call, hasCall := scenarioCalls[scenario]
	if strings.HasPrefix(scenario, "auth/") {
		redirect, stop, err := serveCallbacks(ctx, opts, logger)
		if err != nil {
			return err
		}
		defer stop()
		remote.OAuth, err = oauthFromContext(os.Getenv("MCP_CONFORMANCE_CONTEXT"), redirect)
		if err != nil {
			return err
		}
		call, hasCall = struct{ tool, args string }{"test-tool", `{}`}, true
	}
	im, err := mcp.Import(ctx, reg, []mcp.Remote{remote}, opts)
	if err != nil {
		return err
	}
	defer im.Close()
	wctx, cancel := context.WithTimeout(ctx, 25*time.Second)
	defer cancel()
	if err := im.WaitConnected(wctx); err != nil {
		return err
	}
	if !hasCall {
		return nil
	}
	d := &quiver.Dispatcher{Registry: reg}
	r, err := d.Dispatch(ctx, quiver.Call{Name: "conformance." + call.tool, Args: json.RawMessage(call.args)})
	if err != nil {
		return err
	}
	if r.IsError() {
		return fmt.Errorf("calling %s: %s", call.tool, r.Error)
	}
	logger.Info("conformance client: call succeeded", "tool", call.tool, "result", r.ModelText())
	return nil
}

// oauthFromContext reads the scenario's context: {"client_id": ..., "client_secret": ...} for
// a client registered beforehand, or nothing.
func oauthFromContext(raw, redirect string) (*mcp.OAuth, error) {
	o := &mcp.OAuth{RedirectURL: redirect, ClientMetadataURL: clientMetadataURL}
	if raw == "" {
		return o, nil
	}
	var c struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
	}
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		return nil, fmt.Errorf("MCP_CONFORMANCE_CONTEXT is not the JSON object expected: %w", err)
	}
	o.ClientID, o.ClientSecret = c.ClientID, c.ClientSecret
	return o, nil
}

// serveCallbacks serves an mcp.Callbacks on a free loopback port and plays the user: each
// authorization URL is opened, and the authorization server's redirect followed back to the
// callback. It returns the redirect URL.
func serveCallbacks(ctx context.Context, opts *mcp.ImportOptions, logger *slog.Logger) (string, func(), error) {
	browser := &http.Client{Timeout: 10 * time.Second}
	cb := &mcp.Callbacks{Logger: logger}
	cb.OnPending = func(_, authURL string) {
		go func() {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, authURL, nil)
			if err != nil {
				logger.Error("conformance client: bad authorization URL", "err", err)
				return
			}
			resp, err := browser.Do(req)
			if err != nil {
				logger.Error("conformance client: opening the authorization URL failed", "err", err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}()
	}
	opts.Authorizer = cb
	return mcp.ListenForCallbacks(ctx, cb, "http://127.0.0.1:0/oauth/callback")
}
