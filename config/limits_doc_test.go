package config_test

import (
	"bytes"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/config"
	"github.com/quiverhq/quiver/platform/limits"
)

// docs/guides/limits.md's examples are what Quiver reads: every JSON limits document decodes
// strictly and compiles, its budgets bound whom the guide says, every YAML block is a
// configuration file that parses, and the paused run it shows is a run's outcome as stored.
func TestLimitsGuideExamples(t *testing.T) {
	md, err := os.ReadFile("../docs/guides/limits.md")
	if err != nil {
		t.Fatal(err)
	}
	var docs, outcomes int
	for _, block := range docBlocks(string(md), "json") {
		switch {
		case strings.Contains(block, `"limits"`):
			docs++
			doc, err := limits.Decode([]byte(block))
			if err != nil {
				t.Fatalf("a limits document of the guide: %v\n%s", err, block)
			}
			set, err := limits.Compile(doc)
			if err != nil {
				t.Fatal(err)
			}
			if len(doc.Prices) > 0 {
				checkBudgetExample(t, doc, set)
			}
		case strings.Contains(block, `"budget_exhausted"`):
			outcomes++
			var out agent.Outcome
			d := json.NewDecoder(bytes.NewReader([]byte(block)))
			d.DisallowUnknownFields()
			if err := d.Decode(&out); err != nil || out.Budget == nil || out.Reason != agent.ReasonBudgetExhausted {
				t.Fatalf("the guide's paused run: %v %+v", err, out)
			}
			r := limits.Refusal{Limit: out.Budget.Limit, Quantity: limits.CostPerDay, Max: 20_000_000}
			if !strings.HasPrefix(out.Budget.Message, r.Reached()+": the run goes on at ") {
				t.Errorf("the guide's message %q is not what a run says (%q...)", out.Budget.Message, r.Reached())
			}
		}
	}
	if docs < 2 || outcomes != 1 {
		t.Fatalf("found %d limits documents and %d paused runs in the guide", docs, outcomes)
	}
	for _, block := range docBlocks(string(md), "yaml") {
		f, err := config.Parse(strings.NewReader(block), "limits.md")
		if err != nil || f.Limits == nil || len(f.Limits.Limits) == 0 {
			t.Fatalf("a configuration of the guide: %v\n%s", err, block)
		}
	}
}

// checkBudgetExample: a support member's run of the researcher is bounded by the team's
// spend and the researcher's, and by the tokens every user has; gpt-4o-mini has its own price,
// and a model of OpenRouter's, whose name holds a /, has one.
func checkBudgetExample(t *testing.T, doc *limits.Document, set *limits.Set) {
	t.Helper()
	sub := &limits.Subject{User: "usr_1", Claims: map[string]any{"team": "support"}, Agents: []string{"researcher"}}
	var got []string
	for _, ch := range set.MatchModel(sub) {
		got = append(got, ch.Limit+" "+ch.Quantity.String())
	}
	slices.Sort(got)
	want := []string{"each-user-tokens input tokens per day", "each-user-tokens input tokens per minute", "each-user-tokens output tokens per day",
		"research-agent cost per day", "support-spend cost per day", "support-spend cost per month"}
	if !slices.Equal(got, want) {
		t.Errorf("a support member's research run is bounded by\n%q\nwant\n%q", got, want)
	}
	if c := doc.CostMicros("openai:gpt-4o-mini", 1_000_000, 1_000_000); c != 750_000 {
		t.Errorf("gpt-4o-mini: %d", c)
	}
	if c := doc.CostMicros("openrouter:meta-llama/llama-3.1-8b", 1_000_000, 1_000_000); c != 200_000 {
		t.Errorf("llama over OpenRouter: %d", c)
	}
}
