package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/quiverhq/quiver/platform"
)

const applyUsage = "quiver apply -f DIR|FILE [--dry-run] [--db PATH | --postgres DSN]"

// apply makes the files -f names the fleet's configuration: the next version of what every
// node serving the database runs (agents, prompts, OpenAPI documents, remote MCP servers, A2A
// agents, governance, the local workspace's entitlements), which each node serves within a
// second. The parts the files give
// replace the fleet's, the rest is kept; the same again makes no version.
func (a *app) apply(ctx context.Context, inv *invocation) (int, error) {
	path := inv.fs.String("f", "", "the configuration: a quiver.yaml, a directory holding a quiver.yaml and/or an agents directory, or an agents directory")
	dryRun := inv.fs.Bool("dry-run", false, "print what would change, and write nothing")
	if err := inv.parseNone("\n" + applyUsage); err != nil {
		return exitUsage, err
	}
	if *path == "" {
		return exitUsage, usagef("apply needs -f, the files to apply\n%s", applyUsage)
	}
	if _, err := os.Stat(*path); err != nil {
		return exitUsage, usagef("-f %s: %v", *path, err)
	}
	files, err := platform.ReadConfiguration(ctx, *path)
	if err != nil {
		return exitError, err
	}
	for _, s := range files.Skipped {
		fmt.Fprintf(a.stderr, "quiver: agents: %s is not an agent or prompt definition (none of its fields is a definition's): skipped\n", s)
	}
	for _, block := range files.NodeOnly {
		fmt.Fprintf(a.stderr, "quiver: the %s block is each node's (quiver serve reads it from its own file): not applied\n", block)
	}
	db, err := inv.open(ctx)
	if err != nil {
		return exitError, err
	}
	p, err := platform.New(platform.Config{Store: db, Registry: a.registry, ServerWorkspace: localWorkspaceID,
		Logger: warnings(a.stderr)})
	if err != nil {
		return exitError, err
	}
	out, err := p.ApplyConfiguration(ctx, platform.Operator(localWorkspaceID, ""), files, platform.ApplyOptions{DryRun: *dryRun, AppliedBy: "quiver apply"})
	if err != nil {
		return exitError, err
	}
	printApplied(a.stdout, *path, files, out)
	return exitOK, nil
}

// printApplied says what apply did or, in a dry run, would do.
func printApplied(w io.Writer, path string, files *platform.Configuration, out *platform.Applied) {
	fmt.Fprintf(w, "%s: %s\n", path, files.Describe())
	switch {
	case out.Unchanged():
		fmt.Fprintf(w, "unchanged: the fleet's configuration is version %d already\n", out.Version)
		return
	case out.DryRun && out.From == 0:
		fmt.Fprintf(w, "dry run: the fleet has no configuration yet; this would be version %d:\n", out.Version)
	case out.DryRun:
		fmt.Fprintf(w, "dry run: version %d would become version %d:\n", out.From, out.Version)
	default:
		fmt.Fprintf(w, "applied: the fleet's configuration is version %d (it was %d):\n", out.Version, out.From)
	}
	for _, c := range out.Changes {
		fmt.Fprintf(w, "  %s %s\n", changeMark(c.Op), strings.TrimSuffix(c.String(), " "+c.Op))
	}
	if out.DryRun {
		fmt.Fprintln(w, "nothing written (without --dry-run, every node serves it within a second)")
		return
	}
	fmt.Fprintln(w, "every node serves it within a second; runs under way finish with what they started with")
}

// changeMark is a change's mark in apply's list: + added, ~ changed, - removed.
func changeMark(op string) string {
	switch op {
	case platform.Added:
		return "+"
	case platform.Removed:
		return "-"
	}
	return "~"
}
