package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/quiverhq/quiver"
	qmcp "github.com/quiverhq/quiver/mcp"
)

// A resource that does not exist is answered with the code of the session's protocol version:
// -32002 up to 2025-11-25 (each of those versions' specification says so), -32602 from
// 2026-07-28 on, with the URI in the error's data; whether no resource serves the URI (the
// SDK's answer) or the thread file is missing (Quiver's). A URI refused for what it is stays
// invalid params at every version, and a read that fails an internal error.
func TestResourceNotFoundCodePerVersion(t *testing.T) {
	srv := qmcp.NewServer(&quiver.Dispatcher{Registry: &quiver.Registry{}}, &qmcp.ServerOptions{
		ThreadFiles: func(_ context.Context, _, path string) ([]byte, string, error) {
			if path == "/here.txt" {
				return []byte("hi"), "text/plain", nil
			}
			return nil, "", qmcp.ErrResourceNotFound
		},
	})
	reads := []struct {
		name, uri string
		code      func(version string) int64 // nil: a result
		uriData   bool
	}{
		{"a file that is there", "quiver://threads/thr_1/files/here.txt", nil, false},
		{"a missing thread file", "quiver://threads/thr_1/files/gone.txt", qmcp.ResourceNotFoundCode, true},
		{"a URI no resource serves", "test://no-such-resource", qmcp.ResourceNotFoundCode, true},
		{"a path out of the thread's files", "quiver://threads/thr_1/files/a/../b", func(string) int64 { return jsonrpc.CodeInvalidParams }, false},
	}
	want := map[string]int64{"2024-11-05": -32002, "2025-03-26": -32002, "2025-06-18": -32002, "2025-11-25": -32002, "2026-07-28": -32602}
	for _, version := range sdk.SupportedProtocolVersions() {
		t.Run(version, func(t *testing.T) {
			if got := qmcp.ResourceNotFoundCode(version); got != want[version] {
				t.Fatalf("ResourceNotFoundCode(%s) = %d, want %d", version, got, want[version])
			}
			send := stdioSession(t, srv)
			meta := ""
			if version >= "2026-07-28" {
				meta = fmt.Sprintf(`,"_meta":{"io.modelcontextprotocol/protocolVersion":%q,"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`, version)
			} else {
				init := send(fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`, version))
				if init["error"] != nil {
					t.Fatalf("initialize: %s", init["error"])
				}
				send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			}
			for i, r := range reads {
				answer := send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"resources/read","params":{"uri":%q%s}}`, i+2, r.uri, meta))
				if r.code == nil {
					if answer["result"] == nil {
						t.Errorf("%s: %s", r.name, answer["error"])
					}
					continue
				}
				var e struct {
					Code int64
					Data struct{ URI string }
				}
				if err := json.Unmarshal(answer["error"], &e); err != nil {
					t.Fatalf("%s: answer %v is no error: %v", r.name, answer, err)
				}
				if e.Code != r.code(version) {
					t.Errorf("%s at %s: code %d, want %d", r.name, version, e.Code, r.code(version))
				}
				if r.uriData && e.Data.URI != r.uri {
					t.Errorf("%s at %s: data %s, want the URI", r.name, version, answer["error"])
				}
			}
		})
	}
}

// A tools/call without a tool's name is invalid params at every version, said before anything
// is dispatched (the dispatcher looked the empty name up, and a journal refused its record,
// which the client heard as an internal error about a tool "" that ran).
func TestCallWithoutANameIsInvalidParams(t *testing.T) {
	srv := qmcp.NewServer(&quiver.Dispatcher{Registry: fixtureTools(t, &blockSignals{})}, nil)
	send := stdioSession(t, srv)
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	for i, params := range []string{`{"arguments":{}}`, `{"name":"","arguments":{"name":"v"}}`} {
		answer := send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":%s}`, i+2, params))
		var e struct {
			Code    int64
			Message string
		}
		if err := json.Unmarshal(answer["error"], &e); err != nil || e.Code != jsonrpc.CodeInvalidParams || !strings.Contains(e.Message, "params.name") {
			t.Errorf("%s: answered %v, want invalid params naming params.name", params, answer)
		}
	}
}
