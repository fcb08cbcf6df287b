package config_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/config"
	"github.com/quiverhq/quiver/platform/entitle"
)

const entitlementsYAML = `
entitlements:
  default: deny
  toolsets:
    - name: support
      description: Support's tools
      include:
        - tools: [lookup_order, refund_payment]
        - source: "openapi:tickets"
          when: {readOnlyHint: true}
  rules:
    - who: {role: viewer}
      when: {readOnlyHint: true}
      access: allow
    - who: {claim: groups, value: contractors}
      tools: [refund_payment]
      access: deny
      description: Contractors never refund
    - who: {toolset: support}
      toolset: support
      access: allow
`

// The entitlements block is an entitle.Document, in YAML as in JSON, and it is part of what a
// fleet shares: the canonical YAML a fleet keeps reads back as the same document.
func TestEntitlementsBlock(t *testing.T) {
	f, err := config.Parse(strings.NewReader(entitlementsYAML), "quiver.yaml")
	if err != nil {
		t.Fatal(err)
	}
	d := f.Entitlements
	if d == nil || d.Default != quiver.AccessDeny || len(d.Toolsets) != 1 || len(d.Rules) != 3 {
		t.Fatalf("the document read: %+v", d)
	}
	ro := d.Toolsets[0].Include[1]
	if ro.Source != "openapi:tickets" || ro.When.ReadOnly == nil || !*ro.When.ReadOnly {
		t.Errorf("the toolset's second selector: %+v", ro)
	}
	r := d.Rules[1]
	if r.Who.Claim != "groups" || r.Who.Value != "contractors" || r.Tools[0] != "refund_payment" || r.Access != quiver.AccessDeny ||
		r.Description != "Contractors never refund" {
		t.Errorf("the inline selector of a rule: %+v", r)
	}
	if d.Rules[2].Who.Toolset != "support" || d.Rules[2].Toolset != "support" {
		t.Errorf("who.toolset and toolset: %+v", d.Rules[2])
	}
	if _, err := entitle.Compile(d); err != nil {
		t.Fatalf("the document does not compile: %v", err)
	}

	shared, err := f.Shared()
	if err != nil || len(shared) == 0 {
		t.Fatalf("shared: %q %v", shared, err)
	}
	back, err := config.ParseShared(shared, "the fleet's")
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(d)
	got, _ := json.Marshal(back.Entitlements)
	if string(got) != string(want) {
		t.Errorf("through the fleet's YAML:\n%s\nwant\n%s\n(the YAML: %s)", got, want, shared)
	}

	asJSON := `{"entitlements": {"rules": [{"who": {"role": "viewer"}, "when": {"readOnlyHint": true}, "access": "allow"}]}}`
	j, err := config.Parse(strings.NewReader(asJSON), "quiver.json")
	if err != nil || j.Entitlements == nil || len(j.Entitlements.Rules) != 1 || j.Entitlements.Rules[0].Who.Role != "viewer" {
		t.Fatalf("JSON: %+v %v", j, err)
	}
	none, err := config.Parse(strings.NewReader("governance: []\n"), "quiver.yaml")
	if err != nil || none.Entitlements != nil {
		t.Fatalf("a file without the block: %+v %v", none, err)
	}
}

// A block that does not check refuses the file, naming the field as the file has it; YAML is
// read as strictly as the API's JSON: an unknown key (a misspelt predicate would select every
// tool) is refused.
func TestEntitlementsBlockRefused(t *testing.T) {
	cases := []struct {
		name, block string
		field       string // the FieldError's; "" for a YAML error
		want        string
	}{
		{"access neither allow nor deny", "  rules:\n    - tools: [a]\n      access: maybe\n",
			"entitlements.rules[0].access", "neither allow nor deny"},
		{"a default neither allow nor deny", "  default: open\n", "entitlements.default", "neither allow nor deny"},
		{"a malformed pattern", "  rules:\n    - tools: [ok, \"[a-\"]\n      access: deny\n",
			"entitlements.rules[0].tools[1]", "malformed"},
		{"an unknown role", "  rules:\n    - who: {role: owner}\n      access: allow\n",
			"entitlements.rules[0].who.role", "none of admin, member, viewer"},
		{"a claim without a value", "  rules:\n    - who: {claim: groups}\n      access: allow\n",
			"entitlements.rules[0].who", "claim and value go together"},
		{"a toolset with a bad name", "  toolsets:\n    - name: a/b\n      include: [{tools: [x]}]\n",
			"entitlements.toolsets[0].name", "not 1 to 64 characters"},
		{"a toolset selecting nothing", "  toolsets:\n    - name: s\n      include: []\n",
			"entitlements.toolsets[0].include", "at least one selector"},
		{"a toolset twice", "  toolsets:\n    - {name: s, include: [{tools: [x]}]}\n    - {name: s, include: [{tools: [y]}]}\n",
			"entitlements.toolsets[1].name", "defined twice"},
		{"a misspelt predicate", "  rules:\n    - when: {readOnly: true}\n      access: deny\n", "", "field readOnly not found"},
		{"a misspelt selector key", "  rules:\n    - tool: [x]\n      access: deny\n", "", "field tool not found"},
		{"a misspelt who key", "  rules:\n    - who: {rol: viewer}\n      access: allow\n", "", "field rol not found"},
		{"an unknown top key", "  allow: [x]\n", "", "field allow not found"},
		{"a list where a map goes", "  - {access: deny}\n", "", "cannot unmarshal"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := config.Parse(strings.NewReader("entitlements:\n"+c.block), "quiver.yaml")
			if err == nil || !strings.Contains(err.Error(), "quiver.yaml") || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want one naming the file and saying %q", err, c.want)
			}
			var fe *config.FieldError
			if c.field == "" {
				if errors.As(err, &fe) {
					t.Fatalf("a YAML error as a field's: %v", err)
				}
				return
			}
			if !errors.As(err, &fe) || fe.Field != c.field || !strings.Contains(err.Error(), c.field+": ") {
				t.Fatalf("err = %v, want the field %s", err, c.field)
			}
		})
	}
}
