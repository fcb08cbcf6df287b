package quiver_test

import (
	"context"
	"strings"
	"testing"

	"github.com/quiverhq/quiver"
)

type callerKey struct{}

// A caller's entitlements decide before anything else of a call: a tool hidden from them and a
// name no tool has are answered alike (not_entitled, the same words, the list of what they may
// call), whatever the arguments; a caller nothing restricts is answered as before.
func TestEntitledCallers(t *testing.T) {
	reg := &quiver.Registry{}
	echo := func(context.Context, struct {
		N int `json:"n"`
	}) (string, error) {
		return "ran", nil
	}
	if err := reg.Register(quiver.Func("lookup_order", "Looks an order up.", echo), quiver.Func("refund_payment", "Refunds.", echo)); err != nil {
		t.Fatal(err)
	}
	d := &quiver.Dispatcher{Registry: reg, Entitled: func(ctx context.Context) func(*quiver.Tool) bool {
		if ctx.Value(callerKey{}) != "support" {
			return nil
		}
		return func(t *quiver.Tool) bool { return t.Name() == "lookup_order" }
	}}
	support := context.WithValue(context.Background(), callerKey{}, "support")
	hidden, _ := d.Call(support, "refund_payment", map[string]any{"n": 1})
	missing, _ := d.Call(support, "no_such_tool", map[string]any{"n": 1})
	badArgs, _ := d.Call(support, "refund_payment", `not json`)
	for _, r := range []*quiver.Result{hidden, missing, badArgs} {
		if r.Code != quiver.CodeNotEntitled || strings.Contains(r.Error, "refund_payment\", ") || !strings.Contains(r.Error, "Available tools: lookup_order.") {
			t.Errorf("refused %s: %q", r.Code, r.Error)
		}
	}
	if a, b := strings.Replace(hidden.Error, "refund_payment", "X", 1), strings.Replace(missing.Error, "no_such_tool", "X", 1); a != b {
		t.Errorf("a hidden tool answers %q, a missing one %q: a caller could tell them apart", a, b)
	}
	if r, _ := d.Call(support, "lookup_order", map[string]any{"n": 1}); r.IsError() {
		t.Errorf("an entitled call: %+v", r)
	}
	if r, _ := d.Call(support, "lookup_order", map[string]any{"n": "x"}); r.Code != quiver.CodeInvalidArguments {
		t.Errorf("an entitled call with bad arguments: %s", r.Code)
	}
	if r, _ := d.Call(context.Background(), "refund_payment", map[string]any{"n": 1}); r.IsError() {
		t.Errorf("an unrestricted caller: %+v", r)
	}
	if r, _ := d.Call(context.Background(), "no_such_tool", nil); r.Code != quiver.CodeUnknownTool || !strings.Contains(r.Error, "refund_payment") {
		t.Errorf("an unrestricted caller's unknown tool: %s %q", r.Code, r.Error)
	}
	names := func(ts []*quiver.Tool) (out []string) {
		for _, t := range ts {
			out = append(out, t.Name())
		}
		return out
	}
	if got := names(d.ToolsFor(support)); strings.Join(got, ",") != "lookup_order" {
		t.Errorf("ToolsFor the restricted caller: %v", got)
	}
	if got := names(d.ToolsFor(context.Background())); strings.Join(got, ",") != "lookup_order,refund_payment" {
		t.Errorf("ToolsFor an unrestricted caller: %v", got)
	}
}
