package mcp_test

import (
	"encoding/json"
	"testing"

	"github.com/quiverhq/quiver"
	qmcp "github.com/quiverhq/quiver/mcp"
)

// A result's metadata (run_code's duration and console output, say) is an MCP answer's _meta,
// on success and on error, and an imported tool's _meta becomes its result's metadata again:
// a Quiver behind another loses none of it. An error's code is in the answer's _meta, and not
// in the imported result's metadata.
func TestResultMetaIsMCPMeta(t *testing.T) {
	tests := []struct {
		name   string
		result *quiver.Result
		meta   string // the _meta of the answer; "" for none
		back   string // the imported result's metadata
	}{
		{"success", &quiver.Result{Status: quiver.StatusSuccess, Value: json.RawMessage(`42`), Meta: json.RawMessage(`{"duration_ms":1.5}`)},
			`{"duration_ms":1.5}`, `{"duration_ms":1.5}`},
		{"error", &quiver.Result{Status: quiver.StatusError, Code: quiver.CodeToolError, Error: "the code ended with status memory",
			Meta: json.RawMessage(`{"status":"memory","logs":[{"level":"log","text":"a"}]}`)},
			`{"io.quiver/code":"tool_error","logs":[{"level":"log","text":"a"}],"status":"memory"}`, `{"logs":[{"level":"log","text":"a"}],"status":"memory"}`},
		{"error without metadata", &quiver.Result{Status: quiver.StatusError, Code: quiver.CodeNotEntitled, Error: "no tool"},
			`{"io.quiver/code":"not_entitled"}`, ""},
		{"none", &quiver.Result{Status: quiver.StatusSuccess, Text: "hi"}, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			answer := qmcp.ToResult(tt.result)
			b, err := json.Marshal(answer)
			if err != nil {
				t.Fatal(err)
			}
			var wire struct {
				Meta json.RawMessage `json:"_meta"`
			}
			if err := json.Unmarshal(b, &wire); err != nil {
				t.Fatal(err)
			}
			if string(wire.Meta) != tt.meta {
				t.Errorf("_meta %s, want %s (the answer: %s)", wire.Meta, tt.meta, b)
			}
			back := qmcp.FromResult(answer)
			if string(back.Meta) != tt.back {
				t.Errorf("imported back, the metadata is %s, want %s", back.Meta, tt.back)
			}
		})
	}
}
