package server

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/platform/entitle"
	"github.com/quiverhq/quiver/platform/limits"
)

// The workspace's limits: how often its callers may call which tools, and how many calls may
// run at once (package limits has the rules, the platform counts them at every door).

// limitsDocument is a limits.Document, written out for the OpenAPI document.
type limitsDocument struct {
	Limits []limitBody `json:"limits,omitempty" doc:"The limits, at most 1,000. Every limit that selects a call applies; among those counting one quantity the same way (same per), the most specific alone (the one setting more of who and which tools)."`
	Prices []priceBody `json:"prices,omitempty" doc:"The price table, at most 1,000 prices: what model requests cost, which usage's cost reads. Quiver has no prices built in; a model without a price costs nothing."`
}

// priceBody is a limits.Price.
type priceBody struct {
	Model            string  `json:"model" maxLength:"200" doc:"A pattern over model names, provider:model (openai:gpt-4o*, anthropic:*, openrouter:meta-llama/*): path.Match's, with * and ? matching / too. The first price that matches applies." example:"openai:gpt-4o*"`
	InputPerMillion  float64 `json:"input_per_million" minimum:"0" maximum:"1000000" doc:"The price of a million input (prompt) tokens, in the unit you choose."`
	OutputPerMillion float64 `json:"output_per_million" minimum:"0" maximum:"1000000" doc:"The price of a million output tokens."`
}

// limitBody is a limits.Limit, whose selector's fields are the limit's own.
type limitBody struct {
	Name        string         `json:"name" doc:"The limit's name, unique in the document: refusals and usage name it. 1 to 64 characters of a-z, A-Z, 0-9, _, . and -."`
	Description string         `json:"description,omitempty" doc:"Why the limit is there, up to 1,024 bytes."`
	Who         entitlementWho `json:"who,omitzero" doc:"The callers it applies to: those matching every field set, as entitlement rules match them; absent or {}: every caller."`
	Tools       []string       `json:"tools,omitempty" doc:"The tools it applies to by name or path.Match pattern; with source and when, it selects the tools matching every one it sets (none: every tool)."`
	Source      string         `json:"source,omitempty" doc:"A path.Match pattern over where the tool came from: openapi:NAME, mcp:NAME, a2a:NAME, stored, prompt:NAME, schema, go."`
	When        quiver.Hints   `json:"when,omitzero" doc:"Annotations the tool must have, read with MCP's defaults: {\"destructiveHint\": true} selects the destructive tools."`
	Per         []string       `json:"per,omitempty" doc:"What it counts separately: key, user, agent (the agent whose run calls), toolset (the MCP address the call came through), tool; absent: every call it selects together. A caller with an access token and no key counts as its user's."`
	Calls       limits.Rates   `json:"calls,omitzero" doc:"Calls per_second, per_minute, per_hour and per_day (0 or absent: unbounded), each up to 1,000,000,000. No period, however it falls, sees more calls than its bound."`
	Concurrent  int            `json:"concurrent,omitempty" minimum:"0" maximum:"1000000000" doc:"Calls it counts that may run at once (0: unbounded)."`
	Tokens      limits.Tokens  `json:"tokens,omitzero" doc:"Model tokens of the agent runs it selects: input_per_minute, input_per_day, output_per_minute, output_per_day (0 or absent: unbounded), each up to 1,000,000,000,000. A run whose bound is reached stops before its next model request, paused with budget_exhausted, and goes on when the bound has room again or an admin raises it. A limit with tokens or cost selects by who alone (no tools, source, when, nor per tool)."`
	Cost        limits.Cost    `json:"cost,omitzero" doc:"What the model requests of the runs it selects cost by the price table, per_day (the last 24 hours) and per_month (the last 30 days), in the table's unit, each up to 1,000,000,000; as tokens are."`
}

type limitsOutput struct {
	Body struct {
		Document  limitsDocument `json:"document" doc:"The limits; {} when none were ever set: nothing is limited."`
		Version   int64          `json:"version" doc:"The version of the document (0: never set); give it back as after to change it."`
		UpdatedBy *string        `json:"updated_by" nullable:"true"`
		UpdatedAt *time.Time     `json:"updated_at" nullable:"true"`
	}
}

type putLimitsInput struct {
	Body struct {
		Document limitsDocument `json:"document" doc:"The whole document, replacing the last."`
		After    int64          `json:"after" minimum:"0" doc:"The version the document is changed from (as read; 0 when none was ever set): refused with 409 if another change came first."`
	}
}

