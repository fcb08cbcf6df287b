package all_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/quiverhq/quiver/model"
	_ "github.com/quiverhq/quiver/model/all"
	"github.com/quiverhq/quiver/schema"
)

func ExampleOpen() {
	m, err := model.Open("scripted:testdata/echo.yaml")
	if err != nil {
		fmt.Println(err)
		return
	}
	tools, _ := schema.Render(m.Dialect(), []schema.ToolSchema{{Name: "everything.echo"}})
	r, err := m.Generate(context.Background(), &model.Request{Tools: tools,
		Messages: []model.Message{{Role: model.RoleUser, Text: "echo hi"}}}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	name, args, _ := tools.Inbound(r.ToolCalls[0].Name, r.ToolCalls[0].Args)
	fmt.Println(m.Name(), m.Dialect())
	fmt.Println(r.Text)
	fmt.Println(r.ToolCalls[0].Name, "->", name, string(args))
	// Output:
	// scripted:testdata/echo.yaml openai
	// Let me echo that.
	// everything_echo -> everything.echo {"message":"hi"}
}

func ExampleOpenConfig() {
	noEnv := func(string) string { return "" }
	_, err := model.OpenConfig("openai:gpt-4.1-mini", model.Config{Getenv: noEnv})
	fmt.Println(errors.Is(err, model.ErrNotConfigured))
	fmt.Println(err)
	// Output:
	// true
	// model: not configured: openai:gpt-4.1-mini needs OPENAI_API_KEY; set it, for example:
	//   export OPENAI_API_KEY=sk-...
	//   quiver run --model openai:gpt-4.1-mini "your message"
}
