package server

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/store"
)

// The workspace's stored tools and its functions: each handler translates its request to a
// platform operation (which holds the rules) and the answer back.

// toolRecord is a stored tool as the API answers it: every field of the record, null for
// what is unset. It is store.Tool's JSON form, spelled out so that the OpenAPI document describes
// what is sent.
type toolRecord struct {
	ID                   string               `json:"id" doc:"tol_..."`
	WorkspaceID          *string              `json:"workspace_id" nullable:"true" doc:"null for a system tool."`
	Name                 string               `json:"name" doc:"The name the model sees."`
	Description          *string              `json:"description" nullable:"true" doc:"When to use the tool, for the model."`
	Target               store.ToolTarget     `json:"target" enum:"server,client"`
	FunctionID           *string              `json:"function_id" nullable:"true" doc:"The function a server tool runs; null for a client tool."`
	FunctionVersionID    *string              `json:"function_version_id" nullable:"true" doc:"The pinned version; null follows the function's default version."`
	InputSchemaID        string               `json:"input_schema_id"`
	OutputSchemaID       string               `json:"output_schema_id"`
	Examples             []store.ToolExample  `json:"examples" nullable:"true"`
	RequiresConfirmation bool                 `json:"requires_confirmation"`
	Enabled              bool                 `json:"enabled"`
	System               bool                 `json:"system" doc:"A built-in tool, which cannot be edited or deleted."`
	CreatedBy            *string              `json:"created_by" nullable:"true"`
	RuntimeUserID        *string              `json:"runtime_user_id" nullable:"true" doc:"The member the function runs as; null for the workspace's default."`
	DeletedAt            *time.Time           `json:"deleted_at" nullable:"true"`
	RetentionTier        *store.RetentionTier `json:"retention_tier" nullable:"true" doc:"short, medium, long or none: snapshotted by the deletion; null while active."`
	CreatedAt            time.Time            `json:"created_at"`
	UpdatedAt            time.Time            `json:"updated_at"`
}

