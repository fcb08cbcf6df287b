package scripted_test

import (
	"context"
	"fmt"

	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/model/scripted"
)

func Example() {
	m := scripted.Turns(
		scripted.Turn{Calls: []scripted.Call{{Name: "clock"}}},
		scripted.Turn{Expect: &scripted.Expect{ResultContains: "noon"}, Text: "It is noon."},
	)
	ctx := context.Background()
	r, _ := m.Generate(ctx, &model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "Time?"}}}, nil)
	fmt.Println(r.ToolCalls[0].ID, r.ToolCalls[0].Name)

	history := []model.Message{
		{Role: model.RoleUser, Text: "Time?"},
		{Role: model.RoleAssistant, ToolCalls: r.ToolCalls},
		{Role: model.RoleTool, ToolCallID: r.ToolCalls[0].ID, Text: "12:00, noon"},
	}
	r, _ = m.Generate(ctx, &model.Request{Messages: history}, nil)
	fmt.Println(r.Text)

	_, err := m.Generate(ctx, &model.Request{Messages: history}, nil)
	fmt.Println(err)
	// Output:
	// call_1_1 clock
	// It is noon.
	// scripted: the script has no turns left: scripted:script has 2 turns and all were played
}
