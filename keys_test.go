package quiver_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/quiverhq/quiver"
)

// A hand-written schema that admits extra properties must not let a key that differs only in
// case reach a constrained field: encoding/json would match it case-insensitively.
func TestHandWrittenSchemaKeysAreCaseSensitive(t *testing.T) {
	type inner struct {
		Level int `json:"level"`
	}
	type args struct {
		N     int     `json:"n"`
		Items []inner `json:"items"`
		Label string  // no tag: JSON name "Label"
	}
	open := mustSchema(t, `{"type":"object","properties":{
		"n":{"type":"integer","maximum":5},
		"items":{"type":"array","items":{"type":"object","properties":{"level":{"type":"integer","maximum":3}}}},
		"Label":{"type":"string","maxLength":3}}}`)
	var got []args
	tool := quiver.Func("limited", "Takes a bounded number.", func(_ context.Context, a args) (string, error) {
		got = append(got, a)
		return "ok", nil
	}, quiver.WithInputSchema(open))
	d := &quiver.Dispatcher{Registry: newRegistry(t, tool)}
	tests := []struct {
		args    string
		wantErr string
	}{
		{`{"n":5,"items":[{"level":3}],"Label":"abc","extra":1}`, ""},
		{`{"N":100}`, `/N: property names are case-sensitive: use "n"`},
		{`{"items":[{"level":1},{"LEVEL":9}]}`, `/items/1/LEVEL: property names are case-sensitive: use "level"`},
		{`{"label":"much too long"}`, `/label: property names are case-sensitive: use "Label"`},
	}
	for _, tt := range tests {
		r, err := d.Dispatch(context.Background(), quiver.Call{Name: "limited", Args: json.RawMessage(tt.args)})
		if err != nil {
			t.Fatal(err)
		}
		if tt.wantErr == "" {
			wantSuccess(t, r)
			continue
		}
		wantError(t, r, quiver.CodeInvalidArguments, tt.wantErr)
	}
	if len(got) != 1 || got[0].N != 5 {
		t.Fatalf("handler ran with %+v; want only the valid call", got)
	}
}

// A closed schema needs no guard, unless it declares a name that differs from a field's only
// in case: then that declared name would reach the field unchecked.
func TestClosedSchemaWithNearMissName(t *testing.T) {
	type args struct {
		N int `json:"n"`
	}
	closed := mustSchema(t, `{"type":"object","properties":{"n":{"type":"integer","maximum":5},"N":{"type":"integer"}},"additionalProperties":false}`)
	var got []int
	tool := quiver.Func("near", "Near miss.", func(_ context.Context, a args) (string, error) {
		got = append(got, a.N)
		return "ok", nil
	}, quiver.WithInputSchema(closed))
	d := &quiver.Dispatcher{Registry: newRegistry(t, tool)}
	wantError(t, dispatch(t, d, "near", `{"N":100}`), quiver.CodeInvalidArguments, `use "n"`)
	wantSuccess(t, dispatch(t, d, "near", `{"n":5}`))
	if len(got) != 1 || got[0] != 5 {
		t.Fatalf("handler got %v", got)
	}
}