func orNull(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func toolRecordOf(t *store.Tool) *toolRecord {
	r := &toolRecord{
		ID: t.ID, WorkspaceID: orNull(t.WorkspaceID), Name: t.Name, Description: orNull(t.Description), Target: t.Target,
		FunctionID: orNull(t.FunctionID), FunctionVersionID: orNull(t.FunctionVersionID), InputSchemaID: t.InputSchemaID,
		OutputSchemaID: t.OutputSchemaID, Examples: t.Examples, RequiresConfirmation: t.RequiresConfirmation,
		Enabled: t.Enabled, System: t.System, CreatedBy: orNull(t.CreatedBy), RuntimeUserID: orNull(t.RuntimeUserID),
		DeletedAt: t.DeletedAt, CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt,
	}
	if t.RetentionTier != "" {
		tier := t.RetentionTier
		r.RetentionTier = &tier
	}
	return r
}

type toolOutput struct {
	Body *toolRecord
}

type toolInput struct {
	ID string `path:"id" maxLength:"64" doc:"The tool's id (tol_...)."`
}

type createToolInput struct {
	Body struct {
		Name                 string              `json:"name" minLength:"1" maxLength:"512" doc:"The name the model sees: free among the workspace's active tools and the server's own. Any text of at most 512 bytes without control characters; snake_case of 1 to 64 [a-zA-Z0-9_-] by convention (another name is accepted, and offered mapped to providers that reject it)."`
		Description          string              `json:"description,omitempty" maxLength:"10000" doc:"When to use the tool, for the model; the input schema's description when empty."`
		Target               string              `json:"target" enum:"server,client" doc:"server runs a function of the workspace; client tools are run by the client."`
		FunctionID           string              `json:"function_id,omitempty" maxLength:"64" doc:"The function a server tool runs (fun_...)."`
		FunctionVersionID    string              `json:"function_version_id,omitempty" maxLength:"64" doc:"A version of the function to pin (fnv_...); empty follows its default version."`
		InputSchema          json.RawMessage     `json:"input_schema" doc:"The JSON Schema (an object) of the arguments: what the model sees and calls are validated against."`
		OutputSchema         json.RawMessage     `json:"output_schema,omitempty" doc:"The JSON Schema (an object) of the result; any result when absent."`
		Examples             []store.ToolExample `json:"examples,omitempty" maxItems:"20" doc:"Few-shot calls: args (validated against the input schema) and an optional result."`
		RequiresConfirmation bool                `json:"requires_confirmation,omitempty" doc:"Each call waits for a person's approval."`
		Enabled              *bool               `json:"enabled,omitempty" doc:"false hides the tool from the model; true when absent."`
		RuntimeUserID        string              `json:"runtime_user_id,omitempty" maxLength:"64" doc:"The member the function runs as (usr_...), set by admins only; the workspace's default when empty."`
	}
}

type updateToolInput struct {
	ID   string `path:"id" maxLength:"64" doc:"The tool's id (tol_...)."`
	Body struct {
		Name                 *string              `json:"name,omitempty" minLength:"1" maxLength:"512"`
		Description          nullString           `json:"description,omitempty" maxLength:"10000" doc:"null or empty: the input schema's description."`
		Target               *string              `json:"target,omitempty" enum:"server,client"`
		FunctionID           nullString           `json:"function_id,omitempty" maxLength:"64" doc:"null or empty for none (a client tool)."`
		FunctionVersionID    nullString           `json:"function_version_id,omitempty" maxLength:"64" doc:"A version to pin (fnv_...); null or empty follows the function's default version."`
		InputSchema          json.RawMessage      `json:"input_schema,omitempty" doc:"A new input schema (a JSON Schema object)."`
		OutputSchema         json.RawMessage      `json:"output_schema,omitempty" doc:"A new output schema (a JSON Schema object, or true for any result)."`
		Examples             *[]store.ToolExample `json:"examples,omitempty" maxItems:"20" doc:"The new examples; [] for none."`
		RequiresConfirmation *bool                `json:"requires_confirmation,omitempty"`
		Enabled              *bool                `json:"enabled,omitempty"`
		RuntimeUserID        nullString           `json:"runtime_user_id,omitempty" maxLength:"64" doc:"Admins only; null or empty for the workspace's default."`
	}
}

type deleteToolInput struct {
	ID            string `path:"id" maxLength:"64" doc:"The tool's id (tol_...)."`
	RetentionTier string `query:"retention_tier" enum:"short,medium,long,none" doc:"How long the deleted tool is kept (short 7 days, medium 30, long 90, none forever); the workspace's tier when absent."`
}

type listToolsInput struct {
	Limit                int    `query:"limit" minimum:"1" maximum:"100" default:"20" doc:"Tools per page."`
	Cursor               string `query:"cursor" maxLength:"512" doc:"Where the page starts: the next_cursor of the page before, with the same filters; empty for the first."`
	FunctionID           string `query:"function_id" maxLength:"64" doc:"Only the tools running this function (fun_...)."`
	Target               string `query:"target" enum:"server,client" doc:"Only the tools of this target."`
	Name                 string `query:"name" maxLength:"512" doc:"Only the tool of this name, or with names starting with it (name_prefix)."`
	NamePrefix           bool   `query:"name_prefix" doc:"name is a prefix."`
	RequiresConfirmation string `query:"requires_confirmation" enum:"true,false" doc:"Only the tools whose calls wait (true) or do not wait (false) for approval."`
	IncludeDeleted       string `query:"include_deleted" enum:"false,true,only" default:"false" doc:"Also the deleted tools (true), or only them (only)."`
	IncludeSystem        bool   `query:"include_system" doc:"Also the system tools."`
	Agent                string `query:"agent" maxLength:"128" doc:"Only the tools this agent may call (its bound tools, allow and deny lists), of those the workspace serves now."`
}

type listToolsOutput struct {
	Body struct {
		Tools      []*toolRecord `json:"tools"`
		NextCursor string        `json:"next_cursor,omitempty" doc:"The cursor of the next page; absent on the last."`
	}
}

type functionOutput struct {
	Body *store.Function
}

type functionsOutput struct {
	Body struct {
		Functions []*store.Function `json:"functions" doc:"Oldest first."`
	}
}

type functionInput struct {
	ID string `path:"id" maxLength:"64" doc:"The function's id (fun_...)."`
}

type createFunctionInput struct {
	Body struct {
		Name string `json:"name" minLength:"1" maxLength:"512" doc:"Unique among the workspace's functions; at most 512 bytes, without control characters."`
	}
}

type createVersionInput struct {
	ID   string `path:"id" maxLength:"64" doc:"The function's id (fun_...)."`
	Body struct {
		Code         string          `json:"code" minLength:"1" maxLength:"524288" doc:"The JavaScript module: its default export receives the arguments and a state object and returns the result."`
		InputSchema  json.RawMessage `json:"input_schema,omitempty" doc:"The JSON Schema (an object) of the arguments the code expects, with the variables it reads."`
		OutputSchema json.RawMessage `json:"output_schema,omitempty" doc:"The JSON Schema (an object) of what the code returns."`
	}
}

type versionOutput struct {
	Body *store.FunctionVersion
}

type versionsOutput struct {
	Body struct {
		Versions []*store.FunctionVersion `json:"versions" doc:"In order, version 1 first."`
	}
}

type defaultVersionInput struct {
	ID   string `path:"id" maxLength:"64" doc:"The function's id (fun_...)."`
	Body struct {
		VersionID string `json:"version_id" minLength:"1" maxLength:"64" doc:"A version of the function (fnv_...): the tools that pin none run it."`
	}
}

func (s *Server) registerTools(api huma.API) {
	register(api, huma.Operation{OperationID: "list-tools", Method: http.MethodGet, Path: "/v1/tools",
		Summary: "The workspace's stored tools, oldest first, a page at a time"},
		func(ctx context.Context, in *listToolsInput) (*listToolsOutput, error) {
			q := platform.ToolQuery{Limit: in.Limit, Cursor: in.Cursor, FunctionID: in.FunctionID, Target: store.ToolTarget(in.Target),
				Name: in.Name, NamePrefix: in.NamePrefix, Deleted: store.DeletedFilter(in.IncludeDeleted), IncludeSystem: in.IncludeSystem, Agent: in.Agent}
			if in.RequiresConfirmation != "" {
				rc := in.RequiresConfirmation == "true"
				q.RequiresConfirmation = &rc
			}
			page, err := s.p.ListTools(ctx, s.actor(ctx), q)
			if err != nil {
				return nil, problem(err, "query")
			}
			out := &listToolsOutput{}
			out.Body.Tools = make([]*toolRecord, len(page.Tools))
			for i, t := range page.Tools {
				out.Body.Tools[i] = toolRecordOf(t)
			}
			out.Body.NextCursor = page.NextCursor
			return out, nil
		})
	register(api, huma.Operation{OperationID: "create-tool", Method: http.MethodPost, Path: "/v1/tools",
		Summary: "Store a tool: a function of the workspace (server) or one the client runs", DefaultStatus: http.StatusCreated},
		func(ctx context.Context, in *createToolInput) (*toolOutput, error) {
			b := &in.Body
			t, err := s.p.CreateTool(ctx, s.actor(ctx), platform.NewTool{Name: b.Name, Description: b.Description,
				Target: store.ToolTarget(b.Target), FunctionID: b.FunctionID, FunctionVersionID: b.FunctionVersionID,
				InputSchema: b.InputSchema, OutputSchema: b.OutputSchema, Examples: b.Examples,
				RequiresConfirmation: b.RequiresConfirmation, Enabled: b.Enabled, RuntimeUserID: b.RuntimeUserID})
			return s.toolAnswer(ctx, t, err)
		})
	register(api, huma.Operation{OperationID: "get-tool", Method: http.MethodGet, Path: "/v1/tools/{id}",
		Summary: "A stored tool of the workspace (deleted ones included) or a system tool"},
		func(ctx context.Context, in *toolInput) (*toolOutput, error) {
			t, err := s.p.Tool(ctx, s.actor(ctx), in.ID)
			if err != nil {
				return nil, problem(err, "body")
			}
			return &toolOutput{Body: toolRecordOf(t)}, nil
		})
	register(api, huma.Operation{OperationID: "update-tool", Method: http.MethodPatch, Path: "/v1/tools/{id}",
		Summary: "Change a stored tool: the fields given; system tools cannot be changed"},
		func(ctx context.Context, in *updateToolInput) (*toolOutput, error) {
			b := &in.Body
			c := platform.ToolChange{Name: b.Name, Description: b.Description.optional(), FunctionID: b.FunctionID.optional(),
				FunctionVersionID: b.FunctionVersionID.optional(), InputSchema: b.InputSchema, OutputSchema: b.OutputSchema,
				Examples: b.Examples, RequiresConfirmation: b.RequiresConfirmation, Enabled: b.Enabled, RuntimeUserID: b.RuntimeUserID.optional()}
			if b.Target != nil {
				target := store.ToolTarget(*b.Target)
				c.Target = &target
			}
			t, err := s.p.UpdateTool(ctx, s.actor(ctx), in.ID, c)
			return s.toolAnswer(ctx, t, err)
		})
	register(api, huma.Operation{OperationID: "delete-tool", Method: http.MethodDelete, Path: "/v1/tools/{id}",
		Summary: "Delete a stored tool: kept for its retention tier, then purged"},
		func(ctx context.Context, in *deleteToolInput) (*toolOutput, error) {
			t, err := s.p.DeleteTool(ctx, s.actor(ctx), in.ID, store.RetentionTier(in.RetentionTier))
			return s.toolAnswer(ctx, t, err)
		})
}

// toolAnswer is the answer to a change of a tool: the tool as stored, once the workspace's MCP
// clients have been told its tools changed.
func (s *Server) toolAnswer(ctx context.Context, t *store.Tool, err error) (*toolOutput, error) {
	if err != nil {
		return nil, problem(err, "body")
	}
	s.toolsChanged(ctx, t.WorkspaceID)
	return &toolOutput{Body: toolRecordOf(t)}, nil
}

func (s *Server) registerFunctions(api huma.API) {
	register(api, huma.Operation{OperationID: "list-functions", Method: http.MethodGet, Path: "/v1/functions",
		Summary: "The workspace's functions, oldest first"}, func(ctx context.Context, _ *struct{}) (*functionsOutput, error) {
		fs, err := s.p.Functions(ctx, s.actor(ctx))
		return listed(fs, err, func(o *functionsOutput, fs []*store.Function) { o.Body.Functions = fs })
	})
	register(api, huma.Operation{OperationID: "create-function", Method: http.MethodPost, Path: "/v1/functions",
		Summary: "Create a function, without versions yet", DefaultStatus: http.StatusCreated},
		func(ctx context.Context, in *createFunctionInput) (*functionOutput, error) {
			f, err := s.p.CreateFunction(ctx, s.actor(ctx), in.Body.Name)
			if err != nil {
				return nil, problem(err, "body")
			}
			return &functionOutput{Body: f}, nil
		})
	register(api, huma.Operation{OperationID: "get-function", Method: http.MethodGet, Path: "/v1/functions/{id}",
		Summary: "A function of the workspace, or a system function"}, func(ctx context.Context, in *functionInput) (*functionOutput, error) {
		f, err := s.p.Function(ctx, s.actor(ctx), in.ID)
		if err != nil {
			return nil, problem(err, "body")
		}
		return &functionOutput{Body: f}, nil
	})
	register(api, huma.Operation{OperationID: "create-function-version", Method: http.MethodPost, Path: "/v1/functions/{id}/versions",
		Summary: "Add a version of a function's code; the first becomes its default", DefaultStatus: http.StatusCreated},
		func(ctx context.Context, in *createVersionInput) (*versionOutput, error) {
			b := &in.Body
			v, err := s.p.CreateFunctionVersion(ctx, s.actor(ctx), in.ID, platform.NewVersion{Code: b.Code, InputSchema: b.InputSchema, OutputSchema: b.OutputSchema})
			if err != nil {
				return nil, problem(err, "body")
			}
			s.toolsChanged(ctx, v.WorkspaceID)
			return &versionOutput{Body: v}, nil
		})
	register(api, huma.Operation{OperationID: "list-function-versions", Method: http.MethodGet, Path: "/v1/functions/{id}/versions",
		Summary: "A function's versions, in order"}, func(ctx context.Context, in *functionInput) (*versionsOutput, error) {
		vs, err := s.p.FunctionVersions(ctx, s.actor(ctx), in.ID)
		return listed(vs, err, func(o *versionsOutput, vs []*store.FunctionVersion) { o.Body.Versions = vs })
	})
	register(api, huma.Operation{OperationID: "set-default-version", Method: http.MethodPut, Path: "/v1/functions/{id}/default-version",
		Summary: "Make a version the function's default: the tools that pin no version run it"},
		func(ctx context.Context, in *defaultVersionInput) (*functionOutput, error) {
			f, err := s.p.SetDefaultVersion(ctx, s.actor(ctx), in.ID, in.Body.VersionID)
			if err != nil {
				return nil, problem(err, "body")
			}
			s.toolsChanged(ctx, f.WorkspaceID)
			return &functionOutput{Body: f}, nil
		})
}
