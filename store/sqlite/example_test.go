package sqlite_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/sqlite"
)

// Open a database, create a thread, append a call and its result ("persist the result, then
// advance"), and read them back.
func Example() {
	dir, err := os.MkdirTemp("", "quiver-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	s, err := sqlite.Open(filepath.Join(dir, "quiver.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	ctx := context.Background()
	const ws = "wsp_demo"
	th := &store.Thread{WorkspaceID: ws, AgentID: "agt_weather", UserID: "usr_ada"}
	if err := s.CreateThread(ctx, th); err != nil {
		log.Fatal(err)
	}

	// The model asks for a call.
	call := &store.Message{Role: store.RoleAssistant, Content: "Let me check.", ToolCalls: []store.ToolCall{
		{ID: "call_1", Name: "get_forecast", Args: json.RawMessage(`{"city":"Paris"}`)},
	}}
	if err := s.Append(ctx, ws, th.ID, call); err != nil {
		log.Fatal(err)
	}
	pending, err := s.PendingCalls(ctx, ws, th.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("pending:", pending[0].ID, pending[0].Name, string(pending[0].Args))

	// Its result is stored once; a second one is refused.
	result := &store.Message{Role: store.RoleTool, ToolCallID: "call_1", ToolName: "get_forecast",
		Result: &store.ToolResult{Status: "success", Text: "18°C, light rain"}}
	if err := s.Append(ctx, ws, th.ID, result); err != nil {
		log.Fatal(err)
	}
	again := &store.Message{Role: store.RoleTool, ToolCallID: "call_1", Result: &store.ToolResult{Status: "success"}}
	err = s.Append(ctx, ws, th.ID, again)
	fmt.Println("second result refused:", errors.Is(err, store.ErrResultExists))

	msgs, err := s.Messages(ctx, ws, th.ID, store.Page{})
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range msgs {
		switch m.Role {
		case store.RoleAssistant:
			fmt.Println(m.Seq, m.Role, m.Content, m.ToolCalls[0].Name)
		case store.RoleTool:
			fmt.Println(m.Seq, m.Role, m.ToolCallID, m.Result.Status, m.Result.Text)
		}
	}
	// Output:
	// pending: call_1 get_forecast {"city":"Paris"}
	// second result refused: true
	// 1 assistant Let me check. get_forecast
	// 2 tool call_1 success 18°C, light rain
}

// A database whose commits survive a power loss, not only a crash of the process.
func ExampleOpen_full() {
	s, err := sqlite.Open("quiver.db", sqlite.Options{Synchronous: "FULL"})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
}
