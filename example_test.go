package quiver_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/schema"
)

// Define a typed tool, register it and dispatch calls to it: valid arguments get defaults
// and reach the handler; invalid ones come back as an error result the model can act on.
func ExampleFunc() {
	type args struct {
		City string `json:"city" description:"City name, like Paris"`
		Days int    `json:"days,omitempty" description:"Days ahead" minimum:"1" maximum:"14" default:"3"`
	}
	forecast := quiver.Func("get_forecast", "Returns the weather forecast for a city.",
		func(_ context.Context, a args) (string, error) {
			return fmt.Sprintf("%s: sunny for %d days", a.City, a.Days), nil
		})

	reg := &quiver.Registry{}
	if err := reg.Register(forecast); err != nil {
		panic(err)
	}
	d := &quiver.Dispatcher{Registry: reg}

	r, _ := d.Dispatch(context.Background(), quiver.Call{Name: "get_forecast", Args: json.RawMessage(`{"city":"Paris"}`)})
	fmt.Println(r.ModelText())

	r, _ = d.Dispatch(context.Background(), quiver.Call{Name: "get_forecast", Args: json.RawMessage(`{"city":"Paris","days":30}`)})
	fmt.Println(r.Code, r.Problems[0])
	// Output:
	// Paris: sunny for 3 days
	// invalid_arguments /days: maximum 14, got 30
}

// A tool defined only by JSON Schema, with no activity bound to it, is latent: the model
// executes it and puts the result in _output, which is checked against the output schema.
func ExampleParseSchemaTool() {
	tool, err := quiver.ParseSchemaTool([]byte(`{
	  "type": "object",
	  "description": "Analyzes text sentiment",
	  "properties": {
	    "_tool": {"type": "string", "const": "sentiment_analysis"},
	    "text": {"type": "string", "description": "Text to analyze"},
	    "_output": {"type": "object", "properties": {"sentiment": {"enum": ["positive", "negative"]}}, "required": ["sentiment"]}
	  },
	  "required": ["text"]
	}`))
	if err != nil {
		panic(err)
	}
	reg := &quiver.Registry{}
	if err := reg.Register(tool); err != nil {
		panic(err)
	}
	d := &quiver.Dispatcher{Registry: reg}
	fmt.Println("latent:", reg.Latent(tool))

	r, _ := d.Dispatch(context.Background(), quiver.Call{Name: "sentiment_analysis",
		Args: json.RawMessage(`{"text":"What a day!","_output":{"sentiment":"positive"}}`)})
	fmt.Println(r.Status, string(r.Value))

	r, _ = d.Dispatch(context.Background(), quiver.Call{Name: "sentiment_analysis",
		Args: json.RawMessage(`{"text":"Meh.","_output":{"sentiment":"bored"}}`)})
	fmt.Println(r.Code)
	// Output:
	// latent: true
	// success {"sentiment":"positive"}
	// invalid_output
}

// A policy decides which tools an agent sees and may call; deny always wins, and a
// sub-agent's policy is intersected with its parent's.
func ExamplePolicy() {
	reg := &quiver.Registry{}
	for _, name := range []string{"github_issue", "github_pr", "slack_post", "run_code"} {
		if err := reg.Register(quiver.Func(name, "Does "+name+".",
			func(context.Context, struct{}) (string, error) { return "ok", nil })); err != nil {
			panic(err)
		}
	}
	parent := quiver.Policy{Allow: []string{"github_*", "slack_post"}, Deny: []string{"github_pr"}}
	child := quiver.Policy{Allow: []string{"github_*", "run_code"}}.Within(parent)

	for _, t := range parent.Effective(reg) {
		fmt.Println("parent:", t.Name())
	}
	for _, t := range child.Effective(reg) {
		fmt.Println("child:", t.Name())
	}
	d := &quiver.Dispatcher{Registry: reg, Policy: child}
	r, _ := d.Dispatch(context.Background(), quiver.Call{Name: "run_code"})
	fmt.Println(r.ModelText())
	// Output:
	// parent: github_issue
	// parent: slack_post
	// child: github_issue
	// Error: tool "run_code" is not available: the parent agent's policy does not permit it (it is not on the allow list). Available tools: github_issue.
}

