package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
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

// RunClient plays one client scenario of the suite against the server at url, the way Quiver
// uses remote servers: the server is imported (its tools registered under the prefix
// "conformance"), and the scenario's tool is called through a dispatcher. Elicitation requests
// are accepted with the schema's defaults.
func RunClient(ctx context.Context, url, scenario string, logger *slog.Logger) error {
	reg := &quiver.Registry{Logger: slog.New(slog.DiscardHandler)}
	im, err := mcp.Import(ctx, reg, []mcp.Remote{{Name: "conformance", URL: url, Timeout: 20 * time.Second}}, &mcp.ImportOptions{
		Logger:     logger,
		ClientName: "quiver-conformance-client",
		Elicit: func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			// Accept without values: the SDK fills in the requested schema's defaults.
			return &sdk.ElicitResult{Action: "accept", Content: map[string]any{}}, nil
		},
		MaxBackoff: time.Second,
		KeepAlive:  -1,
	})
	if err != nil {
		return err
	}
	defer im.Close()
	st := im.Status()[0]
	if !st.Connected {
		return fmt.Errorf("connecting to %s: %s", url, st.LastError)
	}
	call, ok := scenarioCalls[scenario]
	if !ok {
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
