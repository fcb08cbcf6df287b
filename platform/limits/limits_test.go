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
