package journal_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/journal"
	"github.com/quiverhq/quiver/store/sqlite"
)

// A server records each call it serves through a journal: Append returns once the record is in
// the journal's file, and the journal's writer stores it in the database moments later.
func Example() {
	dir, err := os.MkdirTemp("", "quiver-journal-example")
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
	th := &store.Thread{WorkspaceID: "wsp_example"}
	if err := st.CreateThread(ctx, th); err != nil {
		log.Fatal(err)
	}

	// Open stores first whatever a process that crashed left in the directory.
	j, err := journal.Open(ctx, filepath.Join(dir, "quiver.db.journal"), st, nil)
	if err != nil {
		log.Fatal(err)
	}
	err = j.Append(ctx, "wsp_example", th.ID,
		&store.Message{Role: store.RoleAssistant, ToolCalls: []store.ToolCall{{ID: "call_1", Name: "get_current_time"}}},
		&store.Message{Role: store.RoleTool, ToolCallID: "call_1", ToolName: "get_current_time",
			Result: &store.ToolResult{Status: "success", Text: "12:00 UTC"}})
	if err != nil {
		log.Fatal(err)
	}
	// Readers of the store see the record once the writer has stored it; Flush waits for that.
	if err := j.Flush(ctx); err != nil {
		log.Fatal(err)
	}
	msgs, err := st.Messages(ctx, "wsp_example", th.ID, store.Page{})
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range msgs {
		fmt.Printf("%d %s calls=%d answers=%q\n", m.Seq, m.Role, len(m.ToolCalls), m.ToolCallID)
	}
	// Close stores what is pending and removes the journal's files.
	if err := j.Close(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// 1 assistant calls=1 answers=""
	// 2 tool calls=0 answers="call_1"
}
