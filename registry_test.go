package quiver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/tools/clock"
)

func textTool(name, text string) *quiver.Tool {
	return quiver.Func(name, "Returns a fixed text.", func(context.Context, struct{}) (string, error) { return text, nil })
}

func names(tools []*quiver.Tool) []string {
	out := make([]string, len(tools))
	for i, t := range tools {
		out[i] = t.Name()
	}
	return out
}

func TestRegistryRegister(t *testing.T) {
	tests := []struct {
		name      string
		existing  []string
		batch     []*quiver.Tool
		wantErr   string
		wantNames []string
	}{
		{name: "empty registry", batch: []*quiver.Tool{textTool("b", ""), textTool("a", "")}, wantNames: []string{"a", "b"}},
		{name: "duplicate of existing", existing: []string{"a"}, batch: []*quiver.Tool{textTool("a", "")},
			wantErr: `"a" is already registered`, wantNames: []string{"a"}},
		{name: "duplicate within batch adds nothing", existing: []string{"x"},
			batch:   []*quiver.Tool{textTool("c", ""), textTool("d", ""), textTool("c", "")},
			wantErr: `"c" is already registered`, wantNames: []string{"x"}},
		{name: "existing duplicate late in batch adds nothing", existing: []string{"x"},
			batch: []*quiver.Tool{textTool("c", ""), textTool("x", "")}, wantErr: `"x"`, wantNames: []string{"x"}},
		{name: "nil tool adds nothing", batch: []*quiver.Tool{textTool("c", ""), nil}, wantErr: "nil tool", wantNames: []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &quiver.Registry{}
			for _, n := range tt.existing {
				if err := r.Register(textTool(n, "")); err != nil {
					t.Fatal(err)
				}
			}
			err := r.Register(tt.batch...)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Register: %v", err)
			case tt.wantErr != "" && err == nil:
				t.Fatal("Register succeeded")
			case tt.wantErr != "" && !strings.Contains(err.Error(), tt.wantErr):
				t.Errorf("error %q does not contain %q", err, tt.wantErr)
			}
			got := names(r.Tools())
			if strings.Join(got, ",") != strings.Join(tt.wantNames, ",") {
				t.Errorf("tools %v, want %v", got, tt.wantNames)
			}
		})
	}
}

func TestRegistryNameWarnings(t *testing.T) {
	tests := []struct {
		name    string
		warn    bool
		problem string
	}{
		{"get_weather", false, ""},
		{"search2_docs", false, ""},
		{"getWeather", true, "snake_case"},
		{"get-weather", true, "snake_case"},
		{"dotted.name", true, "[a-zA-Z0-9_-]"},
		{"github/create_issue", true, "[a-zA-Z0-9_-]"},
		{strings.Repeat("a", 65), true, "1 to 64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			r := &quiver.Registry{Logger: slog.New(slog.NewTextHandler(&buf, nil))}
			if err := r.Register(textTool(tt.name, "ok")); err != nil {
				t.Fatalf("a non-conforming name was rejected: %v", err)
			}
			if _, ok := r.Lookup(tt.name); !ok {
				t.Fatal("tool not registered")
			}
			log := buf.String()
			if !tt.warn {
				if log != "" {
					t.Errorf("unexpected log output: %s", log)
				}
				return
			}
			if !strings.Contains(log, "level=WARN") || !strings.Contains(log, "naming convention") {
				t.Errorf("no warning logged: %q", log)
			}
			if !strings.Contains(log, tt.problem) {
				t.Errorf("warning %q does not say %q", log, tt.problem)
			}
			// The tool is still callable under its odd name.
			res := dispatch(t, &quiver.Dispatcher{Registry: r}, tt.name, "{}")
			wantSuccess(t, res)

			// An imported tool's name is the remote's, which no one here can change: the same
			// departure is logged at debug level only.
			buf.Reset()
			r = &quiver.Registry{Logger: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))}
			imported, err := quiver.NewTool(quiver.Spec{Name: tt.name, Description: "Imported.", Imported: true},
				func(context.Context, json.RawMessage) (any, error) { return "ok", nil })
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Register(imported); err != nil {
				t.Fatal(err)
			}
			if log := buf.String(); !strings.Contains(log, "level=DEBUG") || strings.Contains(log, "level=WARN") {
				t.Errorf("an imported name was logged as %q, want at debug level", log)
			}
		})
	}
}

