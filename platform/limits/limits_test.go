package limits

import (
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/platform/entitle"
)

func tool(t *testing.T, name string) *quiver.Tool {
	t.Helper()
	return quiver.Func(name, "a tool", func(context.Context, struct{}) (string, error) { return "ok", nil })
}

// clock is a clock a test moves.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func TestDocumentChecks(t *testing.T) {
	for _, tc := range []struct {
		name, doc, field string
	}{
		{"unknown field", `{"limits":[{"name":"a","calls":{"per_minut":3}}]}`, "document"},
		{"bad name", `{"limits":[{"name":"a b","calls":{"per_minute":3}}]}`, "limits[0].name"},
		{"twice", `{"limits":[{"name":"a","calls":{"per_minute":3}},{"name":"a","concurrent":1}]}`, "limits[1].name"},
		{"bounds nothing", `{"limits":[{"name":"a"}]}`, "limits[0]"},
		{"negative", `{"limits":[{"name":"a","calls":{"per_day":-1}}]}`, "limits[0].calls.per_day"},
		{"too large", `{"limits":[{"name":"a","concurrent":2000000000}]}`, "limits[0].concurrent"},
		{"bad per", `{"limits":[{"name":"a","per":["team"],"concurrent":1}]}`, "limits[0].per[0]"},
		{"per twice", `{"limits":[{"name":"a","per":["key","key"],"concurrent":1}]}`, "limits[0].per[1]"},
		{"toolset selector", `{"limits":[{"name":"a","toolset":"x","concurrent":1}]}`, "document"},
		{"bad role", `{"limits":[{"name":"a","who":{"role":"owner"},"concurrent":1}]}`, "limits[0].who.role"},
		{"bad pattern", `{"limits":[{"name":"a","tools":["["],"concurrent":1}]}`, "limits[0].tools[0]"},
		{"price of no model", `{"prices":[{"model":"","input_per_million":1,"output_per_million":1}]}`, "prices[0].model"},
		{"price's bad pattern", `{"prices":[{"model":"openai:[","input_per_million":1,"output_per_million":1}]}`, "prices[0].model"},
		{"negative price", `{"prices":[{"model":"a:*","input_per_million":-1,"output_per_million":1}]}`, "prices[0].input_per_million"},
		{"price too large", `{"prices":[{"model":"a:*","input_per_million":1,"output_per_million":2000000}]}`, "prices[0].output_per_million"},
		{"price of an unknown field", `{"prices":[{"model":"a:*","input_per_1k":1}]}`, "document"},
		{"tokens of a tool", `{"limits":[{"name":"a","tools":["x"],"tokens":{"input_per_day":9}}]}`, "limits[0].tools"},
		{"cost of a source", `{"limits":[{"name":"a","source":"mcp:*","cost":{"per_day":9}}]}`, "limits[0].source"},
		{"tokens of annotated tools", `{"limits":[{"name":"a","when":{"readOnlyHint":true},"tokens":{"input_per_day":9}}]}`, "limits[0].when"},
		{"tokens per tool", `{"limits":[{"name":"a","per":["user","tool"],"tokens":{"output_per_minute":9}}]}`, "limits[0].per[1]"},
		{"negative tokens", `{"limits":[{"name":"a","tokens":{"input_per_minute":-1}}]}`, "limits[0].tokens.input_per_minute"},
		{"too many tokens", `{"limits":[{"name":"a","tokens":{"output_per_day":2000000000000}}]}`, "limits[0].tokens.output_per_day"},
		{"negative cost", `{"limits":[{"name":"a","cost":{"per_month":-0.5}}]}`, "limits[0].cost.per_month"},
		{"too large a cost", `{"limits":[{"name":"a","cost":{"per_day":1e10}}]}`, "limits[0].cost.per_day"},
		{"unknown token bound", `{"limits":[{"name":"a","tokens":{"total_per_day":9}}]}`, "document"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode([]byte(tc.doc))
			fe, ok := err.(*FieldError)
			if !ok || fe.Field != tc.field {
				t.Fatalf("Decode: %v, want a field error at %s", err, tc.field)
			}
		})
	}
	many := Document{}
	for i := range MaxLimits + 1 {
		many.Limits = append(many.Limits, Limit{Name: "l" + strings.Repeat("x", i%5) + string(rune('a'+i%26)), Concurrent: 1})
	}
	if err := many.Check(); err == nil || !strings.Contains(err.Error(), "over the 1000") {
		t.Fatalf("%d limits: %v", len(many.Limits), err)
	}
}

