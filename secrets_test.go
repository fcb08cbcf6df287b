package quiver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/schema"
)

// unescapedJSON encodes v without HTML escaping, as many JSON producers do.
func unescapedJSON(v any) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err)
	}
	return bytes.TrimSpace(b.Bytes())
}

// uEscaped encodes s as a JSON string with every character as a \u escape.
func uEscaped(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		fmt.Fprintf(&b, `\u%04x`, r)
	}
	b.WriteByte('"')
	return b.String()
}

// leaks reports where in r the secret can still be read, "" if nowhere.
func leaks(t testing.TB, r *quiver.Result, secret string) string {
	t.Helper()
	fields := map[string]string{"text": r.Text, "error": r.Error, "stack": r.Stack}
	if r.IsError() || r.Text != "" || len(r.Value) == 0 {
		// Otherwise the model text is the value, checked below as JSON.
		fields["model text"] = r.ModelText()
	}
	for i, p := range r.Problems {
		fields[fmt.Sprintf("problem %d", i)] = p.Message
	}
	for i, c := range r.Content {
		fields[fmt.Sprintf("content %d", i)] = c.Text + c.URI
	}
	for i, a := range r.Attachments {
		fields[fmt.Sprintf("attachment %d", i)] = a.Name + a.Description + a.Path
	}
	for where, s := range fields {
		if strings.Contains(s, secret) {
			return where
		}
	}
	if len(r.Value) > 0 {
		if !json.Valid(r.Value) {
			t.Fatalf("masking broke the value: %s", r.Value)
		}
		v, err := schema.Decode(r.Value)
		if err != nil {
			t.Fatal(err)
		}
		if where := leakIn(v, secret, "value"); where != "" {
			return where
		}
	}
	rest := *r
	rest.Value = nil // checked above
	b, err := json.Marshal(rest)
	if err != nil {
		t.Fatalf("result cannot be encoded: %v", err)
	}
	esc, _ := json.Marshal(secret)
	if bytes.Contains(b, esc[1:len(esc)-1]) {
		return "JSON encoding"
	}
	return ""
}

func leakIn(v any, secret, where string) string {
	switch x := v.(type) {
	case string:
		if strings.Contains(x, secret) {
			return where
		}
	case json.Number:
		if strings.Contains(string(x), secret) {
			return where
		}
	case []any:
		for i, e := range x {
			if w := leakIn(e, secret, fmt.Sprintf("%s[%d]", where, i)); w != "" {
				return w
			}
		}
	case map[string]any:
		for k, e := range x {
			if strings.Contains(k, secret) {
				return where + " key"
			}
			if w := leakIn(e, secret, where+"."+k); w != "" {
				return w
			}
		}
	}
	return ""
}

func TestSecretsMasked(t *testing.T) {
	secrets := []struct {
		name, value string
	}{
		{"plain", "sk-live-4f9a2b"},
		{"needs JSON escaping", `a"b<c`},
		{"html and unicode", "pässwörd&<>'"},
	}
	type returned func(secret string) (any, error)
	handlers := []struct {
		name   string
		fn     returned
		status quiver.Status
	}{
		{"text", func(s string) (any, error) { return "the key is " + s + ".", nil }, quiver.StatusSuccess},
		{"struct value", func(s string) (any, error) {
			return struct {
				Key  string   `json:"key"`
				List []string `json:"list"`
			}{s, []string{"x" + s + "y"}}, nil
		}, quiver.StatusSuccess},
		{"map key", func(s string) (any, error) { return map[string]int{s: 1}, nil }, quiver.StatusSuccess},
		{"raw JSON without HTML escaping", func(s string) (any, error) { return unescapedJSON(map[string]string{"k": s}), nil }, quiver.StatusSuccess},
		{"raw JSON with unicode escapes", func(s string) (any, error) { return json.RawMessage(`{"k":` + uEscaped(s) + `}`), nil }, quiver.StatusSuccess},
		{"result text and value", func(s string) (any, error) {
			return &quiver.Result{Text: "t " + s, Value: unescapedJSON([]string{s})}, nil
		}, quiver.StatusSuccess},
		{"content and attachment", func(s string) (any, error) {
			return &quiver.Result{Content: []quiver.Content{quiver.TextContent("c " + s)},
				Attachments: []quiver.Attachment{{Name: "note.txt", MimeType: "text/plain", Data: "aGk=", Description: "about " + s}}}, nil
		}, quiver.StatusSuccess},
		{"error", func(s string) (any, error) { return nil, errors.New("auth failed for " + s) }, quiver.StatusError},
		{"wrapped Fail", func(s string) (any, error) {
			return nil, fmt.Errorf("calling api: %w", quiver.Fail(quiver.CodeInvalidArguments, "key %s rejected", s))
		}, quiver.StatusError},
		{"error result", func(s string) (any, error) { return &quiver.Result{Error: "bad " + s}, nil }, quiver.StatusError},
		{"panic", func(s string) (any, error) { panic("crashed holding " + s) }, quiver.StatusError},
		{"panic with error", func(s string) (any, error) { panic(errors.New("crashed holding " + s)) }, quiver.StatusError},
	}
	for _, sec := range secrets {
		for _, h := range handlers {
			t.Run(sec.name+"/"+h.name, func(t *testing.T) {
				tool := quiver.Func("leaky", "Leaks its secret.", func(ctx context.Context, _ struct{}) (any, error) {
					v, ok := quiver.Var(ctx, "api_key")
					if !ok {
						return nil, errors.New("no api_key")
					}
					return h.fn(v)
				}, quiver.WithVariables(quiver.Variable{Name: "api_key", Type: quiver.VarSecret, Required: true},
					quiver.Variable{Name: "region", Type: quiver.VarText}))
				var hooked []*quiver.Result
				rec := &memRecorder{}
				d := &quiver.Dispatcher{
					Registry: newRegistry(t, tool),
					Resolver: quiver.Layered{Thread: quiver.Vars{"api_key": sec.value, "region": "eu"}},
					Hooks: quiver.Hooks{
						AfterSuccess: func(_ context.Context, _ *quiver.Call, r *quiver.Result) { hooked = append(hooked, r) },
						AfterFailure: func(_ context.Context, _ *quiver.Call, r *quiver.Result) { hooked = append(hooked, r) },
					},
					Recorder: rec,
				}
				r := dispatch(t, d, "leaky", "{}")
				if r.Status != h.status {
					t.Fatalf("status %s (%s), want %s", r.Status, r.Error, h.status)
				}
				if where := leaks(t, r, sec.value); where != "" {
					t.Errorf("secret visible in the result's %s: %+v", where, r)
				}
				b, _ := json.Marshal(r)
				if !strings.Contains(string(b), "[REDACTED]") {
					t.Errorf("no [REDACTED] mark in %s", b)
				}
				if len(hooked) != 1 {
					t.Fatalf("hooks saw %d results", len(hooked))
				}
				if where := leaks(t, hooked[0], sec.value); where != "" {
					t.Errorf("secret visible to the hook in %s", where)
				}
				stored := rec.all()
				if len(stored) != 1 {
					t.Fatalf("%d results recorded", len(stored))
				}
				if where := leaks(t, &stored[0].Result, sec.value); where != "" {
					t.Errorf("secret recorded in %s", where)
				}
			})
		}
	}
}