func TestRegistryUnregisterAndLookup(t *testing.T) {
	r := newRegistry(t, textTool("a", "A"), textTool("b", "B"))
	if !r.Unregister("a") {
		t.Error("Unregister(a) = false")
	}
	if r.Unregister("a") {
		t.Error("second Unregister(a) = true")
	}
	if r.Unregister("never") {
		t.Error("Unregister(never) = true")
	}
	if _, ok := r.Lookup("a"); ok {
		t.Error("a still found")
	}
	if got := names(r.Tools()); strings.Join(got, ",") != "b" {
		t.Errorf("tools %v", got)
	}
	d := &quiver.Dispatcher{Registry: r}
	wantError(t, dispatch(t, d, "a", "{}"), quiver.CodeUnknownTool, "Available tools: b.")
	// The name is free again.
	if err := r.Register(textTool("a", "A2")); err != nil {
		t.Fatal(err)
	}
	if res := dispatch(t, d, "a", "{}"); res.Text != "A2" {
		t.Errorf("text %q", res.Text)
	}
	// The zero registry is usable.
	var zero quiver.Registry
	if zero.Unregister("x") || len(zero.Tools()) != 0 {
		t.Error("zero registry not empty")
	}
	if _, ok := zero.Lookup("x"); ok {
		t.Error("zero registry found x")
	}
}

func TestToolAsRebadges(t *testing.T) {
	calls := 0
	orig := quiver.Func("web_search", "Searches the web.", func(_ context.Context, a struct {
		Q string `json:"q" maxLength:"5"`
	}) (string, error) {
		calls++
		return "results for " + a.Q, nil
	}, quiver.WithVariables(quiver.Variable{Name: "region"}))
	alias, err := orig.As("search_news", "Searches news sites only.")
	if err != nil {
		t.Fatal(err)
	}
	if orig.Name() != "web_search" || orig.Description() != "Searches the web." {
		t.Error("As changed the original")
	}
	if alias.Name() != "search_news" || alias.Description() != "Searches news sites only." {
		t.Errorf("alias %q %q", alias.Name(), alias.Description())
	}
	if alias.Spec().InputSchema != orig.Spec().InputSchema || len(alias.Spec().Variables) != 1 {
		t.Error("alias does not share the schema and declarations")
	}
	r := newRegistry(t, orig, alias)
	d := &quiver.Dispatcher{Registry: r}
	for _, name := range []string{"web_search", "search_news"} {
		res := dispatch(t, d, name, `{"q":"go"}`)
		wantSuccess(t, res)
		if res.Text != "results for go" {
			t.Errorf("%s: text %q", name, res.Text)
		}
		// Validation is shared too.
		wantError(t, dispatch(t, d, name, `{"q":"toolong"}`), quiver.CodeInvalidArguments, "/q")
	}
	if calls != 2 {
		t.Errorf("code ran %d times, want 2", calls)
	}
}

