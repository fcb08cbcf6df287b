package server

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/platform"
)

// The rules that govern the workspace's tools (platform.Governance holds them and their
// checks): the operator's, read-only here, and the workspace's own, which its admins set.

// ruleBody is a quiver.Rule as the API writes it: the timeout in Go's duration syntax.
type ruleBody struct {
	Tools                []string           `json:"tools,omitempty" maxItems:"256" doc:"Tool names or patterns (payments.*); none: any name."`
	Source               string             `json:"source,omitempty" maxLength:"200" doc:"A pattern over where the tool came from: openapi:NAME, mcp:NAME, a2a:NAME, stored, prompt:NAME, schema, go."`
	When                 quiver.Hints       `json:"when,omitzero" doc:"Annotations the tool must have (MCP's defaults for those it leaves out): {\"readOnlyHint\": false} selects every tool that changes something."`
	RequiresConfirmation *bool              `json:"requires_confirmation,omitempty" doc:"Every call waits for a person's decision. A workspace's rule may require it, not lift it."`
	Timeout              string             `json:"timeout,omitempty" maxLength:"32" doc:"A call's time limit, as 30s or 2m. A workspace's rule may only shorten it."`
	Annotations          quiver.Annotations `json:"annotations,omitzero" doc:"Hints given to clients (operator's rules only)."`
	Access               quiver.Access      `json:"access,omitempty" enum:"allow,deny" doc:"deny: the tools are neither offered nor callable (deny always wins); allow: only the tools an allow rule matches are permitted."`
	ProviderName         string             `json:"provider_name,omitempty" maxLength:"64" doc:"The name model providers see for the one tool the rule names exactly (operator's rules only: a rename is not a tightening)."`
}

func ruleBodyOf(r quiver.Rule) ruleBody {
	b := ruleBody{Tools: r.Tools, Source: r.Source, When: r.When, RequiresConfirmation: r.RequiresConfirmation,
		Annotations: r.Annotations, Access: r.Access, ProviderName: r.ProviderName}
	if r.Timeout > 0 {
		b.Timeout = time.Duration(r.Timeout).String()
	}
	return b
}

func (b ruleBody) rule() (quiver.Rule, error) {
	r := quiver.Rule{Tools: b.Tools, Source: b.Source, When: b.When, RequiresConfirmation: b.RequiresConfirmation,
		Annotations: b.Annotations, Access: b.Access, ProviderName: b.ProviderName}
	if b.Timeout != "" {
		d, err := time.ParseDuration(b.Timeout)
		if err != nil {
			return r, fmt.Errorf("timeout %q is not a duration like 30s or 2m", b.Timeout)
		}
		r.Timeout = quiver.Duration(d)
	}
	return r, nil
}

func ruleBodies(rules []quiver.Rule) []ruleBody {
	out := make([]ruleBody, len(rules))
	for i, r := range rules {
		out[i] = ruleBodyOf(r)
	}
	return out
}

type governanceOutput struct {
	Body struct {
		Operator  []ruleBody `json:"operator" doc:"The operator's rules (the fleet's configuration): they govern every workspace, first."`
		Workspace []ruleBody `json:"workspace" doc:"The workspace's own rules, applied after the operator's; they may only tighten."`
		Version   int64      `json:"version" doc:"The version of the workspace's rules (0: none set); give it back to change them."`
		UpdatedBy *string    `json:"updated_by" nullable:"true"`
		UpdatedAt *time.Time `json:"updated_at" nullable:"true"`
	}
}

type putGovernanceInput struct {
	Body struct {
		Rules   []ruleBody `json:"rules" maxItems:"500" doc:"The workspace's rules, in order: a later rule wins over an earlier one."`
		Version int64      `json:"version" minimum:"0" doc:"The version the rules are changed from (as read): refused with 409 if another change came first."`
	}
}

func (s *Server) registerGovernance(api huma.API) {
	register(api, huma.Operation{OperationID: "get-governance", Method: http.MethodGet, Path: "/v1/governance",
		Summary: "The rules that govern the workspace's tools, whatever their source"},
		func(ctx context.Context, _ *struct{}) (*governanceOutput, error) {
			g, err := s.p.Governance(ctx, s.actor(ctx))
			if err != nil {
				return nil, problem(err, "query")
			}
			return governanceOutputOf(g), nil
		})
	register(api, huma.Operation{OperationID: "put-governance", Method: http.MethodPut, Path: "/v1/governance",
		Summary: "Replace the workspace's governance rules (an admin's)"},
		func(ctx context.Context, in *putGovernanceInput) (*governanceOutput, error) {
			rules := make([]quiver.Rule, len(in.Body.Rules))
			for i, b := range in.Body.Rules {
				r, err := b.rule()
				if err != nil {
					return nil, huma.Error422UnprocessableEntity("invalid rule", &huma.ErrorDetail{
						Location: fmt.Sprintf("body.rules[%d].timeout", i), Message: err.Error(), Value: b.Timeout})
				}
				rules[i] = r
			}
			g, err := s.p.SetWorkspaceRules(ctx, s.actor(ctx), rules, in.Body.Version)
			if err != nil {
				return nil, ruleProblem(problem(err, "body"))
			}
			s.toolsChanged(ctx, s.actor(ctx).WorkspaceID)
			return governanceOutputOf(g), nil
		})
}

// ruleProblem answers a rule the platform refuses as one the body's schema refuses (a
// timeout that is no duration, an unknown access): 422, whichever check caught it, so that a
// client handles one answer for a rule that does not check.
func ruleProblem(err error) error {
	if p, ok := err.(*ProblemDetails); ok && p.Status == http.StatusBadRequest && p.Code == CodeInvalidRequest {
		p.Status, p.Title = http.StatusUnprocessableEntity, http.StatusText(http.StatusUnprocessableEntity)
	}
	return err
}

func governanceOutputOf(g *platform.GovernanceRules) *governanceOutput {
	out := &governanceOutput{}
	out.Body.Operator, out.Body.Workspace, out.Body.Version = ruleBodies(g.Operator), ruleBodies(g.Workspace), g.Version
	if g.Version > 0 {
		out.Body.UpdatedBy, out.Body.UpdatedAt = orNull(g.UpdatedBy), &g.UpdatedAt
	}
	return out
}
