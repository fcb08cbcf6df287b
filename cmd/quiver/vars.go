package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"golang.org/x/term"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/vars"
)

// layerFlags choose the layer a value is set on; at most one may be given.
type layerFlags struct {
	thread, agent, prompt, user *string
}

func addLayerFlags(fs *flag.FlagSet) layerFlags {
	return layerFlags{
		thread: fs.String("thread", "", "the value is the thread's (and its descendants')"),
		agent:  fs.String("agent", "", "the value is the agent's (by name), for every thread it runs on"),
		prompt: fs.String("prompt", "", "the value is the prompt's (by name)"),
		user:   fs.String("user", "", "the value is the user's (by id)"),
	}
}

// layer returns the layer and owner the flags name: the instance layer when none is given.
func (l layerFlags) layer() (quiver.Layer, string, error) {
	var layer quiver.Layer
	var owner string
	n := 0
	for _, f := range []struct {
		layer quiver.Layer
		value string
	}{{quiver.LayerThread, *l.thread}, {quiver.LayerAgent, *l.agent}, {quiver.LayerPrompt, *l.prompt}, {quiver.LayerUser, *l.user}} {
		if f.value != "" {
			layer, owner = f.layer, f.value
			n++
		}
	}
	switch n {
	case 0:
		return quiver.LayerInstance, "", nil
	case 1:
		return layer, owner, nil
	}
	return "", "", usagef("give at most one of --thread, --agent, --prompt and --user")
}

func describeLayer(layer quiver.Layer, owner string) string {
	if layer == quiver.LayerInstance {
		return "the instance (every thread of the workspace falls back to it)"
	}
	return fmt.Sprintf("%s %s", layer, owner)
}

func (a *app) varsSet(ctx context.Context, inv *invocation) (int, error) {
	secret := inv.fs.Bool("secret", false, "the value is a secret: encrypted at rest, masked in results, read from standard input only")
	lf := addLayerFlags(inv.fs)
	pos, err := inv.parse(1, 2, "vars set needs a NAME, and a VALUE unless it comes from standard input")
	if err != nil {
		return exitUsage, err
	}
	layer, owner, err := lf.layer()
	if err != nil {
		return exitUsage, err
	}
	name := pos[0]
	var value string
	switch {
	case *secret && len(pos) == 2:
		return exitUsage, usagef("a secret is never taken from the command line, where shell history and the process list keep it: "+
			"give it on standard input (quiver vars set %s --secret < FILE) or type it when asked", name)
	case len(pos) == 2 && pos[1] != "-":
		value = pos[1]
	default:
		if value, err = a.readValue(name, *secret); err != nil {
			return exitUsage, err
		}
	}
	db, r, err := inv.resolver(ctx)
	if err != nil {
		return exitError, err
	}
	if err := r.Set(ctx, localWorkspaceID, layer, owner, vars.Value{Name: name, Value: value, Secret: *secret}); err != nil {
		if layer == quiver.LayerThread && errors.Is(err, store.ErrNotFound) {
			return exitError, fmt.Errorf("no thread %s in %s", owner, db.Where)
		}
		return exitError, err
	}
	kind := "text"
	if *secret {
		kind = "secret"
	}
	fmt.Fprintf(a.stdout, "set %s (%s) on %s, in %s\n", name, kind, describeLayer(layer, owner), db.Where)
	return exitOK, nil
}

// readValue reads a value from standard input: without echo from a terminal, else the whole
// input without its final line break.
func (a *app) readValue(name string, secret bool) (string, error) {
	if f, ok := a.stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprintf(a.stderr, "value of %s (not shown): ", name)
		b, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(a.stderr)
		if err != nil {
			return "", usagef("reading the value of %s: %v", name, err)
		}
		return string(b), nil
	}
	b, err := io.ReadAll(io.LimitReader(a.stdin, vars.MaxValueBytes+2))
	if err != nil {
		return "", usagef("reading the value of %s from standard input: %v", name, err)
	}
	b = bytes.TrimSuffix(b, []byte("\n"))
	b = bytes.TrimSuffix(b, []byte("\r"))
	if len(b) == 0 {
		what := "VALUE"
		if secret {
			what = "a secret"
		}
		return "", usagef("no value for %s on standard input; give %s there (quiver vars set %s < FILE)", name, what, name)
	}
	return string(b), nil
}

func (a *app) varsList(ctx context.Context, inv *invocation) (int, error) {
	asJSON := inv.fs.Bool("json", false, "print the values as JSON (secrets without their value)")
	lf := addLayerFlags(inv.fs)
	if err := inv.parseNone(""); err != nil {
		return exitUsage, err
	}
	layer, owner, err := lf.layer()
	if err != nil {
		return exitUsage, err
	}
	_, r, err := inv.resolver(ctx)
	if err != nil {
		return exitError, err
	}
	entries, err := r.List(ctx, localWorkspaceID, layer, owner)
	if err != nil {
		return exitError, err
	}
	if *asJSON {
		if entries == nil {
			entries = []vars.Entry{}
		}
		return exitOK, writeJSON(a.stdout, entries)
	}
	if len(entries) == 0 {
		fmt.Fprintf(a.stderr, "no values on %s\n", describeLayer(layer, owner))
		return exitOK, nil
	}
	w := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	for _, e := range entries {
		value := e.Value
		if e.Secret {
			value = "(secret, set)"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\n", e.Name, oneLine(value, 80), e.UpdatedAt.UTC().Format("2006-01-02 15:04:05Z"))
	}
	return exitOK, w.Flush()
}

func (a *app) varsUnset(ctx context.Context, inv *invocation) (int, error) {
	lf := addLayerFlags(inv.fs)
	pos, err := inv.parse(1, 1, "vars unset needs exactly one NAME")
	if err != nil {
		return exitUsage, err
	}
	layer, owner, err := lf.layer()
	if err != nil {
		return exitUsage, err
	}
	_, r, err := inv.resolver(ctx)
	if err != nil {
		return exitError, err
	}
	if err := r.Delete(ctx, localWorkspaceID, layer, owner, pos[0]); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return exitError, fmt.Errorf("%s has no value on %s", pos[0], describeLayer(layer, owner))
		}
		return exitError, err
	}
	fmt.Fprintf(a.stdout, "unset %s on %s\n", pos[0], describeLayer(layer, owner))
	return exitOK, nil
}

// varHint says how to set the variables a missing_variable result names, for the CLI's
// callers; it is empty for other results.
func varHint(r *quiver.Result) string {
	if r == nil || r.Code != quiver.CodeMissingVariable {
		return ""
	}
	return "set a variable with: quiver vars set NAME VALUE (or --secret, reading the value from standard input); " +
		"quiver vars list shows what is set"
}

// splitVar parses NAME=VALUE, for quiver run --var.
func splitVar(s string) (vars.Value, error) {
	name, value, ok := strings.Cut(s, "=")
	if !ok || name == "" {
		return vars.Value{}, fmt.Errorf("--var %q: want NAME=VALUE", s)
	}
	return vars.Value{Name: name, Value: value}, nil
}
