package quiver_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/quiverhq/quiver"
)

func TestLayeredResolutionOrder(t *testing.T) {
	all := map[quiver.Layer]string{
		quiver.LayerThread: "from-thread", quiver.LayerAgent: "from-agent", quiver.LayerPrompt: "from-prompt",
		quiver.LayerUser: "from-user", quiver.LayerInstance: "from-instance",
	}
	if want := []quiver.Layer{quiver.LayerThread, quiver.LayerAgent, quiver.LayerPrompt, quiver.LayerUser, quiver.LayerInstance}; !reflect.DeepEqual(quiver.ResolutionOrder, want) {
		t.Fatalf("ResolutionOrder = %v", quiver.ResolutionOrder)
	}
	tests := []struct {
		name   string
		layers []quiver.Layer // layers that set the variable
		want   string         // "" means not found
	}{
		{"all layers: thread wins", []quiver.Layer{quiver.LayerThread, quiver.LayerAgent, quiver.LayerPrompt, quiver.LayerUser, quiver.LayerInstance}, "from-thread"},
		{"agent over prompt, user, instance", []quiver.Layer{quiver.LayerAgent, quiver.LayerPrompt, quiver.LayerUser, quiver.LayerInstance}, "from-agent"},
		{"prompt over user and instance", []quiver.Layer{quiver.LayerPrompt, quiver.LayerUser, quiver.LayerInstance}, "from-prompt"},
		{"user over instance", []quiver.Layer{quiver.LayerUser, quiver.LayerInstance}, "from-user"},
		{"instance only", []quiver.Layer{quiver.LayerInstance}, "from-instance"},
		{"thread over instance", []quiver.Layer{quiver.LayerInstance, quiver.LayerThread}, "from-thread"},
		{"agent over user", []quiver.Layer{quiver.LayerUser, quiver.LayerAgent}, "from-agent"},
		{"none", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := func(l quiver.Layer) quiver.VariableSource {
				vars := quiver.Vars{"other": "x"}
				for _, have := range tt.layers {
					if have == l {
						vars["region"] = all[l]
					}
				}
				return vars
			}
			res := quiver.Layered{Thread: src(quiver.LayerThread), Agent: src(quiver.LayerAgent), Prompt: src(quiver.LayerPrompt),
				User: src(quiver.LayerUser), Instance: src(quiver.LayerInstance)}
			got, ok, err := res.ResolveVariable(context.Background(), quiver.Scope{}, quiver.Variable{Name: "region"})
			if err != nil {
				t.Fatal(err)
			}
			if ok != (tt.want != "") || got != tt.want {
				t.Errorf("ResolveVariable = %q, %v; want %q", got, ok, tt.want)
			}
			// The handler sees the same value.
			tool := quiver.Func("where", "Says where.", func(ctx context.Context, _ struct{}) (string, error) {
				v, ok := quiver.Var(ctx, "region")
				if !ok {
					return "unset", nil
				}
				return v, nil
			}, quiver.WithVariables(quiver.Variable{Name: "region"}))
			r := dispatch(t, &quiver.Dispatcher{Registry: newRegistry(t, tool), Resolver: res}, "where", "{}")
			wantSuccess(t, r)
			if want := tt.want; (want == "" && r.Text != "unset") || (want != "" && r.Text != want) {
				t.Errorf("handler saw %q", r.Text)
			}
		})
	}
	// Nil layers are skipped; an empty value set on a layer counts as set.
	res := quiver.Layered{Agent: quiver.Vars{"v": ""}, User: quiver.Vars{"v": "user"}}
	if v, ok, _ := res.ResolveVariable(context.Background(), quiver.Scope{}, quiver.Variable{Name: "v"}); !ok || v != "" {
		t.Errorf("empty agent value: %q %v", v, ok)
	}
}

type failingSource struct{ err error }

func (f failingSource) LookupVariable(context.Context, quiver.Scope, string) (string, bool, error) {
	return "", false, f.err
}

func TestVariableResolutionFailures(t *testing.T) {
	vars := []quiver.Variable{
		{Name: "api_key", Type: quiver.VarSecret, Required: true, Description: "the service key"},
		{Name: "region", Required: false},
		{Name: "store_id", Required: true},
		{Name: "tenant", Required: true},
	}
	tests := []struct {
		name     string
		resolver quiver.VariableResolver
		code     quiver.Code // "" for success
		has      []string
		hasNot   []string
	}{
		{name: "all set", resolver: quiver.Layered{Thread: quiver.Vars{"api_key": "k", "store_id": "s", "tenant": "t"}}},
		{name: "every required missing, no resolver", resolver: nil, code: quiver.CodeMissingVariable,
			has: []string{"api_key (the service key)", "store_id", "tenant", "required variables not set"}, hasNot: []string{"region"}},
		{name: "two missing", resolver: quiver.Layered{User: quiver.Vars{"tenant": "t", "region": "eu"}}, code: quiver.CodeMissingVariable,
			has: []string{"api_key", "store_id", "them"}, hasNot: []string{"tenant", "region"}},
		{name: "one missing", resolver: quiver.Layered{User: quiver.Vars{"tenant": "t", "api_key": "k"}}, code: quiver.CodeMissingVariable,
			has: []string{"required variable not set: store_id", "set it"}, hasNot: []string{"api_key"}},
		{name: "resolver error", resolver: quiver.Layered{Thread: quiver.Vars{}, Agent: failingSource{errors.New("vault unreachable")}},
			code: quiver.CodeVariableError, has: []string{"vault unreachable", "api_key"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ran := false
			tool := quiver.Func("needs_vars", "Needs variables.", func(context.Context, struct{}) (string, error) {
				ran = true
				return "ok", nil
			}, quiver.WithVariables(vars...))
			d := &quiver.Dispatcher{Registry: newRegistry(t, tool), Resolver: tt.resolver}
			r := dispatch(t, d, "needs_vars", "{}")
			if tt.code == "" {
				wantSuccess(t, r)
				return
			}
			wantError(t, r, tt.code, tt.has...)
			for _, s := range tt.hasNot {
				if strings.Contains(r.Error, s) {
					t.Errorf("error %q names %q", r.Error, s)
				}
			}
			if ran {
				t.Error("handler ran without its variables")
			}
		})
	}

	// ResolveVariables reports every missing variable in a typed error.
	values, err := quiver.ResolveVariables(context.Background(), quiver.Layered{Thread: quiver.Vars{"tenant": "t"}}, quiver.Scope{}, vars)
	var missing *quiver.MissingVariablesError
	if !errors.As(err, &missing) {
		t.Fatalf("err = %v", err)
	}
	var got []string
	for _, v := range missing.Missing {
		got = append(got, v.Name)
	}
	if !reflect.DeepEqual(got, []string{"api_key", "store_id"}) || values["tenant"] != "t" {
		t.Errorf("missing %v values %v", got, values)
	}
}

