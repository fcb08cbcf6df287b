// Package limits holds a workspace's limits on calls and on model requests: how many calls its
// callers may make per second, minute, hour and day, and how many may run at once; how many
// model tokens their agent runs may use per minute and day, and what those may cost per day and
// month. A limit selects calls by who makes them and which tool they call (as the entitlement
// rules do), and counts them together or separately per key, user, agent, toolset or tool
// (Per): "each key 100 calls a minute", "the refunds tool 10 a day for each user", "the
// workspace 50 calls at once", "each user 2 million input tokens a day", "the support team 40
// a month".
//
// Every limit that matches a call applies; among the limits that count the same thing the
// same way (one quantity, one Per), the most specific applies alone, so that a key's own limit
// replaces the default every key has while the workspace's total still holds. A limit is
// more specific than another when it sets more of who and which tools.
//
// A Document is compiled once, when it changes (Compile); a call is checked against the
// compiled Set (Match) and counted by a Meter.
package limits

import (
	"fmt"
	"math"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/platform/entitle"
)

// Document is a workspace's limits.
type Document struct {
	// Limits are the workspace's limits. Every limit that selects a call applies; among those
	// that count the same thing the same way, the most specific applies alone.
	Limits []Limit `json:"limits,omitempty" yaml:"limits,omitempty"`
	// Prices are what model requests cost, by model: the workspace's price table, which
	// usage's cost reads. Quiver has no prices built in, so none go stale; a model without a
	// price costs nothing.
	Prices []Price `json:"prices,omitempty" yaml:"prices,omitempty"`
}

// Price is what a model's tokens cost, in the unit the operator chooses (dollars, euros,
// credits), per million tokens.
type Price struct {
	// Model is a pattern over the model's name as a prompt gives it, "provider:model"
	// ("openai:gpt-4o*", "anthropic:*", "openrouter:meta-llama/*"): path.Match's, but for *
	// and ? matching / too, which model names hold. The first price whose pattern matches
	// applies.
	Model string `json:"model" yaml:"model"`
	// InputPerMillion is the price of a million input (prompt) tokens.
	InputPerMillion float64 `json:"input_per_million" yaml:"input_per_million"`
	// OutputPerMillion is the price of a million output (completion) tokens.
	OutputPerMillion float64 `json:"output_per_million" yaml:"output_per_million"`
}

// Limit bounds the calls it selects.
type Limit struct {
	// Name names the limit in refusals and usage: 1 to 64 characters of [a-zA-Z0-9_.-].
	Name string `json:"name" yaml:"name"`
	// Description says what the limit is for; the API returns it with the limit.
	Description string `json:"description,omitempty" yaml:"description,omitempty"`
	// Who selects the callers it applies to (none set: every caller).
	Who entitle.Who `json:"who,omitzero" yaml:"who,omitempty"`
	// Tools, Source and When select the tools it applies to, as an entitlement rule's do (none
	// set: every tool). A limit does not select tools by toolset: it names the callers who come
	// through one with who.toolset, or counts per toolset.
	Tools []string `json:"tools,omitempty" yaml:"tools,omitempty"`
	// Source is a path.Match pattern over where a tool came from ("openapi:payments",
	// "mcp:*"), as an entitlement rule's source is.
	Source string `json:"source,omitempty" yaml:"source,omitempty"`
	// When selects tools by the annotations they were made with, as an entitlement rule's
	// when does (see quiver.Hints).
	When quiver.Hints `json:"when,omitzero" yaml:"when,omitempty"`
	// Per says what the limit counts separately: key, user, agent (the agent whose run
	// calls), toolset (the address the call came through) or tool; none counts every call it
	// selects together.
	Per []string `json:"per,omitempty" yaml:"per,omitempty"`
	// Calls bounds the calls it counts per second, minute, hour and day.
	Calls Rates `json:"calls,omitzero" yaml:"calls,omitempty"`
	// Concurrent bounds the calls it counts that run at once; 0: no bound.
	Concurrent int `json:"concurrent,omitempty" yaml:"concurrent,omitempty"`
	// Tokens bounds the model tokens of the agent runs it selects, per minute and day. A run
	// whose next model request would go past a bound already reached stops, resumably, until
	// the bound has room again (budget_exhausted). A limit with tokens or cost selects by
	// who alone: a model request calls no tool.
	Tokens Tokens `json:"tokens,omitzero" yaml:"tokens,omitempty"`
	// Cost bounds what the model requests of the runs it selects cost by the price table
	// (Prices), per day and month, in the table's unit, as Tokens do.
	Cost Cost `json:"cost,omitzero" yaml:"cost,omitempty"`
}

