package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/thread"
)

// quiver threads: the local workspace's threads, listed a page at a time and shown one by one.

// threadsList prints a page of the local workspace's threads, newest first, and how to see the
// next page.
func (a *app) threadsList(ctx context.Context, inv *invocation) (int, error) {
	limit := inv.fs.Int("limit", store.DefaultThreadPage, fmt.Sprintf("threads per page, 1 to %d", store.MaxThreadPage))
	cursor := inv.fs.String("cursor", "", "where the page starts: the cursor the previous page printed")
	status := inv.fs.String("status", "", "only the threads in this status: idle, running, waiting, failed or terminated")
	asJSON := inv.fs.Bool("json", false, `print {"threads": [...], "next": CURSOR} as JSON`)
	if err := inv.parseNone(""); err != nil {
		return exitUsage, err
	}
	if *limit < 1 || *limit > store.MaxThreadPage {
		return exitUsage, usagef("--limit must be 1 to %d, got %d", store.MaxThreadPage, *limit)
	}
	if *status != "" && !platform.Status(*status).Valid() {
		return exitUsage, usagef("--status must be idle, running, waiting, failed or terminated, got %q", *status)
	}
	if !inv.store.exists() {
		if *asJSON {
			return exitOK, writeJSON(a.stdout, map[string]any{"threads": []any{}, "next": ""})
		}
		fmt.Fprintln(a.stderr, "no threads yet: there is no database")
		return exitOK, nil
	}
	p, actor, db, err := a.localPlatform(ctx, inv)
	if err != nil {
		return exitError, err
	}
	page, err := p.Threads(ctx, actor, store.ThreadFilter{Limit: *limit, Cursor: *cursor}, platform.Status(*status))
	if e := (*platform.Error)(nil); errors.As(err, &e) && e.Kind == platform.Invalid {
		return exitUsage, usagef("%v", err)
	}
	if err != nil {
		return exitError, err
	}
	if *asJSON {
		return exitOK, writeJSON(a.stdout, struct {
			Threads []threadListed `json:"threads"`
			Next    string         `json:"next"`
		}{listed(page.Threads), page.NextCursor})
	}
	if len(page.Threads) == 0 && *cursor == "" {
		fmt.Fprintf(a.stderr, "no threads yet in this database (%s)\n", db.Where)
		return exitOK, nil
	}
	w := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "THREAD\tCREATED\tSTATUS\tAGENT\tSTEPS\tTAGS")
	for _, th := range page.Threads {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%s\n", th.ID, th.CreatedAt.Format("2006-01-02 15:04:05Z"), th.Status,
			orDash(th.AgentID), th.StepCount, orDash(strings.Join(th.Tags, ",")))
	}
	if err := w.Flush(); err != nil {
		return exitError, err
	}
	if page.NextCursor != "" {
		more := "quiver threads list --cursor " + page.NextCursor
		if *status != "" {
			more += " --status " + *status
		}
		fmt.Fprintf(a.stderr, "more: %s\n", more)
	}
	return exitOK, nil
}

// threadListed is a thread as quiver threads list --json prints it: the stored thread with the
// status every door shows (waiting, failed) and how its last run ended.
type threadListed struct {
	store.Thread
	Status platform.Status `json:"status"`
	Run    *agent.Outcome  `json:"run,omitempty"`
}

func listed(items []*platform.ThreadItem) []threadListed {
	out := make([]threadListed, len(items))
	for i, th := range items {
		out[i] = threadListed{Thread: *th.Thread, Status: th.Status, Run: th.Run}
	}
	return out
}

// threads prints stored threads.
func (a *app) threadsShow(ctx context.Context, inv *invocation) (int, error) {
	asJSON := inv.fs.Bool("json", false, "print the messages as JSON")
	pos, err := inv.parse(1, 1, "threads show needs exactly one thread id")
	if err != nil {
		return exitUsage, err
	}
	db, err := inv.open(ctx)
	if err != nil {
		return exitError, err
	}
	th, err := thread.Open(ctx, db, localWorkspaceID, pos[0])
	if errors.Is(err, store.ErrNotFound) {
		return exitError, fmt.Errorf("no thread %s in this database (%s)", pos[0], db.Where)
	}
	if err != nil {
		return exitError, fmt.Errorf("thread %s: %w", pos[0], err)
	}
	hist, err := th.History(ctx)
	if err != nil {
		return exitError, err
	}
	if *asJSON {
		return exitOK, writeJSON(a.stdout, hist)
	}
	info := th.Info()
	fmt.Fprintf(a.stdout, "thread %s  agent %s  status %s  steps %d  created %s\n", info.ID, orDash(agent.CurrentAgent(&info)), info.Status,
		info.StepCount, info.CreatedAt.Format("2006-01-02 15:04:05Z"))
	if info.ParentID != "" {
		fmt.Fprintf(a.stdout, "parent %s\n", info.ParentID)
	}
	kids, err := th.Children(ctx)
	if err != nil {
		return exitError, err
	}
	if len(kids) > 0 {
		fmt.Fprintln(a.stdout, "children:")
		tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  REF\tNAME\tAGENT\tSTATUS\tBLOCKING\tRESUMABLE")
		for _, k := range kids {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%t\t%t\n", k.Ref, orDash(k.Name), orDash(k.AgentID), k.Status, k.Blocking, k.Resumable)
		}
		tw.Flush()
	}
	if err := printState(ctx, a.stdout, th); err != nil {
		return exitError, err
	}
	for _, m := range hist {
		switch m.Role {
		case store.RoleTool:
			status := "ok"
			if m.Result != nil && m.Result.Status != string(quiver.StatusSuccess) {
				status = "error"
				if m.Result.Code != "" {
					status += " (" + m.Result.Code + ")"
				}
			}
			fmt.Fprintf(a.stdout, "%4d tool      %s [%s] %s: %s\n", m.Seq, m.ToolName, m.ToolCallID, status, oneLine(m.Content, 500))
		default:
			if m.Content != "" {
				fmt.Fprintf(a.stdout, "%4d %-9s %s\n", m.Seq, m.Role, m.Content)
			}
			for _, c := range m.ToolCalls {
				fmt.Fprintf(a.stdout, "%4d %-9s → %s [%s] %s\n", m.Seq, m.Role, c.Name, c.ID, oneLine(string(thread.CallArgs(c.Args)), 500))
			}
		}
	}
	return exitOK, nil
}

// printState prints the thread's state (what calls wrote with _outputPath) and its
// instances', indented; nothing for a thread without any.
func printState(ctx context.Context, w io.Writer, th *thread.Thread) error {
	doc, err := th.State(ctx, "")
	if err != nil {
		return err
	}
	names, err := th.Instances(ctx)
	if err != nil {
		return err
	}
	show := func(label string, doc json.RawMessage) {
		var b bytes.Buffer
		if json.Indent(&b, doc, "  ", "  ") != nil {
			b.Reset()
			b.Write(doc)
		}
		fmt.Fprintf(w, "%s:\n  %s\n", label, b.String())
	}
	if string(doc) != "{}" {
		show("state", doc)
	}
	for _, name := range names {
		doc, err := th.State(ctx, name)
		if err != nil {
			return err
		}
		show("instance "+name, doc)
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
