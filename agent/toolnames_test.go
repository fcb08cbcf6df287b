package agent_test

import (
	"context"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/schema"
)

// pickingModel calls the tool registered as target by the name the request offers it under,
// as a real model would (it only knows what it was sent), then answers with text.
type pickingModel struct {
	dialect schema.Dialect
	target  string
	mu      sync.Mutex
	reqs    []*model.Request
	called  string
}

func (m *pickingModel) Name() string            { return "test:picking" }
func (m *pickingModel) Dialect() schema.Dialect { return m.dialect }

func (m *pickingModel) Generate(_ context.Context, req *model.Request, _ func(model.Delta)) (*model.Response, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reqs = append(m.reqs, req)
	if len(m.reqs) > 1 {
		return &model.Response{Text: "It is sunny."}, nil
	}
	for _, rt := range req.Tools.Tools {
		if rt.Canonical == m.target {
			m.called = rt.Name
		}
	}
	return &model.Response{ToolCalls: calls(call("c1", m.called, `{"city":"Oslo"}`))}, nil
}

var providerNameRE = map[schema.Dialect]*regexp.Regexp{
	schema.OpenAI:       regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`),
	schema.OpenAIStrict: regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`),
	schema.Anthropic:    regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`),
	schema.Gemini:       regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}$`),
}

// Seed 003 §8.3: a tool named "look up: weather?" is accepted (with a warning), offered to each
// provider under a name it accepts, apart from the tools whose names sanitize alike, and the
// model's call by that name runs that tool's handler, not another's. The history sent back
// names the call as the provider knows it; the thread records the registered name.
func TestModelCallsAToolWithAHostileName(t *testing.T) {
	const target = "look up: weather?"
	lookalikes := []string{target, "look up; weather!", "look_up__weather_", "look/up/:weather?"}
	for d, nameRE := range providerNameRE {
		t.Run(string(d), func(t *testing.T) {
			m := &pickingModel{dialect: d, target: target}
			p := &agent.Prompt{Name: "p", System: "You help.", Tools: lookalikes}
			f := newFixture(t, m, p)
			for _, n := range lookalikes {
				var opts []quiver.Option
				if n == target {
					opts = append(opts, quiver.WithExamples(quiver.Example{Args: json.RawMessage(`{"city":"Rome"}`)}))
				}
				tool, err := quiver.NewFunc(n, "Looks up the weather.", func(_ context.Context, in struct {
					City string `json:"city"`
				}) (string, error) {
					f.ran.add(n + ":" + in.City)
					return "sunny in " + in.City, nil
				}, opts...)
				if err != nil {
					t.Fatal(err)
				}
				if err := f.reg.Register(tool); err != nil {
					t.Fatalf("%q refused: %v", n, err)
				}
			}
			out, err := f.r.Run(ctx, f.th, f.agent, "weather in Oslo?")
			if err != nil {
				t.Fatal(err)
			}
			if out.Status != agent.RunFinished || out.Text != "It is sunny." {
				t.Fatalf("outcome %+v", out)
			}
			if got := f.ran.list(); !slices.Equal(got, []string{target + ":Oslo"}) {
				t.Fatalf("ran %v, want the handler of %q only", got, target)
			}
			if m.called == "" || m.called == target || !nameRE.MatchString(m.called) {
				t.Fatalf("offered as %q, which %s rejects", m.called, d)
			}
			offered := map[string]bool{}
			for _, rt := range m.reqs[0].Tools.Tools {
				if offered[rt.Name] || !nameRE.MatchString(rt.Name) {
					t.Errorf("%q offered as %q: invalid or given twice", rt.Canonical, rt.Name)
				}
				offered[rt.Name] = true
			}
			// The second request carries the call and its result under the offered name.
			second := m.reqs[1]
			if second.Messages[1].ToolCalls[0].Name != m.called || second.Messages[2].ToolName != m.called {
				t.Errorf("history not sent under the offered name %q: %+v", m.called, second.Messages[1:])
			}
			results := f.results(t)
			if r := results["c1"]; r == nil || r.Status != quiver.StatusSuccess {
				t.Fatalf("result %+v", r)
			}
			hist, err := f.th.History(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got := hist[1].ToolCalls[0].Name; got != target {
				t.Errorf("the call was recorded as %q, want %q", got, target)
			}
			// The examples in the system prompt name the tool as the model is offered it.
			if sys := m.reqs[0].System; !strings.Contains(sys, "- "+m.called+` {"city":"Rome"}`) || strings.Contains(sys, target) {
				t.Errorf("the example does not name the tool %q: %q", m.called, sys)
			}
		})
	}
}