// Tokens are bounds on model tokens; 0 leaves one unbounded.
type Tokens struct {
	// InputPerMinute bounds the input (prompt) tokens of a minute; 0: no bound.
	InputPerMinute int64 `json:"input_per_minute,omitempty" yaml:"input_per_minute,omitempty"`
	// InputPerDay bounds the input tokens of a day; 0: no bound.
	InputPerDay int64 `json:"input_per_day,omitempty" yaml:"input_per_day,omitempty"`
	// OutputPerMinute bounds the output (completion) tokens of a minute; 0: no bound.
	OutputPerMinute int64 `json:"output_per_minute,omitempty" yaml:"output_per_minute,omitempty"`
	// OutputPerDay bounds the output tokens of a day; 0: no bound.
	OutputPerDay int64 `json:"output_per_day,omitempty" yaml:"output_per_day,omitempty"`
}

// Cost are bounds on what model requests cost, in the price table's unit; 0 leaves one
// unbounded.
type Cost struct {
	// PerDay bounds the cost of a day (the last 24 hours); 0: no bound.
	PerDay float64 `json:"per_day,omitempty" yaml:"per_day,omitempty"`
	// PerMonth bounds the cost of a month (the last 30 days); 0: no bound.
	PerMonth float64 `json:"per_month,omitempty" yaml:"per_month,omitempty"`
}

// models reports whether l bounds model requests.
func (l *Limit) models() bool { return l.Tokens != (Tokens{}) || l.Cost != (Cost{}) }

// Rates are counts per period; 0 leaves a period unbounded.
type Rates struct {
	// PerSecond bounds the calls counted in a second; 0: no bound.
	PerSecond int `json:"per_second,omitempty" yaml:"per_second,omitempty"`
	// PerMinute bounds the calls counted in a minute; 0: no bound.
	PerMinute int `json:"per_minute,omitempty" yaml:"per_minute,omitempty"`
	// PerHour bounds the calls counted in an hour; 0: no bound.
	PerHour int `json:"per_hour,omitempty" yaml:"per_hour,omitempty"`
	// PerDay bounds the calls counted in a day; 0: no bound.
	PerDay int `json:"per_day,omitempty" yaml:"per_day,omitempty"`
}

// The dimensions a limit may count per.
const (
	PerKey     = "key"
	PerUser    = "user"
	PerAgent   = "agent"
	PerToolset = "toolset"
	PerTool    = "tool"
)

var dimensions = []string{PerKey, PerUser, PerAgent, PerToolset, PerTool}

// Bounds of a Document.
const (
	MaxLimits = 1000 // limits a workspace
	MaxCount  = 1_000_000_000
	MaxTokens = 1_000_000_000_000 // a bound of tokens
	MaxCost   = 1_000_000_000     // a bound of cost, in the price table's unit
	MaxPrices = 1000              // prices a workspace's table
	MaxPrice  = 1_000_000         // the price of a million tokens
)

var limitName = regexp.MustCompile(`^[a-zA-Z0-9_.-]{1,64}$`)

// FieldError is a Document that does not check: Field says where ("limits[2].calls").
type FieldError = entitle.FieldError

// Decode reads a Document from JSON, refusing fields it does not know (a misspelt
// "per_minut" would otherwise bound nothing), and checks it.
func Decode(data []byte) (*Document, error) {
	return entitle.DecodeChecked[Document](data, "a limits document")
}

// Check reports the first part of d that is malformed or over a bound, naming it.
func (d *Document) Check() error {
	if len(d.Limits) > MaxLimits {
		return &FieldError{Field: "limits", Message: fmt.Sprintf("%d limits are over the %d a workspace may have", len(d.Limits), MaxLimits)}
	}
	seen := make(map[string]bool, len(d.Limits))
	for i := range d.Limits {
		l := &d.Limits[i]
		field := fmt.Sprintf("limits[%d]", i)
		if err := l.check(field); err != nil {
			return err
		}
		if seen[l.Name] {
			return &FieldError{Field: field + ".name", Message: fmt.Sprintf("the limit %q is defined twice", l.Name)}
		}
		seen[l.Name] = true
	}
	return checkPrices(d.Prices)
}

func checkPrices(prices []Price) error {
	if len(prices) > MaxPrices {
		return &FieldError{Field: "prices", Message: fmt.Sprintf("%d prices are over the %d a workspace may have", len(prices), MaxPrices)}
	}
	for i, p := range prices {
		field := fmt.Sprintf("prices[%d]", i)
		if _, err := path.Match(p.Model, ""); err != nil || p.Model == "" || len(p.Model) > 200 {
			return &FieldError{Field: field + ".model", Message: fmt.Sprintf("%q is not a pattern of up to 200 bytes over model names (provider:model, * and ? as wildcards)", truncate(p.Model, 80))}
		}
		for name, v := range map[string]float64{"input_per_million": p.InputPerMillion, "output_per_million": p.OutputPerMillion} {
			if !(v >= 0 && v <= MaxPrice) { // NaN fails both
				return &FieldError{Field: field + "." + name, Message: fmt.Sprintf("%v is not between 0 and %d", v, MaxPrice)}
			}
		}
	}
	return nil
}

