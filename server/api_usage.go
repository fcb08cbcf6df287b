package server

import (
	"bytes"
	"context"
	"encoding/csv"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/quiverhq/quiver/platform/usage"
)

// The workspace's usage: its calls and model requests, metered at every door and run, summed
// in buckets and groups (package usage has how).

type usageInput struct {
	From    time.Time `query:"from" doc:"The range's start (RFC 3339), moved back to its bucket's start. Default: 24 hours before to."`
	To      time.Time `query:"to" doc:"The range's end (RFC 3339), excluded, moved on to its bucket's end. Default: now. At most 400 days after from."`
	Bucket  string    `query:"bucket" enum:"minute,hour,day,all" default:"hour" doc:"The buckets the range is summed into (UTC): minute (the last 48 hours only), hour, day, or all (one bucket)."`
	GroupBy string    `query:"group_by" doc:"Comma-separated dimensions the rows keep: key, user, agent (the agent whose run called), tool, model. Absent: the workspace's totals per bucket." example:"tool,key"`
	Format  string    `query:"format" enum:"json,csv" default:"json" doc:"json, or csv: one line per row, with a header line."`
}

// UsageFigures are usage's figures, in a row or in the totals.
type UsageFigures struct {
	Calls        int64   `json:"calls" doc:"Calls of tools."`
	Errors       int64   `json:"errors" doc:"Calls that ended with an error result other than a refusal."`
	Refusals     int64   `json:"refusals" doc:"Calls refused before they ran: a limit (rate_limited, quota_exhausted), an entitlement (not_entitled), a policy."`
	P50MS        float64 `json:"p50_ms" doc:"The calls' median duration in milliseconds, read from a histogram (within 41%); 0 without calls."`
	P95MS        float64 `json:"p95_ms" doc:"The calls' 95th percentile duration in milliseconds, as p50_ms."`
	Requests     int64   `json:"requests" doc:"Requests to models, by the workspace's agent runs."`
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	Cost         float64 `json:"cost" doc:"What the requests cost by the workspace's price table (the prices of its limits document), in the table's unit; 0 for models without a price."`
}

// UsageRow is the usage of one bucket by one combination of the grouped dimensions.
type UsageRow struct {
	Start time.Time `json:"start" doc:"The bucket's start."`
	Key   string    `json:"key,omitempty" doc:"The API key, when grouped by key; \"\" for calls without one (an access token's, the operator's)."`
	User  string    `json:"user,omitempty"`
	Agent string    `json:"agent,omitempty" doc:"The agent whose run called or asked the model; \"\" for calls at a door."`
	Tool  string    `json:"tool,omitempty" doc:"The tool; (unknown) for names no tool of the workspace has, \"\" for model requests."`
	Model string    `json:"model,omitempty" doc:"The model (provider:model); \"\" for calls."`
	UsageFigures
}

// UsageBody is GET /v1/usage's answer.
type UsageBody struct {
	From    time.Time    `json:"from" doc:"The range summed: from, moved back to its bucket's start."`
	To      time.Time    `json:"to" doc:"The range's end, moved on to its bucket's end."`
	Bucket  string       `json:"bucket"`
	GroupBy []string     `json:"group_by"`
	Rows    []UsageRow   `json:"rows" doc:"By bucket, then busiest first. (other) stands for every value a node counted past its bound of distinct rows between writes."`
	Totals  UsageFigures `json:"totals" doc:"The rows together."`
}

type usageOutput struct {
	ContentType        string `header:"Content-Type"`
	ContentDisposition string `header:"Content-Disposition"`
	Body               any
}