// The resolver receives the caller's scope, so layers can look values up per thread or user.
func TestResolverSeesScope(t *testing.T) {
	var scopes []quiver.Scope
	res := resolverFunc(func(_ context.Context, s quiver.Scope, v quiver.Variable) (string, bool, error) {
		scopes = append(scopes, s)
		return "thread-" + s.ThreadID, true, nil
	})
	tool := quiver.Func("t", "T.", func(ctx context.Context, _ struct{}) (string, error) {
		v, _ := quiver.Var(ctx, "v")
		return v, nil
	}, quiver.WithVariables(quiver.Variable{Name: "v"}))
	d := &quiver.Dispatcher{Registry: newRegistry(t, tool), Resolver: res}
	ctx := quiver.WithScope(context.Background(), quiver.Scope{ThreadID: "th_9", UserID: "u"})
	r := dispatchCall(t, ctx, d, quiver.Call{Name: "t"})
	if r.Text != "thread-th_9" || len(scopes) != 1 || scopes[0].UserID != "u" {
		t.Errorf("text %q scopes %+v", r.Text, scopes)
	}
	// A tool without variables never calls the resolver.
	scopes = nil
	d2 := &quiver.Dispatcher{Registry: newRegistry(t, textTool("plain", "p")), Resolver: res}
	wantSuccess(t, dispatch(t, d2, "plain", "{}"))
	if len(scopes) != 0 {
		t.Error("resolver called for a tool without variables")
	}
}

func TestVariablesUnmarshalJSON(t *testing.T) {
	tests := []struct {
		name    string
		doc     string
		want    quiver.Variables
		wantErr string
	}{
		{name: "list", doc: `[{"name":"region","type":"text","required":true,"description":"where"},{"name":"token","type":"secret","scoped":true}]`,
			want: quiver.Variables{{Name: "region", Type: quiver.VarText, Required: true, Description: "where"},
				{Name: "token", Type: quiver.VarSecret, Scoped: true}}},
		{name: "list defaults type to text", doc: `[{"name":"a"}]`, want: quiver.Variables{{Name: "a", Type: quiver.VarText}}},
		{name: "empty list", doc: `[]`, want: quiver.Variables{}},
		{name: "list with bad type", doc: `[{"name":"a","type":"number"}]`, wantErr: "neither text nor secret"},
		{name: "list with duplicate", doc: `[{"name":"a"},{"name":"a"}]`, wantErr: "declared twice"},
		{name: "list of wrong shape", doc: `[1,2]`, wantErr: "variables"},
		{name: "tenvs", doc: `{"type":"object","properties":{
			"vectorStoreId":{"type":"string","description":"the store"},
			"apiKey":{"type":"string","format":"password","description":"key"},
			"token":{"type":"string","x-secret":true},
			"tenant":{"type":"string","x-scoped":true}},
			"required":["vectorStoreId","apiKey"]}`,
			want: quiver.Variables{
				{Name: "apiKey", Type: quiver.VarSecret, Required: true, Description: "key"},
				{Name: "tenant", Type: quiver.VarText, Scoped: true},
				{Name: "token", Type: quiver.VarSecret},
				{Name: "vectorStoreId", Type: quiver.VarText, Required: true, Description: "the store"},
			}},
		{name: "tenvs not an object", doc: `{"type":"string"}`, wantErr: "tenvs"},
		{name: "tenvs malformed", doc: `{"type":`, wantErr: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var vs quiver.Variables
			err := json.Unmarshal([]byte(tt.doc), &vs)
			if tt.want == nil {
				if err == nil {
					t.Fatalf("no error; got %+v", vs)
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("error %q does not contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(vs, tt.want) {
				t.Errorf("got %+v\nwant %+v", vs, tt.want)
			}
		})
	}
	// Inside a larger document.
	var doc struct {
		Tenvs quiver.Variables `json:"tenvs"`
	}
	if err := json.Unmarshal([]byte(`{"tenvs":{"type":"object","properties":{"k":{"type":"string"}},"required":["k"]}}`), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Tenvs) != 1 || !doc.Tenvs[0].Required || doc.Tenvs[0].Type != quiver.VarText {
		t.Errorf("tenvs field: %+v", doc.Tenvs)
	}
}
