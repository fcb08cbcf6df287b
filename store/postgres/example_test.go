package postgres_test

import (
	"context"
	"fmt"
	"log"

	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/postgres"
)

// Example opens a store, creates a thread, appends an assistant message with a tool call and
// the call's result, and reads the history back. It needs a PostgreSQL server, so it has no
// Output comment: go test compiles it but does not run it.
func Example() {
	ctx := context.Background()
	s, err := postgres.Open(ctx, "postgres://postgres@127.0.0.1:5432/quiver?sslmode=disable")
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	th := &store.Thread{WorkspaceID: "wsp_demo", AgentID: "agent_weather"}
	if err := s.CreateThread(ctx, th); err != nil {
		log.Fatal(err)
	}
	err = s.Append(ctx, th.WorkspaceID, th.ID,
		&store.Message{Role: store.RoleUser, Content: "Weather in Paris?"},
		&store.Message{Role: store.RoleAssistant, ToolCalls: []store.ToolCall{
			{ID: "call_1", Name: "get_forecast", Args: []byte(`{"city":"Paris"}`)},
		}})
	if err != nil {
		log.Fatal(err)
	}
	// Persist the result, then advance: a second result for call_1 fails with
	// store.ErrResultExists, which is what makes a resumed run skip the call.
	err = s.Append(ctx, th.WorkspaceID, th.ID, &store.Message{Role: store.RoleTool, ToolCallID: "call_1",
		ToolName: "get_forecast", Result: &store.ToolResult{Status: "success", Text: "Sunny, 24°C"}})
	if err != nil {
		log.Fatal(err)
	}

	msgs, err := s.Messages(ctx, th.WorkspaceID, th.ID, store.Page{Limit: 100})
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range msgs {
		fmt.Println(m.Seq, m.Role, m.Content, m.ToolCallID)
	}
}