// LimitStatus is how close one bound of a limit is.
type LimitStatus struct {
	Name     string `json:"name" doc:"The limit's name."`
	Measure  string `json:"measure" enum:"calls,input_tokens,output_tokens,cost" doc:"What the bound counts: calls, model input or output tokens, or cost in millionths of the price table's unit."`
	Period   string `json:"period" enum:"second,minute,hour,day,month,concurrent" doc:"Which of its bounds: per second, minute, hour, day or month (the last 30 days), or concurrent calls."`
	Max      int    `json:"max" doc:"The bound (a cost in millionths of the price table's unit)."`
	Used     int    `json:"used" doc:"The fullest counter's count now: calls, tokens or cost in the last period (a sliding window), or calls running. On a fleet, what the nodes took or hold of calls, a little ahead of what they let through."`
	Counters int    `json:"counters" doc:"How many of its counters have counts now: one per key, user, agent, toolset or tool it counts per, or one."`
}

type limitStatusOutput struct {
	Body struct {
		Limits []LimitStatus `json:"limits" doc:"Each bound of each limit, in the document's order."`
	}
}

// registerLimits adds the workspace's limits.
func (s *Server) registerLimits(api huma.API) {
	register(api, huma.Operation{OperationID: "get-limits", Method: http.MethodGet, Path: "/v1/limits",
		Summary: "The workspace's limits: how often its callers may call which tools, and how many at once (an admin's)"},
		func(ctx context.Context, _ *struct{}) (*limitsOutput, error) {
			l, err := s.p.Limits(ctx, s.actor(ctx))
			if err != nil {
				return nil, problem(err, "query")
			}
			return limitsOutputOf(l), nil
		})
	register(api, huma.Operation{OperationID: "get-limit-status", Method: http.MethodGet, Path: "/v1/limits/status",
		Summary: "How close each of the workspace's limits is now: the fullest counter of each bound (an admin's)"},
		func(ctx context.Context, _ *struct{}) (*limitStatusOutput, error) {
			st, err := s.p.LimitStatus(ctx, s.actor(ctx))
			if err != nil {
				return nil, problem(err, "query")
			}
			out := &limitStatusOutput{}
			out.Body.Limits = make([]LimitStatus, len(st))
			for i, l := range st {
				out.Body.Limits[i] = LimitStatus{Name: l.Limit, Measure: l.Quantity.Measure(), Period: l.Quantity.Period(), Max: l.Max, Used: l.Used,
					Counters: l.Counters}
			}
			return out, nil
		})
	register(api, huma.Operation{OperationID: "put-limits", Method: http.MethodPut, Path: "/v1/limits",
		Summary: "Replace the workspace's limits (an admin's); every door of every node follows within a second"},
		func(ctx context.Context, in *putLimitsInput) (*limitsOutput, error) {
			a := s.actor(ctx)
			l, err := s.p.SetLimits(ctx, a, in.Body.Document.document(), in.Body.After)
			if err != nil {
				return nil, documentProblem(err)
			}
			s.toolsChanged(ctx, a.WorkspaceID)
			return limitsOutputOf(l), nil
		})
}

func limitsOutputOf(l *platform.Limits) *limitsOutput {
	out := &limitsOutput{}
	b := &out.Body
	for _, lim := range l.Document.Limits {
		b.Document.Limits = append(b.Document.Limits, limitBody{Name: lim.Name, Description: lim.Description, Who: entitlementWho(lim.Who),
			Tools: lim.Tools, Source: lim.Source, When: lim.When, Per: lim.Per, Calls: lim.Calls, Concurrent: lim.Concurrent, Tokens: lim.Tokens, Cost: lim.Cost})
	}
	for _, p := range l.Document.Prices {
		b.Document.Prices = append(b.Document.Prices, priceBody(p))
	}
	b.Version = l.Version
	if l.Version > 0 {
		b.UpdatedBy, b.UpdatedAt = orNull(l.UpdatedBy), &l.UpdatedAt
	}
	return out
}

func (d limitsDocument) document() limits.Document {
	var doc limits.Document
	for _, b := range d.Limits {
		lim := limits.Limit{Name: b.Name, Description: b.Description, Who: entitle.Who(b.Who), Per: b.Per, Calls: b.Calls, Concurrent: b.Concurrent,
			Tokens: b.Tokens, Cost: b.Cost}
		lim.Tools, lim.Source, lim.When = b.Tools, b.Source, b.When
		doc.Limits = append(doc.Limits, lim)
	}
	for _, p := range d.Prices {
		doc.Prices = append(doc.Prices, limits.Price(p))
	}
	return doc
}
