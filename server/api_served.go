package server

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/schema"
)

// What the console shows beyond the records, and any other client may use: one served tool as
// a person reads it (its flags, schemas, examples, variables) with its renderings for each
// provider; a check of arguments against a served tool's input schema, each problem naming its
// field (the console checks an edited call's arguments with it before deciding); and the
// variables of an agent and of a user, set and removed as a thread's are (secrets sealed,
// never shown).

// ServedTool is a tool the workspace is served, as a person reads it.
type ServedTool struct {
	Name                 string            `json:"name"`
	Description          string            `json:"description"`
	Target               quiver.Target     `json:"target" enum:"server,client" doc:"server: the server runs it; client: the client runs it and posts the result."`
	RequiresConfirmation bool              `json:"requires_confirmation" doc:"Each call waits for a person's decision."`
	Latent               bool              `json:"latent" doc:"Schema-only: no code runs it; the model writes its result itself (in _output)."`
	InputSchema          *schema.Schema    `json:"input_schema,omitempty" doc:"The arguments' JSON Schema; absent: the tool takes none."`
	OutputSchema         *schema.Schema    `json:"output_schema,omitempty" doc:"The result's JSON Schema, when declared."`
	Examples             []quiver.Example  `json:"examples,omitempty"`
	Variables            []quiver.Variable `json:"variables,omitempty" doc:"The variables the tool reads (names and types, never values)."`
	Dialects             []ToolDialect     `json:"dialects" doc:"The tool as each provider is offered it."`

	Annotations *quiver.Annotations `json:"annotations,omitempty" doc:"The tool's MCP annotations as it declares them (an imported tool: as its remote server does), in MCP's spelling: title and the hints readOnlyHint, destructiveHint, idempotentHint, openWorldHint, each absent when the tool says nothing (which differs from false). Absent: none declared. Over MCP a tool that requires confirmation and declares neither destructiveHint nor readOnlyHint is also served destructiveHint true."`
}

// ToolDialect is a tool rendered for one provider, as a run offers it (without the optional
// _reasoningForCall a prompt may add).
type ToolDialect struct {
	Dialect        schema.Dialect  `json:"dialect" enum:"openai,openai-strict,anthropic,gemini,mcp"`
	Name           string          `json:"name,omitempty" doc:"The name the provider sees: the tool's, or one mapped to what the provider accepts."`
	Strict         bool            `json:"strict,omitempty" doc:"openai-strict: whether strict mode applies to the tool."`
	StrictFallback string          `json:"strict_fallback,omitempty" doc:"openai-strict: why the tool is sent non-strict."`
	Tools          json.RawMessage `json:"tools,omitempty" doc:"The value of the provider request's tools field (MCP: of tools/list's tools) with this tool alone."`
	Error          string          `json:"error,omitempty" doc:"Why the tool cannot be rendered in this dialect."`
}

type servedToolInput struct {
	Name string `path:"name" minLength:"1" maxLength:"512" doc:"The tool's name, as GET /v1/tools/served lists it, URL-escaped (a name may hold spaces, /, % or ?)."`
}

type servedToolOutput struct {
	Body *ServedTool
}

type checkArgsInput struct {
	Name string `path:"name" minLength:"1" maxLength:"512" doc:"The tool's name, as GET /v1/tools/served lists it, URL-escaped (a name may hold spaces, /, % or ?)."`
	Body struct {
		Args json.RawMessage `json:"args,omitempty" doc:"The arguments to check: a JSON object."`
	}
}

type checkArgsOutput struct {
	Body struct {
		Args json.RawMessage `json:"args" doc:"The arguments as the tool would receive them: defaults applied."`
	}
}

// registerServedTools adds a served tool's details and the check of its arguments, and the
// variables of agents and users (api_variables.go).
func (s *Server) registerServedTools(api huma.API) {
	register(api, huma.Operation{OperationID: "get-served-tool", Method: http.MethodGet, Path: "/v1/tools/served/{name}",
		Summary: "A tool the workspace is served: its flags, schemas, examples and variables, and how each provider is offered it"},
		func(ctx context.Context, in *servedToolInput) (*servedToolOutput, error) {
			ten, t, err := s.servedTool(ctx, in.Name)
			if err != nil {
				return nil, err
			}
			sp := t.Spec()
			out := &ServedTool{Name: sp.Name, Description: sp.Description, Target: sp.Target, RequiresConfirmation: sp.RequiresConfirmation,
				Latent: ten.registry.Latent(t), InputSchema: sp.InputSchema, OutputSchema: sp.OutputSchema, Examples: sp.Examples,
				Variables: sp.Variables, Dialects: renderDialects(ten.registry, t), Annotations: annotationsOf(sp)}
			if out.Target == "" {
				out.Target = quiver.TargetServer
			}
			return &servedToolOutput{Body: out}, nil
		})

	register(api, huma.Operation{OperationID: "check-tool-args", Method: http.MethodPost, Path: "/v1/tools/served/{name}/validate",
		Summary: "Check arguments against a served tool's input schema, without calling it: each problem names its field (body.args.<field>)"},
		func(ctx context.Context, in *checkArgsInput) (*checkArgsOutput, error) {
			_, t, err := s.servedTool(ctx, in.Name)
			if err != nil {
				return nil, err
			}
			args, err := platform.CheckArgs(t, in.Body.Args)
			if err != nil {
				return nil, problem(err, "body")
			}
			out := &checkArgsOutput{}
			out.Body.Args = args
			return out, nil
		})

	s.registerLayerVariables(api)
}

// servedTool is the tool of that name the caller may call (GET /v1/tools/served lists the
// same), with its tenant; 404 naming path.name when there is none, the same for a tool the
// workspace's entitlements do not give the caller as for one it does not have.
func (s *Server) servedTool(ctx context.Context, name string) (*tenant, *quiver.Tool, error) {
	ctx = platform.WithActor(ctx, s.actor(ctx))
	ten := s.tenant(ctx, s.workspaceID(ctx))
	for _, t := range ten.disp.ToolsFor(ctx) {
		if t.Name() == name {
			return ten, t, nil
		}
	}
	return nil, nil, fieldError(http.StatusNotFound, "path.name", "this workspace is served no tool of that name: GET /v1/tools/served lists those it is")
}

// renderDialects renders the tool alone in every dialect, as the runner renders a prompt's
// tools (quiver.ToolSchemas, then schema.Render).
func renderDialects(reg *quiver.Registry, t *quiver.Tool) []ToolDialect {
	out := make([]ToolDialect, 0, len(schema.Dialects))
	for _, d := range schema.Dialects {
		td := ToolDialect{Dialect: d}
		ts, err := schema.Render(d, quiver.ToolSchemas(reg, []*quiver.Tool{t}))
		if err == nil {
			td.Tools, err = json.Marshal(ts)
		}
		if err != nil {
			td.Error = err.Error()
		} else if len(ts.Tools) == 1 {
			rt := ts.Tools[0]
			td.Name, td.Strict, td.StrictFallback = rt.Name, rt.Strict, rt.StrictFallback
		}
		out = append(out, td)
	}
	return out
}
