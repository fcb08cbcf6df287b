package jsfunc

import (
	"encoding/json"
	"fmt"

	"github.com/quiverhq/quiver"
)

// Stored is a definition as a workspace keeps it: a function version's code and the schema
// documents of the version and of its tool.
type Stored struct {
	// Code is the module the version runs: JavaScript (TypeScript is transpiled once, here).
	Code string
	// Input is the input schema document, in the form quiver.ParseSchemaSpec reads (the
	// argument schema with the variables, meta-fields and annotations beside it); Output the
	// output schema, true for any result.
	Input, Output json.RawMessage
}

// Documents checks that the definition's code parses and returns what the store keeps of the
// definition, for those who store it through their own rules (the platform's operations, which
// check its schemas, variables and name, each refusal naming its field) rather than with Save.
func Documents(def Definition) (Stored, error) {
	f, err := newFunction(def)
	if err != nil {
		return Stored{}, err
	}
	// A meta-field is kept as a property of the input schema, where an unknown one would read
	// back as an ordinary argument.
	if err := quiver.CheckMetaFields(def.MetaFields); err != nil {
		return Stored{}, fmt.Errorf("jsfunc: tool %q: %w", def.Name, err)
	}
	// Whoever stores the documents reads them back first as Load will (the platform's
	// CreateFunctionVersion and CreateTool do), refusing what it could not serve.
	in, err := storedInput(def.InputSchema, def.Variables, def.MetaFields, def.Annotations)
	if err != nil {
		return Stored{}, fmt.Errorf("jsfunc: tool %q: input schema: %w", def.Name, err)
	}
	out, err := storedOutput(def.OutputSchema)
	if err != nil {
		return Stored{}, fmt.Errorf("jsfunc: tool %q: output schema: %w", def.Name, err)
	}
	return Stored{Code: f.code, Input: in, Output: out}, nil
}
