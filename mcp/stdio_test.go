package mcp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/quiverhq/quiver"
	qmcp "github.com/quiverhq/quiver/mcp"
)

// A line a client gets wrong is answered with a JSON-RPC error and the session goes on: the
// SDK's own stdio transport ended the session (and quiver mcp stdio exited, dropping the
// answers in flight) at the first line that was not a message.
func TestStdioAnswersBadLinesAndGoesOn(t *testing.T) {
	const maxLine = 4 << 10
	cases := []struct {
		name    string
		version string
		line    string
		want    string // the error answer's start
	}{
		{"not JSON", "2025-06-18", `garbage`, `{"jsonrpc":"2.0","error":{"code":-32700,"message":"parse error: line 3 is not JSON: invalid character 'g'`},
		{"cut short", "2025-06-18", `{"jsonrpc":"2.0","id":9,"method":`, `{"jsonrpc":"2.0","error":{"code":-32700`},
		{"a number", "2025-06-18", `5`, `{"jsonrpc":"2.0","error":{"code":-32600,"message":"line 3 is not a JSON-RPC 2.0 message`},
		{"an object that is no message, id kept", "2025-06-18", `{"id":"x1","hello":1}`, `{"jsonrpc":"2.0","id":"x1","error":{"code":-32600`},
		{"a null id is not echoed", "2025-06-18", `{"id":null}`, `{"jsonrpc":"2.0","error":{"code":-32600`},
		{"longer than the cap", "2025-06-18", `{"jsonrpc":"2.0","id":9,"method":"ping","params":{"pad":"` + strings.Repeat("x", maxLine) + `"}}`, `{"jsonrpc":"2.0","error":{"code":-32600,"message":"line 3 is longer than 4096 bytes`},
		{"a batch where batches do not exist", "2025-06-18", `[{"jsonrpc":"2.0","id":9,"method":"ping"}]`, `{"jsonrpc":"2.0","error":{"code":-32600,"message":"line 3 is a batch: batches exist only in protocol versions 2024-11-05 and 2025-03-26"`},
		{"an empty batch", "2025-03-26", `[]`, `{"jsonrpc":"2.0","error":{"code":-32600,"message":"line 3 is an empty batch"`},
		{"a batch holding a bad message", "2025-03-26", `[{"jsonrpc":"2.0","id":9,"method":"ping"},{"x":1}]`, `{"jsonrpc":"2.0","error":{"code":-32600,"message":"line 3, message 2 of the batch`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := qmcp.NewServer(&quiver.Dispatcher{Registry: fixtureTools(t, &blockSignals{})}, nil)
			inR, inW := io.Pipe()
			outR, outW := io.Pipe()
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- srv.Run(ctx, qmcp.StdioTransport(inR, outW, maxLine)) }()
			t.Cleanup(func() { cancel(); inW.Close(); outR.Close(); <-done })
			go func() {
				fmt.Fprintf(inW, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`+"\n", c.version)
				io.WriteString(inW, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n\n")
				io.WriteString(inW, c.line+"\n")
				io.WriteString(inW, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"greet","arguments":{"name":"Ada"}}}`+"\n")
			}()
			lines := bufio.NewScanner(outR)
			lines.Buffer(nil, 1<<20)
			var got []string
			for len(got) < 3 && lines.Scan() {
				got = append(got, lines.Text())
			}
			if len(got) < 3 {
				t.Fatalf("the session ended after %d answers (%v): %q", len(got), lines.Err(), got)
			}
			// The error may come before the answer to initialize: the filter answers at once.
			byID := map[string]string{}
			for _, line := range got {
				var m struct{ ID json.RawMessage }
				_ = json.Unmarshal([]byte(line), &m)
				byID[string(m.ID)] = line
			}
			bad := byID[""]
			if strings.Contains(c.want, `"id":"x1"`) {
				bad = byID[`"x1"`]
			}
			if !strings.HasPrefix(bad, c.want) {
				t.Errorf("answers %q\nwant one starting with %s", got, c.want)
			}
			var call struct {
				Result struct {
					Content []struct{ Text string }
				}
			}
			if err := json.Unmarshal([]byte(byID["2"]), &call); err != nil || len(call.Result.Content) == 0 || call.Result.Content[0].Text != "Hello, Ada!" {
				t.Errorf("the call after the bad line was answered %q", byID["2"])
			}
		})
	}
}
