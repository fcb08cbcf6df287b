package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// toolsField is a definition's tools: either a list of tool names or patterns (the tools bound
// to the prompt, which allow and deny narrow), or seed 001's policy spelling
// {allow: [...], deny: [...]}, which starts from every tool of the workspace.
type toolsField struct {
	List   []string    `json:"-"`
	Policy *toolPolicy `json:"-"`
}

// toolPolicy is seed 001's tools: {allow, deny}: an empty allow permits every tool, a
// non-empty one only those it lists; deny always wins.
type toolPolicy struct {
	Allow []string `json:"allow"`
	Deny  []string `json:"deny"`
}

const toolsSpellings = "a list of tool names or patterns ([echo, \"github.*\"]) or {allow: [names], deny: [names]}"

// UnmarshalJSON reads tools as a list or as {allow, deny}; anything else is an error saying
// which spellings there are.
func (f *toolsField) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		*f = toolsField{}
		return nil
	case len(b) > 0 && b[0] == '[':
		var list []string
		if err := json.Unmarshal(b, &list); err != nil {
			return fmt.Errorf("tools: %v: want %s", err, toolsSpellings)
		}
		*f = toolsField{List: list}
		return nil
	case len(b) > 0 && b[0] == '{':
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		var p toolPolicy
		if err := dec.Decode(&p); err != nil {
			return fmt.Errorf("tools: %v: as an object, tools has allow and deny, each a list of tool names or patterns", err)
		}
		*f = toolsField{Policy: &p}
		return nil
	}
	return fmt.Errorf("tools: %s is neither: want %s", b, toolsSpellings)
}

// given reports whether the definition spells tools at all.
func (f toolsField) given() bool { return f.List != nil || f.Policy != nil }

// policyFields are the prompt's Tools, Allow and Deny for the definition's tools, allow and
// deny. Seed 001's tools: {allow, deny} means what allow: and deny: mean over every tool of
// the workspace: with a non-empty allow, the tools it names are bound (as tools: [...] binds
// them); with none, every tool is ("*"). Giving it together with allow: or deny: is an error:
// the policy is written once.
func (def *definition) policyFields() (tools, allow, deny []string, err error) {
	pol := def.Tools.Policy
	if pol == nil {
		return def.Tools.List, def.Allow, def.Deny, nil
	}
	if def.Allow != nil || def.Deny != nil {
		return nil, nil, nil, errors.New("tools: {allow, deny} and allow:/deny: both give the tool policy: " +
			"use one, either tools: {allow: [names], deny: [names]} or tools: [names] with allow and deny")
	}
	tools = pol.Allow
	if len(tools) == 0 {
		tools = []string{"*"}
	}
	return tools, nil, pol.Deny, nil
}
