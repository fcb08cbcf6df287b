package limits_test

import (
	"context"
	"fmt"
	"time"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/platform/entitle"
	"github.com/quiverhq/quiver/platform/limits"
)

// A call is counted against the limits that select it: each key 2 calls a minute here, so
// a key's third call is refused, saying when to try again.
func ExampleMeter_Admit() {
	set, err := limits.Compile(&limits.Document{Limits: []limits.Limit{
		{Name: "each-key", Per: []string{limits.PerKey}, Calls: limits.Rates{PerMinute: 2}},
	}})
	if err != nil {
		panic(err)
	}
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	m := &limits.Meter{Now: func() time.Time { return now }}
	lookup := quiver.Func("lookup", "Looks up an order.", func(context.Context, struct{}) (string, error) { return "ok", nil })
	caller := &limits.Subject{Key: "key_1", User: "usr_1"}
	for range 3 {
		done, refusal, err := m.Admit(context.Background(), "wsp_1", set.Match(caller, lookup))
		switch {
		case err != nil:
			panic(err)
		case refusal != nil:
			fmt.Println(refusal.Result().Code, refusal.Reached())
		default:
			fmt.Println("let through")
			done()
		}
	}
	// Output:
	// let through
	// let through
	// rate_limited the limit "each-key" allows 2 calls per minute and is reached
}

// A model request goes while the caller's budget has room, and is charged what it used once
// it has ended: here an agent's runs may use 1,000 input tokens a minute, and a request of
// 1,200 leaves no room until the minute has passed.
func ExampleMeter_Room() {
	set, err := limits.Compile(&limits.Document{Limits: []limits.Limit{
		{Name: "researcher", Who: entitle.Who{Agent: "researcher"}, Tokens: limits.Tokens{InputPerMinute: 1000}},
	}})
	if err != nil {
		panic(err)
	}
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	m := &limits.Meter{Now: func() time.Time { return now }}
	ctx := context.Background()
	run := &limits.Subject{User: "usr_1", Agents: []string{"researcher"}}
	checks := set.MatchModel(run)

	refusal, _ := m.Room(ctx, "wsp_1", checks)
	fmt.Println("first request refused:", refusal != nil)
	_ = m.Charge(ctx, "wsp_1", checks, 1200, 300, 0)
	refusal, _ = m.Room(ctx, "wsp_1", checks)
	fmt.Printf("%s; room again in %s\n", refusal.Reached(), refusal.RetryAfter)
	now = now.Add(time.Minute + time.Second)
	refusal, _ = m.Room(ctx, "wsp_1", checks)
	fmt.Println("a minute later refused:", refusal != nil)
	// Output:
	// first request refused: false
	// the limit "researcher" allows 1000 input tokens per minute and is reached; room again in 1m1s
	// a minute later refused: false
}
