package server

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/quiverhq/quiver/platform"
)

// The workspace's entitlements: which of its tools each caller may see and call (package
// entitle has the rules, the platform their checks), an explanation of one decision, and the
// toolsets, each served at /mcp/{name} (mcptoolsets.go).

type entitlementsOutput struct {
	Body struct {
		Document  entitlementsDocument `json:"document" doc:"The rules (default, rules, toolsets); {} when none were ever set: every caller may call every tool."`
		Version   int64                `json:"version" doc:"The version of the document (0: never set); give it back as after to change it."`
		UpdatedBy *string              `json:"updated_by" nullable:"true"`
		UpdatedAt *time.Time           `json:"updated_at" nullable:"true"`
		Warnings  []string             `json:"warnings" doc:"What the document names that the workspace does not have now (tools, toolsets): kept, since tools come and go."`
	}
}

type putEntitlementsInput struct {
	Body struct {
		Document entitlementsDocument `json:"document" doc:"The whole document, replacing the last: default (allow or deny), rules (who, which tools, access allow or deny: deny always wins) and toolsets (name, include)."`
		After    int64                `json:"after" minimum:"0" doc:"The version the document is changed from (as read; 0 when none was ever set): refused with 409 if another change came first."`
	}
}

type explainInput struct {
	Subject string `query:"subject" maxLength:"4096" doc:"Whom to ask about: comma-separated key:ID, user:ID, role:ROLE, claim:NAME=VALUE, agent:NAME and toolset:NAME; absent: the caller itself. Only an admin may ask about another."`
	Tool    string `query:"tool" required:"true" minLength:"1" maxLength:"512" doc:"The tool's name."`
}

type explainOutput struct {
	Body struct {
		Subject string `json:"subject" doc:"The subject asked about, as given; \"the caller\" when it was left out."`
		Tool    string `json:"tool"`
		Allowed bool   `json:"allowed"`
		Rule    int    `json:"rule" doc:"The index of the rule that decided (from 0 in the document's rules); -1 when none did (the default, a toolset binding)."`
		Agent   string `json:"agent,omitempty" doc:"The agent of the subject's chain the decision was made for."`
		Reason  string `json:"reason" doc:"What decided, in words."`
	}
}

// toolsetSummary is a toolset as the API lists it to a caller (toolsetDefinition is how the
// document defines one).
type toolsetSummary struct {
	Name        string   `json:"name" doc:"Its name: its MCP address is /mcp/{name}."`
	Description string   `json:"description,omitempty" doc:"What the toolset is for, as the document says."`
	Tools       []string `json:"tools" doc:"The tools of the toolset the caller may call."`
}

type toolsetsOutput struct {
	Body struct {
		Toolsets []toolsetSummary `json:"toolsets" doc:"The workspace's toolsets; a key bound to toolsets is shown those alone."`
	}
}

// registerEntitlements adds the workspace's entitlements, their explanation and its toolsets.
func (s *Server) registerEntitlements(api huma.API) {
	register(api, huma.Operation{OperationID: "get-entitlements", Method: http.MethodGet, Path: "/v1/entitlements",
		Summary: "The workspace's entitlements: which tools each caller may see and call (an admin's)"},
		func(ctx context.Context, _ *struct{}) (*entitlementsOutput, error) {
			e, err := s.p.Entitlements(ctx, s.actor(ctx))
			if err != nil {
				return nil, problem(err, "query")
			}
			return entitlementsOutputOf(e), nil
		})
	register(api, huma.Operation{OperationID: "put-entitlements", Method: http.MethodPut, Path: "/v1/entitlements",
		Summary: "Replace the workspace's entitlements (an admin's); every door of every node follows within a second"},
		func(ctx context.Context, in *putEntitlementsInput) (*entitlementsOutput, error) {
			a := s.actor(ctx)
			e, err := s.p.SetEntitlements(ctx, a, in.Body.Document.document(), in.Body.After)
			if err != nil {
				return nil, documentProblem(err)
			}
			s.toolsChanged(ctx, a.WorkspaceID)
			return entitlementsOutputOf(e), nil
		})
	register(api, huma.Operation{OperationID: "explain-entitlement", Method: http.MethodGet, Path: "/v1/entitlements/explain",
		Summary: "Whether a subject (the caller, or anyone for an admin) may call a tool, and which rule decided"},
		func(ctx context.Context, in *explainInput) (*explainOutput, error) {
			x, err := s.p.Explain(ctx, s.actor(ctx), in.Subject, in.Tool)
			if err != nil {
				return nil, problem(err, "query")
			}
			out := &explainOutput{}
			b := &out.Body
			b.Subject, b.Tool, b.Allowed, b.Rule, b.Agent, b.Reason = x.Subject, x.Tool, x.Allowed, x.Rule, x.Agent, x.Reason
			return out, nil
		})
	register(api, huma.Operation{OperationID: "list-toolsets", Method: http.MethodGet, Path: "/v1/toolsets",
		Summary: "The workspace's toolsets, each with the tools of it the caller may call; each is served over MCP at /mcp/{name}"},
		func(ctx context.Context, _ *struct{}) (*toolsetsOutput, error) {
			sets, err := s.p.Toolsets(ctx, s.actor(ctx))
			if err != nil {
				return nil, problem(err, "query")
			}
			out := &toolsetsOutput{}
			out.Body.Toolsets = make([]toolsetSummary, len(sets))
			for i, ts := range sets {
				out.Body.Toolsets[i] = toolsetSummary{Name: ts.Name, Description: ts.Description, Tools: nonNil(ts.Tools)}
			}
			return out, nil
		})
}

// documentProblem is the answer to a document the platform refuses: the part at fault is
// named in the body's document (body.document.rules[3].tools[0]), a refusal of the document
// as a whole names body.document, and a version that moved names body.after.
func documentProblem(err error) error {
	var e *platform.Error
	switch {
	case !errors.As(err, &e):
		return problem(err, "body")
	case e.Field == "version":
		moved := *e
		moved.Field = "after"
		return problem(&moved, "body")
	case e.Kind == platform.Invalid && e.Field == "document":
		return fieldError(http.StatusBadRequest, "body.document", e.Message)
	case e.Kind == platform.Invalid:
		return problem(err, "body.document")
	}
	return problem(err, "body")
}

func entitlementsOutputOf(e *platform.Entitlements) *entitlementsOutput {
	out := &entitlementsOutput{}
	b := &out.Body
	b.Document, b.Version, b.Warnings = documentBodyOf(e.Document), e.Version, nonNil(e.Warnings)
	if e.Version > 0 {
		b.UpdatedBy, b.UpdatedAt = orNull(e.UpdatedBy), &e.UpdatedAt
	}
	return out
}
