package memstore_test

import (
	"context"
	"fmt"
	"log"

	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/memstore"
)

// Create a thread in a store held in memory, append to it and read it back.
func Example() {
	s := memstore.New()
	defer s.Close()

	ctx := context.Background()
	const ws = "wsp_demo"
	th := &store.Thread{WorkspaceID: ws, AgentID: "agt_weather"}
	if err := s.CreateThread(ctx, th); err != nil {
		log.Fatal(err)
	}
	err := s.Append(ctx, ws, th.ID,
		&store.Message{Role: store.RoleUser, Content: "Will it rain in Paris?"},
		&store.Message{Role: store.RoleAssistant, Content: "Light rain, 18°C."})
	if err != nil {
		log.Fatal(err)
	}

	msgs, err := s.Messages(ctx, ws, th.ID, store.Page{})
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range msgs {
		fmt.Println(m.Seq, m.Role, m.Content)
	}
	// Output:
	// 1 user Will it rain in Paris?
	// 2 assistant Light rain, 18°C.
}
