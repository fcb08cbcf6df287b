package server

import (
	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/platform/entitle"
)

// The entitlements document as the API writes it. These types mirror package entitle's
// (Document, Rule, Who, Selector, Toolset) field for field, with the same JSON names, so that
// the OpenAPI document names them for what they are (a generated client's Document or Who
// says nothing) and describes each field. They hold no rule of their own: the handler
// converts them to entitle's types and the platform checks the document (entitle.Check),
// refusing a bad one naming body.document.<field>.

// entitlementsDocument is an entitle.Document as the API writes it.
type entitlementsDocument struct {
	Default  quiver.Access       `json:"default,omitempty" doc:"What a caller gets for a tool no rule decides: allow (the default: every tool, as without entitlements) or deny."`
	Rules    []entitlementRule   `json:"rules,omitempty" doc:"Rules allowing or denying tools to callers, at most 10,000. Deny always wins, whatever the order; a caller whom an allow rule names may call only what such rules allow."`
	Toolsets []toolsetDefinition `json:"toolsets,omitempty" doc:"Named sets of tools, at most 1,000: each is served over MCP at /mcp/{name}, a key may be bound to them and a rule may select their tools or name the callers who come through their address."`
}

// entitlementRule is an entitle.Rule, whose selector's fields are the rule's own (written
// out, not embedded, for the OpenAPI document to list them).
type entitlementRule struct {
	Who         entitlementWho `json:"who,omitzero" doc:"The callers the rule applies to: those matching every field set; absent or {}: every caller."`
	Tools       []string       `json:"tools,omitempty" doc:"The rule's tools by name or path.Match pattern (payments.*, *_read), at most 1,000, each 1 to 1,024 bytes. A name the workspace does not have is kept and warned about. The rule selects the tools matching every one of tools, source, when and toolset it sets (none: every tool)."`
	Source      string         `json:"source,omitempty" doc:"A path.Match pattern over where the tool came from: openapi:NAME, mcp:NAME, a2a:NAME, stored, prompt:NAME, schema, go (mcp:* selects every remote MCP server's tools)."`
	When        quiver.Hints   `json:"when,omitzero" doc:"Annotations the tool must have, read with MCP's defaults for those it leaves out: {\"readOnlyHint\": true} selects the read-only tools, {\"destructiveHint\": true} the destructive ones."`
	Toolset     string         `json:"toolset,omitempty" doc:"The tools of this toolset (1 to 64 characters of a-z, A-Z, 0-9, _ and -); one the document does not define is warned about."`
	Access      quiver.Access  `json:"access" doc:"allow or deny the selected tools to the callers: deny always wins over allow."`
	Description string         `json:"description,omitempty" doc:"Why the rule is there (explain shows it), up to 1,024 bytes."`
}

// entitlementWho is an entitle.Who.
type entitlementWho struct {
	Key     string `json:"key,omitempty" doc:"An API key's id (key_...)."`
	Role    string `json:"role,omitempty" doc:"A key's or token's role in the workspace: admin, member or viewer (exactly that role: a rule for viewers does not apply to members)."`
	User    string `json:"user,omitempty" doc:"A user's id (usr_...)."`
	Claim   string `json:"claim,omitempty" doc:"An access token's claim (a dotted path for a nested one, as realm_access.roles) that must hold value; set with value."`
	Value   string `json:"value,omitempty" doc:"The value claim must be, or hold as an array's item or a space-separated scope's word; set with claim."`
	Agent   string `json:"agent,omitempty" doc:"The name or path.Match pattern (*, ?, [a-z]) of an agent or prompt whose run makes the call; a run is decided for its caller and for every agent of its chain."`
	Toolset string `json:"toolset,omitempty" doc:"The callers who come through this toolset's address (/mcp/{toolset}): 1 to 64 characters of a-z, A-Z, 0-9, _ and -."`
}