// Every matching limit applies; of those counting one quantity the same way, the most
// specific alone.
func TestMatch(t *testing.T) {
	set, err := Compile(&Document{Limits: []Limit{
		{Name: "each-key", Per: []string{PerKey}, Calls: Rates{PerMinute: 100, PerDay: 1000}},
		{Name: "big-key", Who: whoKey("key_big"), Per: []string{PerKey}, Calls: Rates{PerMinute: 5000}},
		{Name: "workspace", Calls: Rates{PerSecond: 50}, Concurrent: 20},
		{Name: "refunds", Tools: []string{"refund_*"}, Per: []string{PerUser}, Calls: Rates{PerDay: 10}},
		{Name: "viewers", Who: whoRole("viewer"), Calls: Rates{PerMinute: 10}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	lookup, refund := tool(t, "lookup"), tool(t, "refund_payment")
	names := func(cs []Check) string {
		var out []string
		for _, c := range cs {
			out = append(out, c.Limit+":"+c.Quantity.String())
		}
		slices.Sort(out)
		return strings.Join(out, "|")
	}
	for _, tc := range []struct {
		name string
		sub  Subject
		tool *quiver.Tool
		want string
	}{
		{"a key", Subject{Key: "key_a", Role: "member"}, lookup,
			"each-key:calls per day|each-key:calls per minute|workspace:calls per second|workspace:concurrent calls"},
		{"the big key replaces its per-minute limit, keeps the daily one", Subject{Key: "key_big", Role: "member"}, lookup,
			"big-key:calls per minute|each-key:calls per day|workspace:calls per second|workspace:concurrent calls"},
		{"refunds add theirs", Subject{Key: "key_a", User: "usr_1", Role: "member"}, refund,
			"each-key:calls per day|each-key:calls per minute|refunds:calls per day|workspace:calls per second|workspace:concurrent calls"},
		{"viewers", Subject{Key: "key_v", Role: "viewer"}, lookup,
			"each-key:calls per day|each-key:calls per minute|viewers:calls per minute|workspace:calls per second|workspace:concurrent calls"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := names(set.Match(&tc.sub, tc.tool)); got != tc.want {
				t.Fatalf("checks:\n got %s\nwant %s", got, tc.want)
			}
		})
	}
	a := set.Match(&Subject{Key: "key_a"}, lookup)
	b := set.Match(&Subject{Key: "key_b"}, lookup)
	keys := map[string]bool{}
	for _, c := range append(a, b...) {
		keys[c.Key] = true
	}
	if len(keys) != 6 { // each key's minute and day counters, and the workspace's two shared ones
		t.Fatalf("counters of two keys: %v", keys)
	}
}

func whoKey(k string) (w entitle.Who)  { w.Key = k; return }
func whoRole(r string) (w entitle.Who) { w.Role = r; return }

// In one process the counts are exact: a minute's bound lets that many calls through in any
// minute, however the calls fall, and no more.
func TestMeterHoldsEveryMinute(t *testing.T) {
	const max = 100
	clk := &clock{now: time.Date(2026, 11, 29, 23, 59, 30, 0, time.UTC)} // crosses a day
	m := &Meter{Now: clk.Now}
	checks := []Check{{Limit: "l", Quantity: CallsPerMinute, Max: max, Key: "l/m"}}
	rng := rand.New(rand.NewPCG(1, 2))
	var admitted []time.Time
	firstRefusal := time.Duration(0)
	for range 20000 {
		clk.add(time.Duration(rng.IntN(40)) * time.Millisecond)
		done, refusal, err := m.Admit(context.Background(), "wsp_1", checks)
		if err != nil {
			t.Fatal(err)
		}
		if refusal == nil {
			done()
			admitted = append(admitted, clk.Now())
			continue
		}
		if firstRefusal == 0 {
			firstRefusal = refusal.RetryAfter
			res := refusal.Result()
			if res.Code != quiver.CodeRateLimited || !strings.Contains(res.Error, `"l" allows 100 calls per minute`) ||
				!strings.Contains(string(res.Meta), `"retry_after_seconds"`) {
				t.Fatalf("refusal: %+v", res)
			}
		}
	}
	// Any minute: the calls admitted within 60 s after each admitted call.
	j := 0
	for i := range admitted {
		for j < len(admitted) && admitted[j].Sub(admitted[i]) < time.Minute {
			j++
		}
		if n := j - i; n > max {
			t.Fatalf("%d calls in the minute from %s, over %d", n, admitted[i].Format(time.StampMilli), max)
		}
	}
	// And close to it: 20000 calls over ~6.5 minutes at ~50 a second.
	span := admitted[len(admitted)-1].Sub(admitted[0])
	if perMinute := float64(len(admitted)) / span.Minutes(); perMinute < 0.95*max*60/61 {
		t.Fatalf("%.1f calls a minute let through, want close to %d", perMinute, max)
	}
	if firstRefusal <= 0 || firstRefusal > 61*time.Second {
		t.Fatalf("the first refusal's retry after %s", firstRefusal)
	}
}

// The retry a refusal names is when a call fits again: a call made then goes through.
func TestRetryAfterIsRight(t *testing.T) {
	clk := &clock{now: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)}
	m := &Meter{Now: clk.Now}
	checks := []Check{{Limit: "l", Quantity: CallsPerHour, Max: 3, Key: "l/h"}}
	for i := range 3 {
		if _, r, _ := m.Admit(context.Background(), "w", checks); r != nil {
			t.Fatalf("call %d refused", i)
		}
		clk.add(10 * time.Minute)
	}
	_, r, _ := m.Admit(context.Background(), "w", checks)
	if r == nil {
		t.Fatal("a fourth call in the hour went through")
	}
	clk.add(r.RetryAfter - time.Millisecond)
	if _, r2, _ := m.Admit(context.Background(), "w", checks); r2 == nil {
		t.Fatal("a call before the retry went through")
	}
	clk.add(time.Millisecond)
	if _, r3, _ := m.Admit(context.Background(), "w", checks); r3 != nil {
		t.Fatalf("a call at the retry was refused: %+v", r3)
	}
}

// A call refused by one check is counted by none: the others' counts are given back.
func TestRefusedCallsCountNowhere(t *testing.T) {
	clk := &clock{now: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)}
	m := &Meter{Now: clk.Now}
	wide := Check{Limit: "wide", Quantity: CallsPerMinute, Max: 10, Key: "wide/m"}
	narrow := Check{Limit: "narrow", Quantity: CallsPerMinute, Max: 2, Key: "narrow/m"}
	for range 5 {
		m.Admit(context.Background(), "w", []Check{wide, narrow})
	}
	// 2 went through both; 3 were refused by narrow: wide counted 2, so 8 more fit.
	for i := range 8 {
		if _, r, _ := m.Admit(context.Background(), "w", []Check{wide}); r != nil {
			t.Fatalf("call %d of wide alone refused: %+v", i, r)
		}
	}
	if _, r, _ := m.Admit(context.Background(), "w", []Check{wide}); r == nil {
		t.Fatal("wide let an eleventh call through")
	}
}

func TestConcurrent(t *testing.T) {
	m := &Meter{}
	c := []Check{{Limit: "c", Quantity: Concurrent, Max: 2, Key: "c/c"}}
	d1, r1, _ := m.Admit(context.Background(), "w", c)
	d2, r2, _ := m.Admit(context.Background(), "w", c)
	_, r3, _ := m.Admit(context.Background(), "w", c)
	if r1 != nil || r2 != nil || r3 == nil || r3.Result().Code != quiver.CodeRateLimited {
		t.Fatalf("three at once under 2: %v %v %v", r1, r2, r3)
	}
	if _, r, _ := m.Admit(context.Background(), "other", c); r != nil {
		t.Fatal("another workspace's calls were counted")
	}
	d1()
	d4, r4, _ := m.Admit(context.Background(), "w", c)
	if r4 != nil {
		t.Fatal("a place freed was not taken")
	}
	d2()
	d4()
}

// A daily quota is a quota: its refusal says quota_exhausted.
func TestDailyQuotaCode(t *testing.T) {
	m := &Meter{}
	c := []Check{{Limit: "q", Quantity: CallsPerDay, Max: 1, Key: "q/d"}}
	m.Admit(context.Background(), "w", c)
	_, r, _ := m.Admit(context.Background(), "w", c)
	if r == nil || r.Result().Code != quiver.CodeQuotaExhausted {
		t.Fatalf("over a daily quota: %+v", r)
	}
}

// A limit per user holds across the user's keys and its access tokens: changing keys does not
// dodge it; one per key counts a token's calls as its user's.
func TestPerUserHoldsAcrossKeys(t *testing.T) {
	set, err := Compile(&Document{Limits: []Limit{
		{Name: "each-user", Per: []string{PerUser}, Calls: Rates{PerMinute: 2}},
		{Name: "each-key", Per: []string{PerKey}, Calls: Rates{PerHour: 100}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	lookup := tool(t, "lookup")
	m := &Meter{}
	for i, sub := range []Subject{{Key: "key_1", User: "usr_1"}, {Key: "key_2", User: "usr_1"}, {User: "usr_1"}} {
		_, r, err := m.Admit(context.Background(), "w", set.Match(&sub, lookup))
		if err != nil || (i < 2) != (r == nil) {
			t.Fatalf("call %d of usr_1 (%+v): refusal %+v, %v", i, sub, r, err)
		}
	}
	if _, r, _ := m.Admit(context.Background(), "w", set.Match(&Subject{Key: "key_3", User: "usr_2"}, lookup)); r != nil {
		t.Fatalf("another user was refused: %+v", r)
	}
	token := set.Match(&Subject{User: "usr_9"}, lookup)
	keyless := ""
	for _, c := range token {
		if c.Limit == "each-key" {
			keyless = c.Key
		}
	}
	if keyless == "" || keyless == set.Match(&Subject{User: "usr_8"}, lookup)[0].Key {
		t.Fatalf("a token's calls per key: %v", token)
	}
}

// Limits of model requests: chosen by who alone, the most specific of a kind, counted by
// amount once a request ends; a request goes while a window has room and is refused, with the
// time it has room again, once it is full.
func TestModelRequests(t *testing.T) {
	c := &clock{now: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)}
	set, err := Compile(&Document{Limits: []Limit{
		{Name: "each-user", Per: []string{PerUser}, Tokens: Tokens{InputPerMinute: 1000, OutputPerDay: 500}},
		{Name: "alice", Who: entitle.Who{User: "alice"}, Per: []string{PerUser}, Tokens: Tokens{InputPerMinute: 5000}},
		{Name: "team", Cost: Cost{PerDay: 2, PerMonth: 10}},
		{Name: "calls-only", Calls: Rates{PerMinute: 1}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	names := func(checks []Check) []string {
		var out []string
		for _, ch := range checks {
			out = append(out, ch.Limit+" "+ch.Quantity.String())
		}
		slices.Sort(out)
		return out
	}
	bob, alice := &Subject{User: "bob"}, &Subject{User: "alice"}
	if got := names(set.MatchModel(bob)); !slices.Equal(got, []string{"each-user input tokens per minute", "each-user output tokens per day",
		"team cost per day", "team cost per month"}) {
		t.Fatalf("bob's checks: %v", got)
	}
	// alice's own limit replaces the default input bound; the output bound and the team's stay.
	if got := names(set.MatchModel(alice)); !slices.Equal(got, []string{"alice input tokens per minute", "each-user output tokens per day",
		"team cost per day", "team cost per month"}) {
		t.Fatalf("alice's checks: %v", got)
	}
	m := &Meter{Now: c.Now}
	ctx := context.Background()
	room := func(sub *Subject) *Refusal {
		t.Helper()
		r, err := m.Room(ctx, "ws", set.MatchModel(sub))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := room(bob); r != nil {
		t.Fatalf("a first request refused: %+v", r)
	}
	// A request past the bound is counted whole: it was made.
	if err := m.Charge(ctx, "ws", set.MatchModel(bob), 1200, 100, 1_500_000); err != nil {
		t.Fatal(err)
	}
	r := room(bob)
	if r == nil || r.Limit != "each-user" || r.Quantity != InputTokensPerMinute || r.RetryAfter < 55*time.Second || r.RetryAfter > 61*time.Second {
		t.Fatalf("bob over his input tokens: %+v", r)
	}
	if r := room(&Subject{User: "carol"}); r != nil {
		t.Fatalf("carol is refused for bob's tokens: %+v", r)
	}
	c.add(62 * time.Second)
	if r := room(bob); r != nil {
		t.Fatalf("bob a minute later: %+v", r)
	}
	// The team's 2 a day: 1.5 spent, another 0.6 by alice passes it; both are refused, until
	// the spent quarter-hour slots leave the day's window.
	if err := m.Charge(ctx, "ws", set.MatchModel(alice), 10, 10, 600_000); err != nil {
		t.Fatal(err)
	}
	r = room(alice)
	if r == nil || r.Limit != "team" || r.Quantity != CostPerDay || r.Max != 2_000_000 {
		t.Fatalf("alice over the team's day: %+v", r)
	}
	if r.RetryAfter < 23*time.Hour || r.RetryAfter > 24*time.Hour+15*time.Minute {
		t.Fatalf("the day has room again in %s", r.RetryAfter)
	}
	c.add(r.RetryAfter)
	if r := room(alice); r != nil {
		t.Fatalf("after the day: %+v", r)
	}
	st, err := m.Status(ctx, "ws", set)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st {
		if s.Limit == "team" && s.Quantity == CostPerMonth && (s.Used != 2_100_000 || s.Quantity.Period() != "month" || s.Quantity.Measure() != "cost") {
			t.Fatalf("the team's month: %+v", s)
		}
	}
	// Calls are no model requests, and model requests no calls.
	if checks := set.Match(bob, tool(t, "x")); len(checks) != 1 || checks[0].Limit != "calls-only" {
		t.Fatalf("a call's checks: %v", checks)
	}
}

// A price's pattern matches model names with / in them, as a provider's names are
// ("openrouter:meta-llama/llama-3.1-8b"); the first match applies.
func TestPriceMatch(t *testing.T) {
	doc := Document{Prices: []Price{
		{Model: "openai:gpt-4o-mini*", InputPerMillion: 0.15, OutputPerMillion: 0.6},
		{Model: "openai:*", InputPerMillion: 2.5, OutputPerMillion: 10},
		{Model: "openrouter:meta-llama/*", InputPerMillion: 0.1},
		{Model: "local:models/?b", InputPerMillion: 1},
	}}
	for _, c := range []struct {
		model string
		want  int64
	}{
		{"openai:gpt-4o-mini-2024-07-18", 750_000},
		{"openai:gpt-4o", 12_500_000},
		{"openrouter:meta-llama/llama-3.1-8b", 100_000},
		{"openrouter:mistral/large", 0},
		{"local:models/7b", 1_000_000},
		{"local:models/70b", 0},
		{"anthropic:claude", 0},
	} {
		if got := doc.CostMicros(c.model, 1_000_000, 1_000_000); got != c.want {
			t.Errorf("%s costs %d, want %d", c.model, got, c.want)
		}
	}
}
