package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/quiverhq/quiver/store"
)

// SharedStore is what Bench measures: a store with every part whose SQL the backends share.
type SharedStore interface {
	store.Store
	store.Entities
	store.Files
	store.Variables
}

// Bench measures, as sub-benchmarks, the most frequent operation of each part of a store that
// is not the thread history: resolving a tool's version, reading and writing a thread's file,
// appending a call's result with its output written to the thread's state (beside the same
// result appended alone), and reading the variables a call on a child thread resolves. A
// backend's benchmark calls it with a fresh store; comparing one build with another shows what
// a change to the shared SQL costs.
func Bench(b *testing.B, s SharedStore) {
	ctx := context.Background()
	const ws = "wsp_bench"
	must := func(err error) {
		b.Helper()
		if err != nil {
			b.Fatal(err)
		}
	}
	w := &store.Workspace{ID: ws, Name: "bench"}
	must(s.CreateWorkspace(ctx, w))
	schema := &store.Schema{WorkspaceID: ws, Content: json.RawMessage(`{"type":"object"}`)}
	must(s.CreateSchema(ctx, schema))
	fn := &store.Function{WorkspaceID: ws, Name: "echo"}
	must(s.CreateFunction(ctx, fn))
	must(s.CreateFunctionVersion(ctx, &store.FunctionVersion{WorkspaceID: ws, FunctionID: fn.ID, Code: "return args"}))
	tool := &store.Tool{WorkspaceID: ws, Name: "echo", Target: store.TargetServer, FunctionID: fn.ID,
		InputSchemaID: schema.ID, OutputSchemaID: schema.ID, Enabled: true}
	must(s.CreateTool(ctx, tool))

	parent := &store.Thread{WorkspaceID: ws}
	must(s.CreateThread(ctx, parent))
	child := &store.Thread{WorkspaceID: ws, ParentID: parent.ID}
	must(s.CreateThread(ctx, child))
	var values []*store.Variable
	for _, name := range []string{"city", "units", "api_key", "lang"} {
		values = append(values,
			&store.Variable{WorkspaceID: ws, Layer: store.LayerThread, OwnerID: parent.ID, Name: name, Value: "p"},
			&store.Variable{WorkspaceID: ws, Layer: store.LayerAgent, OwnerID: "agt_bench", Name: name, Value: "a"},
			&store.Variable{WorkspaceID: ws, Layer: store.LayerInstance, Name: name, Value: "i"})
	}
	must(s.SetVariables(ctx, values))
	data := []byte(strings.Repeat("0123456789abcdef", 64)) // 1 KiB
	_, err := s.WriteFile(ctx, ws, child.ID, "/notes/today.txt", data, store.FileMeta{})
	must(err)

	b.Run("ResolveToolVersion", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			_, err := s.ResolveToolVersion(ctx, ws, tool.ID)
			must(err)
		}
	})
	b.Run("ReadFile", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			_, _, err := s.ReadFile(ctx, ws, child.ID, "/notes/today.txt")
			must(err)
		}
	})
	b.Run("WriteFile", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			_, err := s.WriteFile(ctx, ws, child.ID, "/notes/today.txt", data, store.FileMeta{})
			must(err)
		}
	})
	// A call's result appended alone, and with its output written to the thread's state: what
	// _outputPath adds to a call. The calls are asked for a hundred at a time, off the clock,
	// and each thread takes a thousand results, so that its state stays small (20 KB at most).
	results := func(b *testing.B, appendResult func(threadID, callID string) error) {
		var threadID string
		b.ReportAllocs()
		for i := range b.N {
			if i%100 == 0 {
				b.StopTimer()
				if i%1000 == 0 {
					th := &store.Thread{WorkspaceID: ws}
					if err := s.CreateThread(ctx, th); err != nil {
						b.Fatal(err)
					}
					threadID = th.ID
				}
				calls := &store.Message{Role: store.RoleAssistant}
				for j := range 100 {
					calls.ToolCalls = append(calls.ToolCalls, store.ToolCall{ID: fmt.Sprintf("c%d", i+j), Name: "echo"})
				}
				if err := s.Append(ctx, ws, threadID, calls); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			if err := appendResult(threadID, fmt.Sprintf("c%d", i)); err != nil {
				b.Fatal(err)
			}
		}
	}
	result := func(callID string) *store.Message {
		return &store.Message{Role: store.RoleTool, ToolCallID: callID, ToolName: "echo",
			Result: &store.ToolResult{Status: "success", Value: json.RawMessage(`{"ok":true}`)}}
	}
	b.Run("AppendResult", func(b *testing.B) {
		results(b, func(threadID, callID string) error { return s.Append(ctx, ws, threadID, result(callID)) })
	})
	b.Run("AppendStateResult", func(b *testing.B) {
		results(b, func(threadID, callID string) error {
			w := &store.StateWrite{Paths: []string{"/out/" + callID}, Value: json.RawMessage(`{"ok":true}`)}
			return s.AppendState(ctx, ws, threadID, w, result(callID))
		})
	})
	b.Run("LookupVariables", func(b *testing.B) {
		q := store.VariableQuery{ThreadID: child.ID, AgentID: "agt_bench", Names: []string{"city", "api_key"}}
		b.ReportAllocs()
		for range b.N {
			l, err := s.LookupVariables(ctx, ws, q)
			must(err)
			if len(l.Threads) != 2 || len(l.Values) != 6 {
				b.Fatalf("lookup: %d threads, %d values", len(l.Threads), len(l.Values))
			}
		}
	})
}