// CostMicros is what a request of model that used input and output tokens costs, in
// millionths of the price table's unit: its first matching price's, or 0.
func (d *Document) CostMicros(model string, input, output int64) int64 {
	for _, p := range d.Prices {
		if matchModel(p.Model, model) {
			return int64(math.Round(float64(input)*p.InputPerMillion + float64(output)*p.OutputPerMillion))
		}
	}
	return 0
}

// matchModel reports whether a price's pattern matches a model's name: as path.Match does, but
// with / an ordinary character, as it is in a model's name ("openrouter:meta-llama/llama-3").
func matchModel(pattern, name string) bool {
	const sep = "\x1f" // a character no model name or pattern holds, in place of /
	ok, _ := path.Match(strings.ReplaceAll(pattern, "/", sep), strings.ReplaceAll(name, "/", sep))
	return ok
}

func (l *Limit) check(field string) error {
	switch {
	case !limitName.MatchString(l.Name):
		return &FieldError{Field: field + ".name", Message: fmt.Sprintf("%q is not 1 to 64 characters of a-z, A-Z, 0-9, _, . and -", truncate(l.Name, 80))}
	case len(l.Description) > entitle.MaxText:
		return &FieldError{Field: field + ".description", Message: fmt.Sprintf("over %d bytes", entitle.MaxText)}
	case l.Calls == (Rates{}) && l.Concurrent == 0 && !l.models():
		return &FieldError{Field: field, Message: "bounds nothing: give calls (per_second, per_minute, per_hour, per_day), concurrent, tokens or cost"}
	}
	if err := entitle.CheckWho(&l.Who, field+".who"); err != nil {
		return err
	}
	if err := entitle.CheckSelector(l.selector(), field); err != nil {
		return err
	}
	for i, p := range l.Per {
		if !slices.Contains(dimensions, p) {
			return &FieldError{Field: fmt.Sprintf("%s.per[%d]", field, i), Message: fmt.Sprintf("%q is none of %s", truncate(p, 80), strings.Join(dimensions, ", "))}
		}
		if slices.Index(l.Per, p) != i {
			return &FieldError{Field: fmt.Sprintf("%s.per[%d]", field, i), Message: fmt.Sprintf("%q is named twice", p)}
		}
	}
	if err := l.checkModels(field); err != nil {
		return err
	}
	return l.checkBounds(field)
}

// checkModels refuses a limit of model requests that selects or counts by tool: a model
// request calls none, so such a limit would never count one.
func (l *Limit) checkModels(field string) error {
	if !l.models() {
		return nil
	}
	for _, sel := range []struct {
		name string
		set  bool
	}{{"tools", len(l.Tools) > 0}, {"source", l.Source != ""}, {"when", l.When != (quiver.Hints{})}} {
		if sel.set {
			return &FieldError{Field: field + "." + sel.name, Message: "a limit that bounds tokens or cost, which model requests use, selects no tools " +
				"(tools, source, when): a model request calls none; give the tokens and cost in a limit that selects by who alone"}
		}
	}
	if i := slices.Index(l.Per, PerTool); i >= 0 {
		return &FieldError{Field: fmt.Sprintf("%s.per[%d]", field, i), Message: "a limit of tokens or cost cannot count per tool: a model request calls none"}
	}
	return nil
}

// checkBounds refuses a bound below 0 or over its maximum.
func (l *Limit) checkBounds(field string) error {
	for _, c := range []struct {
		name   string
		n, max int64
	}{{"calls.per_second", int64(l.Calls.PerSecond), MaxCount}, {"calls.per_minute", int64(l.Calls.PerMinute), MaxCount},
		{"calls.per_hour", int64(l.Calls.PerHour), MaxCount}, {"calls.per_day", int64(l.Calls.PerDay), MaxCount},
		{"concurrent", int64(l.Concurrent), MaxCount}, {"tokens.input_per_minute", l.Tokens.InputPerMinute, MaxTokens},
		{"tokens.input_per_day", l.Tokens.InputPerDay, MaxTokens}, {"tokens.output_per_minute", l.Tokens.OutputPerMinute, MaxTokens},
		{"tokens.output_per_day", l.Tokens.OutputPerDay, MaxTokens}} {
		if c.n < 0 || c.n > c.max {
			return &FieldError{Field: field + "." + c.name, Message: fmt.Sprintf("%d is not between 0 and %d", c.n, c.max)}
		}
	}
	for _, c := range []struct {
		name string
		v    float64
	}{{"cost.per_day", l.Cost.PerDay}, {"cost.per_month", l.Cost.PerMonth}} {
		if !(c.v >= 0 && c.v <= MaxCost) { // NaN fails both
			return &FieldError{Field: field + "." + c.name, Message: fmt.Sprintf("%v is not between 0 and %d", c.v, MaxCost)}
		}
	}
	return nil
}

func truncate(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// selector is the entitlement rules' selector of the tools l applies to.
func (l *Limit) selector() *entitle.Selector {
	return &entitle.Selector{Tools: l.Tools, Source: l.Source, When: l.When}
}
