package agent

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// A fleet keeps its agents and prompts in its database rather than in each node's files (see
// platform's fleet configuration): the files are read once, where they are applied, into
// Definitions, which any node loads into a catalog. A definition is kept in a canonical form,
// so that the same definition written twice (in YAML or JSON, with other comments, key order
// or spellings) is recognised as unchanged.

// Definition is one agent or prompt definition in canonical form.
type Definition struct {
	// Kind is "agent" or "prompt".
	Kind string
	// Name is the definition's name: unique among a catalog's definitions of its kind.
	Name string
	// JSON is the definition's fields as JSON, each key in its snake_case spelling and in
	// sorted order: equal definitions have equal JSON.
	JSON json.RawMessage
}

// CanonicalDefinition reads a definition file's content (YAML or JSON) into its canonical form.
// Content that has none of a definition's fields is an error wrapping ErrNotDefinition.
func CanonicalDefinition(raw []byte) (Definition, error) {
	var doc any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return Definition{}, err
	}
	fields, ok := doc.(map[string]any)
	if !ok {
		return Definition{}, fmt.Errorf("want a mapping of fields (%s), got %T", fieldList, doc)
	}
	if err := canonicalKeys(doc, reflect.TypeFor[definition](), ""); err != nil {
		return Definition{}, err
	}
	if !slices.ContainsFunc(keys(fields), isDefinitionField) {
		return Definition{}, ErrNotDefinition
	}
	js, err := json.Marshal(doc)
	if err != nil {
		return Definition{}, fmt.Errorf("not representable as JSON: %v", err)
	}
	// What the fields mean is checked as the catalog is loaded; here only what names it.
	var head struct{ Kind, Name string }
	if err := json.Unmarshal(js, &head); err != nil {
		return Definition{}, fmt.Errorf("kind and name: %v", err)
	}
	if head.Name == "" {
		return Definition{}, errors.New("a definition needs a name")
	}
	return Definition{Kind: cmp.Or(head.Kind, "agent"), Name: head.Name, JSON: js}, nil
}

// ErrNotDefinition is CanonicalDefinition's error for content none of whose fields is a
// definition's (a scripted model's script kept beside its agent, say).
var ErrNotDefinition = errNotDefinition

// ReadDefinitions reads the definition files of dir (.yaml, .yml and .json; not its
// subdirectories) as LoadDir does, into canonical definitions sorted by name; skipped names
// the files none of whose fields is a definition's. A name defined twice is an error naming
// both files. Whether the definitions make a valid catalog is LoadDefinitions' to say.
func ReadDefinitions(dir string) (defs []Definition, skipped []string, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("agent: reading definitions: %w", err)
	}
	from := map[string]string{} // kind and name: the file that defines it
	for _, e := range entries {
		if e.IsDir() || !isDefinitionFile(e.Name()) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		raw, err := readDefinitionFile(path)
		if err != nil {
			return nil, nil, err
		}
		d, err := CanonicalDefinition(raw)
		switch {
		case errors.Is(err, ErrNotDefinition):
			skipped = append(skipped, path)
			continue
		case err != nil:
			return nil, nil, fmt.Errorf("%w: %s: %v", ErrDefinition, path, err)
		case from[d.Kind+" "+d.Name] != "":
			return nil, nil, fmt.Errorf("%w: %s and %s both define %s %q", ErrDefinition, from[d.Kind+" "+d.Name], path, d.Kind, d.Name)
		}
		from[d.Kind+" "+d.Name] = path
		defs = append(defs, d)
	}
	slices.SortFunc(defs, func(a, b Definition) int {
		return cmp.Or(strings.Compare(a.Kind, b.Kind), strings.Compare(a.Name, b.Name))
	})
	return defs, skipped, nil
}

// LoadDefinitions builds the catalog of defs, checked as LoadDir checks a directory's; where
// names them in errors ("the fleet's configuration, version 3").
func LoadDefinitions(defs []Definition, where string) (*Catalog, error) {
	c := &Catalog{Prompts: map[string]*Prompt{}, Agents: map[string]*Agent{}}
	refs := map[string]promptRefs{}
	for _, d := range defs {
		if err := c.loadRaw(where+": "+d.Kind+" "+d.Name, d.JSON, refs); err != nil {
			return nil, err
		}
	}
	return c, c.link(refs)
}
