package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/quiverhq/quiver/schema"
)

// Prompt is a prompt served over MCP (prompts/list and prompts/get), for
// [ServerOptions.Prompts]. A Quiver prompt is a system prompt, not a template: prompts/get
// answers with System as the first message and the client's arguments as the second, for the
// client to send to a model of its own.
type Prompt struct {
	Name, Description string
	// System is the prompt's text as its definition has it: never a variable's value, since
	// what prompts/get returns leaves the server.
	System string
	// Args is the JSON Schema (an object) of the arguments: its top-level properties are the
	// prompt's MCP arguments (those it requires marked required), and the arguments a client
	// sends are validated against it. Nil takes one required string argument, "message".
	Args *schema.Schema
}

// messageArg is the argument of a prompt that declares no argument schema.
const messageArg = "message"

// defaultPromptArgs is the argument schema of a prompt that declares none.
func defaultPromptArgs() *schema.Schema {
	return &schema.Schema{Type: "object", Required: []string{messageArg}, Properties: map[string]*schema.Schema{
		messageArg: {Type: "string", Description: "What to ask, in full."},
	}}
}

// servedPrompt is a Prompt with its argument schema compiled.
type servedPrompt struct {
	Prompt
	args     *schema.Compiled
	declared bool // Args was given (the arguments are sent as JSON), not the default
}

// addPrompts adds the prompts to the SDK server. A prompt whose argument schema does not
// compile is left out, and said so in the log.
func (s *Server) addPrompts(prompts []Prompt) {
	for _, p := range prompts {
		sp := &servedPrompt{Prompt: p, declared: p.Args != nil}
		args := p.Args
		if args == nil {
			args = defaultPromptArgs()
		}
		c, err := schema.Compile(args)
		if err != nil {
			s.logger.Error("mcp: prompt not served: its argument schema does not compile", "prompt", p.Name, "error", err)
			continue
		}
		sp.args = c
		s.srv.AddPrompt(&sdk.Prompt{Name: p.Name, Description: p.Description, Arguments: promptArguments(args)}, sp.get)
	}
}

// promptArguments lists the top-level properties of args as MCP prompt arguments, in the
// schema's property order when it has one, else the required ones first, each group sorted.
func promptArguments(args *schema.Schema) []*sdk.PromptArgument {
	names := argumentNames(args)
	out := make([]*sdk.PromptArgument, 0, len(names))
	for _, n := range names {
		a := &sdk.PromptArgument{Name: n, Required: slices.Contains(args.Required, n)}
		if ps := args.Properties[n]; ps != nil {
			a.Title, a.Description = ps.Title, ps.Description
		}
		out = append(out, a)
	}
	return out
}

func argumentNames(args *schema.Schema) []string {
	var names []string
	for _, n := range args.PropertyOrder {
		if _, ok := args.Properties[n]; ok && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	var rest []string
	for n := range args.Properties {
		if !slices.Contains(names, n) {
			rest = append(rest, n)
		}
	}
	slices.SortFunc(rest, func(a, b string) int {
		ra, rb := slices.Contains(args.Required, a), slices.Contains(args.Required, b)
		switch {
		case ra && !rb:
			return -1
		case rb && !ra:
			return 1
		}
		return strings.Compare(a, b)
	})
	return append(names, rest...)
}

// get answers prompts/get. MCP prompt messages have only the user and assistant roles, so the
// prompt's system text is the first user message; the second holds the arguments (the
// message argument's text for a prompt without an argument schema, else the arguments as
// JSON). Arguments that fail the schema are an invalid-params error that says which, and what
// the prompt takes.
func (sp *servedPrompt) get(_ context.Context, req *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
	var given map[string]string
	if req.Params != nil {
		given = req.Params.Arguments
	}
	args := sp.args.Schema()
	v := make(map[string]any, len(given))
	for name, text := range given {
		v[name] = argumentValue(args.Properties[name], text)
	}
	if err := sp.args.Validate(v); err != nil {
		var ve *schema.ValidationError
		if !errors.As(err, &ve) {
			return nil, err
		}
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
			Message: fmt.Sprintf("prompt %q: invalid arguments: %s (%s)", sp.Name, ve, sp.allowed())}
	}
	if _, err := sp.args.ApplyDefaults(v); err != nil {
		return nil, err
	}
	var second string
	if sp.declared {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		second = string(b)
	} else {
		second, _ = v[messageArg].(string)
	}
	res := &sdk.GetPromptResult{Description: sp.Description}
	if sp.System != "" {
		res.Messages = append(res.Messages, &sdk.PromptMessage{Role: "user", Content: &sdk.TextContent{Text: sp.System}})
	}
	res.Messages = append(res.Messages, &sdk.PromptMessage{Role: "user", Content: &sdk.TextContent{Text: second}})
	return res, nil
}

// allowed says what arguments the prompt takes, for an error.
func (sp *servedPrompt) allowed() string {
	args := sp.args.Schema()
	names := argumentNames(args)
	if len(names) == 0 {
		return "it takes no arguments"
	}
	parts := make([]string, len(names))
	for i, n := range names {
		var what []string
		if slices.Contains(args.Required, n) {
			what = append(what, "required")
		}
		if ps := args.Properties[n]; ps != nil {
			if t := typeName(ps); t != "" {
				what = append(what, t)
			}
			if len(ps.Enum) > 0 {
				b, _ := json.Marshal(ps.Enum)
				what = append(what, "one of "+string(b))
			}
		}
		parts[i] = n
		if len(what) > 0 {
			parts[i] += " (" + strings.Join(what, ", ") + ")"
		}
	}
	return "arguments: " + strings.Join(parts, ", ")
}

func typeName(s *schema.Schema) string {
	if s.Type != "" {
		return s.Type
	}
	return strings.Join(s.Types, " or ")
}

// argumentValue is an argument's value for validation: MCP prompt arguments are strings, so
// one whose property does not admit a string (a number, a boolean, an object) is read as
// JSON when it is JSON, and validation says what is wrong when it is not.
func argumentValue(ps *schema.Schema, text string) any {
	if ps == nil || admitsString(ps) {
		return text
	}
	if v, err := schema.Decode([]byte(text)); err == nil {
		return v
	}
	return text
}

// admitsString reports whether a property's schema may take a string as it is: it names the
// string type, or no type at all (and no $ref, whose target we do not follow here).
func admitsString(ps *schema.Schema) bool {
	if ps.Type == "" && len(ps.Types) == 0 {
		return ps.Ref == "" && len(ps.Enum) == 0 && ps.Const == nil || enumHasString(ps)
	}
	return ps.Type == "string" || slices.Contains(ps.Types, "string")
}

func enumHasString(ps *schema.Schema) bool {
	for _, e := range ps.Enum {
		if _, ok := e.(string); ok {
			return true
		}
	}
	if ps.Const != nil {
		_, ok := (*ps.Const).(string)
		return ok
	}
	return false
}