// toolSelector is an entitle.Selector, as a toolset's include holds them.
type toolSelector struct {
	Tools   []string     `json:"tools,omitempty" doc:"Tool names or path.Match patterns (payments.*, *_read), at most 1,000, each 1 to 1,024 bytes. A name the workspace does not have is kept and warned about. The selector selects the tools matching every one of tools, source and when it sets (one at least)."`
	Source  string       `json:"source,omitempty" doc:"A path.Match pattern over where the tool came from: openapi:NAME, mcp:NAME, a2a:NAME, stored, prompt:NAME, schema, go (mcp:* selects every remote MCP server's tools)."`
	When    quiver.Hints `json:"when,omitzero" doc:"Annotations the tool must have, read with MCP's defaults for those it leaves out: {\"readOnlyHint\": true} selects the read-only tools, {\"destructiveHint\": true} the destructive ones."`
	Toolset string       `json:"toolset,omitempty" doc:"Not allowed here: a toolset is made of tools, not of other toolsets (a rule's toolset selects a toolset's tools)."`
}

// toolsetDefinition is an entitle.Toolset: how the document defines a toolset, where
// toolsetSummary is a toolset as listed to a caller.
type toolsetDefinition struct {
	Name        string         `json:"name" doc:"The toolset's name, unique in the document and its MCP address (/mcp/{name}): 1 to 64 characters of a-z, A-Z, 0-9, _ and -."`
	Description string         `json:"description,omitempty" doc:"What the toolset is for, up to 1,024 bytes."`
	Include     []toolSelector `json:"include" doc:"The toolset's tools: those any of these selectors selects, 1 to 1,000 selectors, each setting tools, source or when (tools: [\"*\"] for every tool)."`
}

func documentBodyOf(d entitle.Document) entitlementsDocument {
	b := entitlementsDocument{Default: d.Default}
	if d.Rules != nil {
		b.Rules = make([]entitlementRule, len(d.Rules))
		for i, r := range d.Rules {
			b.Rules[i] = entitlementRule{Who: entitlementWho(r.Who), Tools: r.Tools, Source: r.Source, When: r.When,
				Toolset: r.Toolset, Access: r.Access, Description: r.Description}
		}
	}
	if d.Toolsets != nil {
		b.Toolsets = make([]toolsetDefinition, len(d.Toolsets))
		for i, ts := range d.Toolsets {
			b.Toolsets[i] = toolsetDefinition{Name: ts.Name, Description: ts.Description}
			if ts.Include != nil {
				b.Toolsets[i].Include = make([]toolSelector, len(ts.Include))
				for j, sel := range ts.Include {
					b.Toolsets[i].Include[j] = selectorBodyOf(sel)
				}
			}
		}
	}
	return b
}

// document is the entitle.Document b writes, unchecked: the platform checks it.
func (b *entitlementsDocument) document() entitle.Document {
	d := entitle.Document{Default: b.Default}
	if b.Rules != nil {
		d.Rules = make([]entitle.Rule, len(b.Rules))
		for i, r := range b.Rules {
			d.Rules[i] = entitle.Rule{Who: entitle.Who(r.Who), Access: r.Access, Description: r.Description,
				Selector: entitle.Selector{Tools: r.Tools, Source: r.Source, When: r.When, Toolset: r.Toolset}}
		}
	}
	if b.Toolsets != nil {
		d.Toolsets = make([]entitle.Toolset, len(b.Toolsets))
		for i, ts := range b.Toolsets {
			d.Toolsets[i] = entitle.Toolset{Name: ts.Name, Description: ts.Description}
			if ts.Include != nil {
				d.Toolsets[i].Include = make([]entitle.Selector, len(ts.Include))
				for j, sel := range ts.Include {
					d.Toolsets[i].Include[j] = sel.selector()
				}
			}
		}
	}
	return d
}

func selectorBodyOf(s entitle.Selector) toolSelector {
	return toolSelector{Tools: s.Tools, Source: s.Source, When: s.When, Toolset: s.Toolset}
}

func (s toolSelector) selector() entitle.Selector {
	return entitle.Selector{Tools: s.Tools, Source: s.Source, When: s.When, Toolset: s.Toolset}
}