// registerUsage adds the workspace's usage.
func (s *Server) registerUsage(api huma.API) {
	schemas := api.OpenAPI().Components.Schemas
	register(api, huma.Operation{OperationID: "get-usage", Method: http.MethodGet, Path: "/v1/usage",
		Summary: "The workspace's usage: calls, errors, refusals, durations, model tokens and cost, by bucket and by key, user, agent, tool or model (an admin's)",
		Description: "Every node meters the calls and model requests it serves and writes them every few seconds: the node asked answers with its own so far, " +
			"the others' within their period (5 seconds unless configured). Hour and day rows are kept for the server's usage retention, minute rows for 48 hours.",
		Responses: map[string]*huma.Response{
			"200": {Description: "The usage.", Content: map[string]*huma.MediaType{
				"application/json": {Schema: huma.SchemaFromType(schemas, reflect.TypeFor[UsageBody]())},
				"text/csv":         {Schema: &huma.Schema{Type: huma.TypeString}},
			}},
			"default": {Description: "Error", Content: map[string]*huma.MediaType{"application/problem+json": {Schema: schemas.Schema(reflect.TypeFor[ProblemDetails](), true, "Error")}}},
		}},
		func(ctx context.Context, in *usageInput) (*usageOutput, error) {
			q := usage.Query{From: in.From, To: in.To, Bucket: in.Bucket}
			if q.To.IsZero() {
				q.To = time.Now()
			}
			if q.From.IsZero() {
				q.From = q.To.Add(-24 * time.Hour)
			}
			if in.GroupBy != "" {
				q.GroupBy = strings.Split(in.GroupBy, ",")
			}
			a, err := s.p.Usage(ctx, s.actor(ctx), q)
			if err != nil {
				return nil, problem(err, "query")
			}
			body := usageBodyOf(a)
			if in.Format == "csv" {
				return &usageOutput{ContentType: "text/csv; charset=utf-8", ContentDisposition: `attachment; filename="usage.csv"`, Body: usageCSV(body)}, nil
			}
			return &usageOutput{Body: body}, nil
		})
}

func usageBodyOf(a *usage.Answer) *UsageBody {
	b := &UsageBody{From: a.From, To: a.To, Bucket: a.Bucket, GroupBy: a.GroupBy, Rows: make([]UsageRow, len(a.Rows)), Totals: figures(&a.Totals)}
	if b.GroupBy == nil {
		b.GroupBy = []string{}
	}
	for i, r := range a.Rows {
		b.Rows[i] = UsageRow{Start: r.Start, Key: r.Key, User: r.User, Agent: r.Agent, Tool: r.Tool, Model: r.Model, UsageFigures: figures(&r.Totals)}
	}
	return b
}

func figures(t *usage.Totals) UsageFigures {
	return UsageFigures{Calls: t.Calls, Errors: t.Errors, Refusals: t.Refusals, P50MS: ms(t.P50), P95MS: ms(t.P95),
		Requests: t.Requests, InputTokens: t.InputTokens, OutputTokens: t.OutputTokens, Cost: t.Cost}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// usageCSV writes b's rows as CSV: the bucket's start, the grouped dimensions, the figures.
// A value that a spreadsheet would read as a formula (=, +, -, @ first) is written with a
// leading quote, so that a key or tool name cannot run in the reader's spreadsheet.
func usageCSV(b *UsageBody) []byte {
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	header := append(append([]string{"start"}, b.GroupBy...), "calls", "errors", "refusals", "p50_ms", "p95_ms", "requests", "input_tokens", "output_tokens", "cost")
	_ = w.Write(header)
	for _, r := range b.Rows {
		line := []string{r.Start.Format(time.RFC3339)}
		for _, g := range b.GroupBy {
			line = append(line, spreadsheetSafe(dimValue(&r, g)))
		}
		f := r.UsageFigures
		line = append(line, itoa(f.Calls), itoa(f.Errors), itoa(f.Refusals), ftoa(f.P50MS), ftoa(f.P95MS), itoa(f.Requests),
			itoa(f.InputTokens), itoa(f.OutputTokens), ftoa(f.Cost))
		_ = w.Write(line)
	}
	w.Flush()
	return buf.Bytes()
}

func dimValue(r *UsageRow, dim string) string {
	switch dim {
	case "key":
		return r.Key
	case "user":
		return r.User
	case "agent":
		return r.Agent
	case "tool":
		return r.Tool
	}
	return r.Model
}

func spreadsheetSafe(v string) string {
	if v != "" && strings.ContainsRune("=+-@\t\r", rune(v[0])) {
		return "'" + v
	}
	return v
}

func itoa(n int64) string   { return strconv.FormatInt(n, 10) }
func ftoa(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