// A schema-only tool executed by the activity registered under its name keeps that code when
// offered under another name (T7: same code, other name).
func TestToolAsKeepsActivityOfSchemaTool(t *testing.T) {
	orig, err := quiver.ParseSchemaTool([]byte(`{"description":"Translates","_tool":"translate","properties":{"text":{"type":"string"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	alias, err := orig.As("translate_fr", "Translates into French.")
	if err != nil {
		t.Fatal(err)
	}
	r := newRegistry(t, orig, alias)
	if err := r.RegisterActivity("translate", func(_ context.Context, args json.RawMessage) (any, error) {
		return "translated " + string(args), nil
	}); err != nil {
		t.Fatal(err)
	}
	d := &quiver.Dispatcher{Registry: r}
	for _, name := range []string{"translate", "translate_fr"} {
		if r.Latent(mustLookup(t, r, name)) {
			t.Errorf("%s is latent", name)
		}
		res := dispatch(t, d, name, `{"text":"hi"}`)
		wantSuccess(t, res)
		if res.Text != `translated {"text":"hi"}` {
			t.Errorf("%s: text %q", name, res.Text)
		}
	}
}

func mustLookup(t testing.TB, r *quiver.Registry, name string) *quiver.Tool {
	t.Helper()
	tool, ok := r.Lookup(name)
	if !ok {
		t.Fatalf("%s not registered", name)
	}
	return tool
}

// TestDefaultRegistry checks the blank-import pattern: tools/clock registers get_current_time
// in quiver.Default at import time, and a zero Dispatcher uses Default.
func TestDefaultRegistry(t *testing.T) {
	tool, ok := quiver.Default.Lookup("get_current_time")
	if !ok {
		t.Fatal("get_current_time is not in quiver.Default after importing tools/clock")
	}
	if tool != clock.Tool {
		t.Error("Default holds another tool than clock.Tool")
	}
	var d quiver.Dispatcher
	res := dispatch(t, &d, "get_current_time", `{"timezone":"UTC"}`)
	wantSuccess(t, res)
	if !strings.Contains(string(res.Value), `"timezone":"UTC"`) {
		t.Errorf("value %s", res.Value)
	}

	// Register and MustRegister go to Default; duplicates fail there too.
	extra := textTool("quiver_test_default_extra", "x")
	if err := quiver.Register(extra); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { quiver.Default.Unregister(extra.Name()) })
	if err := quiver.Register(extra); err == nil {
		t.Error("duplicate accepted by Register")
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("MustRegister of a duplicate did not panic")
			}
		}()
		quiver.MustRegister(clock.Tool)
	}()
	if res := dispatch(t, &d, "quiver_test_default_extra", ""); res.Text != "x" {
		t.Errorf("text %q", res.Text)
	}
}

// A registry over a Base sees the base's tools and its own, its own winning a clash, and a
// dispatcher over it runs both; the base sees none of the layer's.
func TestRegistryBase(t *testing.T) {
	base := &quiver.Registry{}
	mustRegister(t, base, textTool("shared", "from base"), textTool("clash", "from base"))
	layer := &quiver.Registry{Base: base}
	mustRegister(t, layer, textTool("own", "from layer"), textTool("clash", "from layer"))

	if got, want := strings.Join(names(layer.Tools()), ","), "clash,own,shared"; got != want {
		t.Fatalf("layer tools = %s, want %s", got, want)
	}
	if got, want := strings.Join(names(base.Tools()), ","), "clash,shared"; got != want {
		t.Fatalf("base tools = %s, want %s", got, want)
	}
	d := &quiver.Dispatcher{Registry: layer}
	for name, want := range map[string]string{"shared": "from base", "clash": "from layer", "own": "from layer"} {
		r, _ := d.Dispatch(context.Background(), quiver.Call{Name: name, Args: json.RawMessage(`{}`)})
		if r.Status != quiver.StatusSuccess || !strings.Contains(r.ModelText(), want) {
			t.Errorf("%s: %s %q, want %q", name, r.Status, r.ModelText(), want)
		}
	}
	if _, ok := base.Lookup("own"); ok {
		t.Fatal("the base sees a tool of the layer over it")
	}
	// An activity registered on the base executes a schema-only tool of the layer.
	st, err := quiver.NewTool(quiver.Spec{Name: "latent_one", Description: "d"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	mustRegister(t, layer, st)
	if err := base.RegisterActivity("latent_one", func(context.Context, json.RawMessage) (any, error) { return "by the base's activity", nil }); err != nil {
		t.Fatal(err)
	}
	if layer.Latent(st) {
		t.Fatal("the base's activity is not seen through the layer")
	}
}

func mustRegister(t *testing.T, r *quiver.Registry, tools ...*quiver.Tool) {
	t.Helper()
	if err := r.Register(tools...); err != nil {
		t.Fatal(err)
	}
}

// Replace swaps a registry's own tools at once, and leaves them as they were when the new set
// is refused.
func TestRegistryReplace(t *testing.T) {
	r := &quiver.Registry{}
	mustRegister(t, r, textTool("a", "old"), textTool("b", "old"))
	if err := r.Replace(textTool("b", "new"), textTool("c", "new")); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(names(r.Tools()), ","); got != "b,c" {
		t.Fatalf("after Replace: %s, want b,c", got)
	}
	if err := r.Replace(textTool("d", ""), textTool("d", "")); err == nil || !strings.Contains(err.Error(), `"d" is already registered`) {
		t.Fatalf("a set with a duplicate: %v", err)
	}
	if got := strings.Join(names(r.Tools()), ","); got != "b,c" {
		t.Fatalf("a refused Replace changed the registry: %s", got)
	}
}

// A tool missing for a reason an Explain function knows (its remote server is down) answers
// that reason instead of "unknown tool", whichever registry of a layering holds the
// explanation; the policy still hides what it does not permit, and a removed explanation says
// nothing more.
func TestRegistryExplainsMissingTools(t *testing.T) {
	base := &quiver.Registry{}
	mustRegister(t, base, textTool("down.cached", "still registered"))
	remove := base.Explain(func(name string) error {
		if strings.HasPrefix(name, "down.") {
			return quiver.Fail(quiver.CodeToolError, "the MCP server %q is not connected: connection refused", "down")
		}
		return nil
	})
	layer := &quiver.Registry{Base: base}
	for _, tt := range []struct {
		name    string
		policy  quiver.Policy
		removed bool
		code    quiver.Code // "" for success
		has     string
	}{
		{name: "down.echo", code: quiver.CodeToolError, has: `"down" is not connected: connection refused`},
		{name: "down.cached", has: "still registered"},
		{name: "elsewhere.echo", code: quiver.CodeUnknownTool, has: `unknown tool "elsewhere.echo"`},
		{name: "down.echo", policy: quiver.Policy{Deny: []string{"down.*"}}, code: quiver.CodeUnknownTool, has: "unknown tool"},
		{name: "down.echo", policy: quiver.Policy{Allow: []string{"down.echo"}}, code: quiver.CodeToolError, has: "not connected"},
		{name: "down.echo", removed: true, code: quiver.CodeUnknownTool, has: "unknown tool"},
	} {
		if tt.removed {
			remove()
		}
		d := &quiver.Dispatcher{Registry: layer, Policy: tt.policy}
		r, err := d.Dispatch(context.Background(), quiver.Call{Name: tt.name, Args: json.RawMessage(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		if r.Code != tt.code || !strings.Contains(r.ModelText(), tt.has) {
			t.Errorf("%s (policy %+v, removed %v): %s %q, want code %q and %q", tt.name, tt.policy, tt.removed, r.Code, r.ModelText(), tt.code, tt.has)
		}
	}
}

// A call to a tool whose source says it is connecting (a ToolPending) waits for the source and
// runs once the tool is there; past ToolWait, or when the call ends first, it gets the
// source's reason; a name the policy refuses is unknown at once, as any tool out of reach.
func TestCallWaitsForAToolWhoseSourceConnects(t *testing.T) {
	tests := []struct {
		name      string
		arrives   bool // the source connects and registers the tool
		wait      time.Duration
		cancelled bool
		policy    quiver.Policy
		want      string // the result's text, or a part of its error
		code      quiver.Code
	}{
		{name: "the source connects", arrives: true, want: "up"},
		{name: "the source stays away past the wait", wait: 20 * time.Millisecond, want: "the call waited 20ms for it", code: quiver.CodeToolError},
		{name: "the call ends while it waits", cancelled: true, want: "the call ended while it waited", code: quiver.CodeToolError},
		{name: "the policy refuses the name", policy: quiver.Policy{Deny: []string{"src.*"}}, want: "unknown tool", code: quiver.CodeUnknownTool},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := &quiver.Registry{Logger: slog.New(slog.DiscardHandler)}
			ready := make(chan struct{})
			reg.Explain(func(name string) error {
				if name != "src.ping" {
					return nil
				}
				return &quiver.ToolPending{Err: quiver.Fail(quiver.CodeToolError, "src is connecting"), Ready: ready}
			})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			switch {
			case tt.arrives:
				go func() {
					if err := reg.Register(textTool("src.ping", "up")); err != nil {
						panic(err)
					}
					close(ready)
				}()
			case tt.cancelled:
				time.AfterFunc(10*time.Millisecond, cancel)
			}
			d := &quiver.Dispatcher{Registry: reg, ToolWait: tt.wait, Policy: tt.policy}
			r, err := d.Dispatch(ctx, quiver.Call{Name: "src.ping"})
			if err != nil {
				t.Fatal(err)
			}
			if tt.code == "" {
				if r.IsError() || r.Text != tt.want {
					t.Fatalf("got %+v, want the text %q", r, tt.want)
				}
				return
			}
			if r.Code != tt.code || !strings.Contains(r.Error, tt.want) {
				t.Fatalf("got %s %q, want %s saying %q", r.Code, r.Error, tt.code, tt.want)
			}
		})
	}
}
