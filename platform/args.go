package platform

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/schema"
)

// CheckArgs checks a tool's arguments as the dispatcher does before the tool runs (a JSON
// object, meta-fields aside, defaults applied, the input schema's constraints) and returns
// them as the tool would receive them: for a person editing a call, or trying a tool, to fix
// them field by field before anything runs. A refusal names each argument at fault: "args"
// for the whole, "args.NAME" for a property ("args.items[0].name" deeper down).
func CheckArgs(t *quiver.Tool, raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) == 0 || string(raw) == "null" {
		raw = json.RawMessage("{}")
	}
	v, err := schema.Decode(raw)
	if err != nil {
		return nil, invalid("args", err.Error())
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, invalid("args", "want a JSON object of arguments")
	}
	for k := range obj {
		if strings.HasPrefix(k, "_") {
			delete(obj, k) // a meta-field: the dispatcher takes it out before validating
		}
	}
	fields, err := argProblems(t, obj)
	if err != nil {
		return nil, err
	}
	if len(fields) > 0 {
		return nil, &Error{Kind: Invalid, Detail: "invalid arguments for " + t.Name(), Fields: fields}
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, invalid("args", err.Error())
	}
	return b, nil
}

// argProblems validates obj against t's input schema, defaults applied, naming each argument
// at fault.
func argProblems(t *quiver.Tool, obj map[string]any) ([]FieldProblem, error) {
	sp := t.Spec()
	var fields []FieldProblem
	if sp.InputSchema == nil {
		for k := range obj {
			fields = append(fields, FieldProblem{argsField("/" + k), "the tool takes no arguments"})
		}
		return fields, nil
	}
	compiled := t.CompiledInput()
	if compiled == nil {
		return nil, &Error{Kind: Internal, Message: "tool " + t.Name() + ": its input schema was not compiled when it was made"}
	}
	if _, err := compiled.ApplyDefaults(obj); err != nil {
		return nil, invalid("args", "applying the defaults: "+err.Error())
	}
	// A required property missing is named as its own field, not as the object's.
	missing := false
	for _, name := range sp.InputSchema.Required {
		if _, ok := obj[name]; !ok {
			missing = true
			fields = append(fields, FieldProblem{argsField("/" + escapePointer(name)), "required"})
		}
	}
	var ve *schema.ValidationError
	if err := compiled.Validate(obj); errors.As(err, &ve) {
		for _, p := range ve.Problems {
			if missing && p.Pointer == "" && strings.HasPrefix(p.Message, "missing required propert") {
				continue
			}
			fields = append(fields, FieldProblem{argsField(p.Pointer), p.Message})
		}
	} else if err != nil {
		return nil, invalid("args", err.Error())
	}
	return fields, nil
}

// argsField is the name of the argument a JSON pointer points at: "" is args, /amount
// args.amount, /items/0/name args.items[0].name.
func argsField(pointer string) string {
	name := "args"
	if pointer == "" {
		return name
	}
	for _, tok := range strings.Split(strings.TrimPrefix(pointer, "/"), "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		if n, err := strconv.Atoi(tok); err == nil && n >= 0 && strconv.Itoa(n) == tok {
			name += "[" + tok + "]"
		} else {
			name += "." + tok
		}
	}
	return name
}

func escapePointer(s string) string { return strings.NewReplacer("~", "~0", "/", "~1").Replace(s) }
