package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/platform/entitle"
)

// quiver access: the local workspace's entitlements (which tools each caller may see and
// call), read, replaced and explained through the platform's operations, as /v1/entitlements
// has them, as its operator.

// accessExplain says whether a subject may call a tool and what decided: exit 0 when it may,
// 1 when it may not (or the explanation failed), 2 for a usage error.
func (a *app) accessExplain(ctx context.Context, inv *invocation) (int, error) {
	subject := inv.fs.String("subject", "", "whom to ask about: comma-separated key:ID, user:ID, role:ROLE, claim:NAME=VALUE, agent:NAME, toolset:NAME (default: the local operator, whom no rule restricts)")
	tool := inv.fs.String("tool", "", "the tool's name (required)")
	asJSON := inv.fs.Bool("json", false, `print {"subject", "tool", "allowed", "rule", "agent", "reason"} as JSON`)
	config := addConfigFlag(inv.fs)
	if err := inv.parseNone(" (the tool goes in --tool)"); err != nil {
		return exitUsage, err
	}
	if strings.TrimSpace(*tool) == "" {
		return exitUsage, usagef("--tool is required: name the tool to ask about")
	}
	p, actor, disconnect, err := a.configuredPlatform(ctx, inv, *config)
	if err != nil {
		return exitError, err
	}
	defer disconnect()
	x, err := p.Explain(ctx, actor, *subject, *tool)
	if e := (*platform.Error)(nil); errors.As(err, &e) && e.Kind == platform.Invalid {
		return exitUsage, usagef("--subject: %s", e.Message)
	}
	if err != nil {
		return exitError, refusal(err, "quiver tools list and quiver keys list show them")
	}
	code := exitOK
	if !x.Allowed {
		code = exitError
	}
	if *asJSON {
		return code, writeJSON(a.stdout, explanationJSON{Subject: x.Subject, Tool: x.Tool, Allowed: x.Allowed, Rule: x.Rule, Agent: x.Agent, Reason: x.Reason})
	}
	verdict := "may call"
	if !x.Allowed {
		verdict = "may not call"
	}
	fmt.Fprintf(a.stdout, "%s %s %s\n", x.Subject, verdict, x.Tool)
	if x.Rule >= 0 {
		fmt.Fprintf(a.stdout, "rule: rules[%d]\n", x.Rule)
	}
	if x.Agent != "" {
		fmt.Fprintf(a.stdout, "agent: %s\n", x.Agent)
	}
	fmt.Fprintf(a.stdout, "reason: %s\n", x.Reason)
	return code, nil
}

// explanationJSON is an explanation as quiver access explain --json prints it: as GET
// /v1/entitlements/explain answers it.
type explanationJSON struct {
	Subject string `json:"subject"`
	Tool    string `json:"tool"`
	Allowed bool   `json:"allowed"`
	Rule    int    `json:"rule"`
	Agent   string `json:"agent,omitempty"`
	Reason  string `json:"reason"`
}

// accessGet prints the local workspace's entitlement document, as quiver access set reads it;
// its version and warnings go to standard error.
func (a *app) accessGet(ctx context.Context, inv *invocation) (int, error) {
	asJSON := inv.fs.Bool("json", false, "print the document as JSON (default: YAML)")
	if err := inv.parseNone(""); err != nil {
		return exitUsage, err
	}
	p, actor, db, err := a.localPlatform(ctx, inv)
	if err != nil {
		return exitError, err
	}
	e, err := p.Entitlements(ctx, actor)
	if err != nil {
		return exitError, err
	}
	if e.Version == 0 {
		fmt.Fprintf(a.stderr, "quiver: no entitlements set in %s: every caller may call every tool\n", db.Where)
	} else {
		fmt.Fprintf(a.stderr, "quiver: entitlements version %d, set by %s at %s\n", e.Version, orDash(e.UpdatedBy), e.UpdatedAt.UTC().Format("2006-01-02 15:04Z"))
	}
	a.warnEntitlements(e.Warnings)
	if *asJSON {
		return exitOK, writeJSON(a.stdout, e.Document)
	}
	enc := yaml.NewEncoder(a.stdout)
	enc.SetIndent(2)
	if err := enc.Encode(e.Document); err != nil {
		return exitError, err
	}
	return exitOK, enc.Close()
}

// accessSet replaces the local workspace's entitlement document with the file's (YAML or
// JSON; - for standard input), from the version --after names (default: the current one).
func (a *app) accessSet(ctx context.Context, inv *invocation) (int, error) {
	after := inv.fs.Int64("after", -1, "the version the document replaces, as quiver access get printed it: refused if another change came since (default: the current version)")
	config := addConfigFlag(inv.fs)
	pos, err := inv.parse(1, 1, "access set needs exactly one file: the document, in YAML or JSON (- for standard input)")
	if err != nil {
		return exitUsage, err
	}
	doc, err := a.readEntitlements(pos[0])
	if err != nil {
		return exitUsage, err
	}
	p, actor, disconnect, err := a.configuredPlatform(ctx, inv, *config)
	if err != nil {
		return exitError, err
	}
	defer disconnect()
	if *after < 0 {
		cur, err := p.Entitlements(ctx, actor)
		if err != nil {
			return exitError, err
		}
		*after = cur.Version
	}
	e, err := p.SetEntitlements(ctx, actor, *doc, *after)
	if pe := (*platform.Error)(nil); errors.As(err, &pe) && pe.Kind == platform.Invalid {
		return exitUsage, usagef("%s: %s: %s", pos[0], pe.Field, pe.Message)
	}
	if err != nil {
		return exitError, err
	}
	fmt.Fprintf(a.stderr, "quiver: entitlements version %d set in %s; servers follow within a second\n", e.Version, inv.db.Where)
	a.warnEntitlements(e.Warnings)
	return exitOK, nil
}

// readEntitlements reads an entitlement document from a YAML or JSON file (JSON is YAML),
// refusing fields a document does not have: a misspelt predicate would select every tool.
func (a *app) readEntitlements(path string) (*entitle.Document, error) {
	var data []byte
	var err error
	if path == "-" {
		data, err = io.ReadAll(a.stdin)
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, usagef("reading the document: %v", err)
	}
	var doc entitle.Document
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
		return nil, usagef("%s is empty: write the document (default, rules, toolsets); {} allows every caller every tool", path)
	} else if err != nil {
		return nil, usagef("%s is not an entitlements document (default, rules, toolsets): %v", path, err)
	}
	if err := doc.Check(); err != nil {
		return nil, usagef("%s: %v", path, err)
	}
	return &doc, nil
}

// warnEntitlements tells what the document names that the workspace does not have now.
func (a *app) warnEntitlements(warnings []string) {
	for _, w := range warnings {
		fmt.Fprintf(a.stderr, "quiver: warning: %s\n", w)
	}
}

// configuredPlatform is the platform of the local database with the configuration's tools (its
// remote MCP servers connected: rules name their tools), and the local operator acting on it;
// disconnect ends what it started.
func (a *app) configuredPlatform(ctx context.Context, inv *invocation, config string) (*platform.Platform, platform.Actor, func(), error) {
	p, disconnect, err := a.callPlatform(ctx, inv, config, true)
	if err != nil {
		return nil, platform.Actor{}, nil, err
	}
	actor, err := localActor(ctx, inv.db)
	if err != nil {
		disconnect()
		return nil, platform.Actor{}, nil, err
	}
	return p, actor, disconnect, nil
}