// A numeric secret returned as a JSON number is masked without breaking the value.
func TestSecretMaskingKeepsValueValid(t *testing.T) {
	tests := []struct {
		name   string
		secret string
		value  json.RawMessage
	}{
		{"number", "9876543210", json.RawMessage(`{"pin":9876543210,"n":1}`)},
		{"inside number", "4242", json.RawMessage(`[142420]`)},
		{"word that is a literal", "true", json.RawMessage(`{"ok":true,"s":"true story"}`)},
		{"structural text", `":"`, json.RawMessage(`{"a":"b","c":"x\":\"y"}`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tool := quiver.Func("num", "Returns numbers.", func(ctx context.Context, _ struct{}) (json.RawMessage, error) {
				return tt.value, nil
			}, quiver.WithVariables(quiver.Variable{Name: "pin", Type: quiver.VarSecret}))
			d := &quiver.Dispatcher{Registry: newRegistry(t, tool), Resolver: quiver.Layered{User: quiver.Vars{"pin": tt.secret}}}
			r := dispatch(t, d, "num", "{}")
			wantSuccess(t, r)
			if !json.Valid(r.Value) {
				t.Fatalf("masked value is not JSON: %s", r.Value)
			}
			if where := leaks(t, r, tt.secret); where != "" {
				t.Errorf("secret visible in %s: %s", where, r.Value)
			}
			if _, err := json.Marshal(r); err != nil {
				t.Errorf("result cannot be encoded: %v", err)
			}
		})
	}
}

// Text variables are not masked, and a secret contained in another is masked whole.
func TestMaskingScope(t *testing.T) {
	tool := quiver.Func("show", "Shows variables.", func(ctx context.Context, _ struct{}) (string, error) {
		region, _ := quiver.Var(ctx, "region")
		long, _ := quiver.Var(ctx, "long")
		short, _ := quiver.Var(ctx, "short")
		_, sawUndeclared := quiver.Var(ctx, "other_secret")
		return fmt.Sprintf("region=%s long=%s short=%s undeclared=%v", region, long, short, sawUndeclared), nil
	}, quiver.WithVariables(
		quiver.Variable{Name: "region"},
		quiver.Variable{Name: "long", Type: quiver.VarSecret},
		quiver.Variable{Name: "short", Type: quiver.VarSecret},
		quiver.Variable{Name: "empty", Type: quiver.VarSecret},
	))
	d := &quiver.Dispatcher{Registry: newRegistry(t, tool), Resolver: quiver.Layered{Thread: quiver.Vars{
		"region": "eu-west", "long": "abc123xyz", "short": "123", "empty": "", "other_secret": "zzz"}}}
	r := dispatch(t, d, "show", "{}")
	wantSuccess(t, r)
	if want := "region=eu-west long=[REDACTED] short=[REDACTED] undeclared=false"; r.Text != want {
		t.Errorf("text %q, want %q", r.Text, want)
	}
}

// A handler abandoned after a timeout cannot leak a secret through its late result, and the
// timeout result itself is masked.
func TestSecretsMaskedOnTimeout(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	tool := quiver.Func("slow", "Slow.", func(ctx context.Context, _ struct{}) (string, error) {
		<-ctx.Done()
		k, _ := quiver.Var(ctx, "k")
		return "", errors.New("gave up with " + k)
	}, quiver.WithTimeout(50*time.Millisecond), quiver.WithVariables(quiver.Variable{Name: "k", Type: quiver.VarSecret}))
	d := &quiver.Dispatcher{Registry: newRegistry(t, tool), Grace: 50 * time.Millisecond,
		Resolver: quiver.Layered{Instance: quiver.Vars{"k": "hunter2"}}}
	r := dispatch(t, d, "slow", "{}")
	wantError(t, r, quiver.CodeTimeout)
	if where := leaks(t, r, "hunter2"); where != "" {
		t.Errorf("secret in %s", where)
	}
}
