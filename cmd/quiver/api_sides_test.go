package main

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// A two-sided dual-AI agent over the API, against quiver serve on each backend: a lead starts
// it as a non-blocking sub-agent (a background job); its sides take turns in its thread, each
// turn recorded with its side; its answer, side_a's last, wakes the lead.
func TestServeTwoSidedSubagent(t *testing.T) {
	forEachServeBackend(t, testServeTwoSidedSubagent)
}

func testServeTwoSidedSubagent(t *testing.T, dbArgs []string) {
	agents, script := scriptedAgentsDir(t)
	writeTestFiles(t, map[string]string{
		script("lead"): `turns:
  - calls: [{name: debate, args: {message: A slogan for Go.}}]
  - text: The debate runs.
  - text: The slogan is in.
`,
		script("writer"): `turns:
  - calls: [{name: get_current_time, args: {timezone: UTC}}]
  - text: "Go: fast."
  - expect: {user_contains: "Too thin"}
    text: "Go: simple, fast, yours."
`,
		script("critic"): `turns:
  - expect: {user_contains: "Go: fast."}
    text: Too thin.
  - text: APPROVED
`,
		filepath.Join(agents, "lead.yaml"): `name: lead
model: scripted:` + script("lead") + `
tools: [get_current_time]
subagents: [{name: debate, blocking: false}]
`,
		filepath.Join(agents, "debate.yaml"): `name: debate
type: dual_ai
description: Writes a slogan with a critic.
side_a: writer
side_b: critic
conversation: {until: APPROVED}
`,
		filepath.Join(agents, "writer.yaml"): "kind: prompt\nname: writer\nmodel: scripted:" + script("writer") + "\ntools: [get_current_time]\n",
		filepath.Join(agents, "critic.yaml"): "kind: prompt\nname: critic\nmodel: scripted:" + script("critic") + "\n",
	})
	base, admin := serveAgentsAPI(t, dbArgs, agents)
	lead := newAPIThread(t, base, admin, "lead")
	startAPIRun(t, base, admin, lead, "lead", "Find a slogan.")
	waitUntil(t, "the debate's answer wakes the lead", 30*time.Second, func() (bool, string) {
		msgs, raw := threadMessages(t, base, admin, lead)
		return len(msgs) > 0 && msgs[len(msgs)-1].Content == "The slogan is in.", raw
	})
	msgs, raw := threadMessages(t, base, admin, lead)
	if !slices.ContainsFunc(msgs, func(m apiMessage) bool {
		return m.Role == "system" && strings.Contains(m.Content, "Go: simple, fast, yours.") && !strings.Contains(m.Content, "APPROVED")
	}) {
		t.Fatalf("the lead was not given side_a's answer: %s", raw)
	}
	kids := slices.DeleteFunc(listThreads(t, base, admin, ""), func(th apiThread) bool { return th.ParentID != lead })
	if len(kids) != 1 {
		t.Fatalf("children of the lead: %+v", kids)
	}
	status, _, out := apiDo(t, "GET", base+"/threads/"+kids[0].ID+"/messages?limit=100", admin, "")
	if status != 200 {
		t.Fatalf("the debate's messages: %d %v", status, out)
	}
	var sides []string
	for _, m := range out["messages"].([]any) {
		if m := m.(map[string]any); m["role"] == "assistant" {
			side, _ := m["side"].(string)
			sides = append(sides, side)
		}
	}
	if want := []string{"side_a", "side_a", "side_b", "side_a", "side_b"}; !slices.Equal(sides, want) {
		t.Fatalf("the debate's turns by %v, want %v: %s", sides, want, asJSON(out))
	}
	status, _, th := apiDo(t, "GET", base+"/threads/"+kids[0].ID, admin, "")
	if status != 200 || th["current_side"] != "side_b" {
		t.Fatalf("the debate's thread: %d %v", status, th)
	}
}