// Render offers the permitted tools in a provider's dialect.
func ExampleDispatcher_Render() {
	reg := &quiver.Registry{}
	if err := reg.Register(
		quiver.Func("get_time", "Returns the current time.", func(context.Context, struct{}) (string, error) { return "noon", nil }),
		quiver.Func("delete_all", "Deletes everything.", func(context.Context, struct{}) (string, error) { return "", nil }),
	); err != nil {
		panic(err)
	}
	d := &quiver.Dispatcher{Registry: reg, Policy: quiver.Policy{Deny: []string{"delete_*"}}}
	set, err := d.Render(schema.Anthropic)
	if err != nil {
		panic(err)
	}
	out, _ := json.Marshal(set)
	fmt.Println(string(out))
	// Output:
	// [{"description":"Returns the current time.","input_schema":{"type":"object","properties":{}},"name":"get_time"}]
}

// Variables resolve through the layers thread, agent, prompt, user, instance (the first that
// has a value wins); the values of secret variables are masked in everything a tool returns.
func ExampleLayered() {
	tool := quiver.Func("call_api", "Calls the billing API.", func(ctx context.Context, _ struct{}) (string, error) {
		region, _ := quiver.Var(ctx, "region")
		key, _ := quiver.Var(ctx, "api_key")
		return fmt.Sprintf("region=%s, authenticated with %s", region, key), nil
	}, quiver.WithVariables(
		quiver.Variable{Name: "region", Required: true},
		quiver.Variable{Name: "api_key", Type: quiver.VarSecret, Required: true},
	))
	reg := &quiver.Registry{}
	if err := reg.Register(tool); err != nil {
		panic(err)
	}
	d := &quiver.Dispatcher{Registry: reg, Resolver: quiver.Layered{
		Thread:   quiver.Vars{"region": "eu-west-1"},
		User:     quiver.Vars{"region": "us-east-1", "api_key": "sk-live-12345"},
		Instance: quiver.Vars{"api_key": "sk-default"},
	}}
	r, _ := d.Dispatch(context.Background(), quiver.Call{Name: "call_api"})
	fmt.Println(r.ModelText())

	// Without a resolver, the required variables are missing and the tool does not run.
	d2 := &quiver.Dispatcher{Registry: reg}
	r, _ = d2.Dispatch(context.Background(), quiver.Call{Name: "call_api"})
	fmt.Println(r.Code)
	// Output:
	// region=eu-west-1, authenticated with [REDACTED]
	// missing_variable
}

// A server loading many tools, few of which will be called, keeps no compiled schema for
// them: each schema is compiled to check it when the tool is made, and again at its first
// use, for keeps.
func ExampleWithSchemasCompiledOnUse() {
	ctx := quiver.WithSchemasCompiledOnUse(context.Background())
	tool, err := quiver.NewToolContext(ctx, quiver.Spec{Name: "get_forecast", Description: "Returns the weather forecast for a city.",
		InputSchema: &schema.Schema{Type: "object", Required: []string{"city"},
			Properties: map[string]*schema.Schema{"city": {Type: "string", MinLength: new(1)}}}},
		func(context.Context, json.RawMessage) (any, error) { return "sunny", nil })
	if err != nil {
		panic(err)
	}
	reg := &quiver.Registry{}
	if err := reg.Register(tool); err != nil {
		panic(err)
	}
	d := &quiver.Dispatcher{Registry: reg}
	r, _ := d.Dispatch(ctx, quiver.Call{Name: "get_forecast", Args: json.RawMessage(`{"city":"Paris"}`)})
	fmt.Println(r.ModelText())
	r, _ = d.Dispatch(ctx, quiver.Call{Name: "get_forecast", Args: json.RawMessage(`{"city":""}`)})
	fmt.Println(r.Code, r.Problems[0])
	// Output:
	// sunny
	// invalid_arguments /city: minimum length 1, got 0
}
