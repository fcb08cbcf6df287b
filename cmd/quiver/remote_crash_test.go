//go:build unix

package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	qmcp "github.com/quiverhq/quiver/mcp"
)

// The crash test of runs calling a remote MCP server's tool: the tally tool is served by an MCP
// server of the parent test (it outlives every life of quiver serve), the configuration of
// each life imports it, and the server is killed at random moments. A run that a restart
// resumes calls the remote as soon as it resumes, while the new life connects to it: every
// such call must wait for the connection and execute, never answer "not connected", and no
// call may run again once its result was stored.

var remoteCrashServer = crashServer{
	test:      "TestServeRemoteCrashChild",
	envDB:     "QUIVER_REMOTE_CRASH_DB",
	envAgents: "QUIVER_REMOTE_CRASH_AGENTS",
	envLife:   "QUIVER_REMOTE_CRASH_LIFE",
	envConfig: "QUIVER_REMOTE_CRASH_CONFIG",
}

// TestServeRemoteCrashChild is the server the crash test kills; its configuration
// imports the parent's MCP server, sending the life in a header.
func TestServeRemoteCrashChild(t *testing.T) {
	if _, ok := remoteCrashServer.life(); !ok {
		return
	}
	remoteCrashServer.serve()
}

func TestServeCrashDuringRemoteCalls(t *testing.T) {
	if testing.Short() {
		t.Skip("the crash test kills and restarts the server several times (about 20 s, a minute on PostgreSQL)")
	}
	forEachCrashBackend(t, testServeCrashDuringRemoteCalls)
}

// remoteTally is the parent's MCP server with the tally tool: it keeps which life executed
// each call (by the run given in the arguments and the call id Quiver passes in _meta).
type remoteTally struct {
	mu  sync.Mutex
	ran map[string][]string // "RUN/CALL" -> lives, in order
}

func (rt *remoteTally) executions() int {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	n := 0
	for _, lives := range rt.ran {
		n += len(lives)
	}
	return n
}

func (rt *remoteTally) serve(t *testing.T) string {
	srv := sdk.NewServer(&sdk.Implementation{Name: "tally", Version: "1"}, nil)
	sdk.AddTool(srv, &sdk.Tool{Name: "tally", Description: "Counts a call."}, func(ctx context.Context, req *sdk.CallToolRequest, in struct {
		Run int `json:"run"`
		N   int `json:"n"`
	}) (*sdk.CallToolResult, any, error) {
		life := req.Extra.Header.Get("X-Crash-Life")
		call, _ := req.Params.GetMeta()[qmcp.CallIDMetaKey].(string)
		rt.mu.Lock()
		key := fmt.Sprintf("%d/%s", in.Run, call)
		rt.ran[key] = append(rt.ran[key], life)
		rt.mu.Unlock()
		// A little work, so that kills land inside calls as well as between them.
		time.Sleep(time.Duration(10+rand.IntN(40)) * time.Millisecond)
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: tallied(life)}}}, nil, nil
	})
	ts := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	return ts.URL
}

func testServeCrashDuringRemoteCalls(t *testing.T, db string, kills int) {
	rt := &remoteTally{ran: map[string][]string{}}
	url := rt.serve(t)
	dir := t.TempDir()
	agents := filepath.Join(dir, "agents")
	files := map[string]string{
		filepath.Join(dir, "quiver.yaml"): "mcp:\n  servers:\n    - name: remote\n      url: " + url + "\n" +
			"      headers: {X-Crash-Life: '${" + remoteCrashServer.envLife + "}'}\n",
	}
	// An agent per run, whose calls name the run, so that the remote tells the runs' calls apart.
	for run := range crashRuns {
		var turns strings.Builder
		turns.WriteString("turns:\n")
		for i := range crashTurns {
			fmt.Fprintf(&turns, "  - calls: [{name: remote.tally, args: {run: %d, n: %d}}, {name: remote.tally, args: {run: %d, n: %d}}]\n", run, 2*i, run, 2*i+1)
		}
		turns.WriteString("  - text: Done.\n")
		script := filepath.Join(dir, "scripts", fmt.Sprintf("counter%d.yaml", run))
		files[script] = turns.String()
		// Half the agents name the tool, half a pattern: a pattern is not checked against the
		// registry when a run starts, so such a run calls the remote as soon as it resumes.
		tools := "remote.tally"
		if run%2 == 0 {
			tools = `"remote.*"`
		}
		files[filepath.Join(agents, fmt.Sprintf("counter%d.yaml", run))] = fmt.Sprintf("name: counter%d\nmodel: scripted:%s\ntools: [%s]\nstop: {max_steps: 20}\n", run, script, tools)
	}
	writeTestFiles(t, files)

	h := newCrashHarness(t, remoteCrashServer, db, agents)
	h.env = []string{remoteCrashServer.envConfig + "=" + filepath.Join(dir, "quiver.yaml")}
	h.count = rt.executions
	threads := make([]string, crashRuns)
	child, base, _ := h.killLives(kills,
		func() time.Duration { return time.Duration(100+rand.IntN(400)) * time.Millisecond },
		func(base string) {
			for run := range crashRuns {
				agent := fmt.Sprintf("counter%d", run)
				threads[run] = newAPIThread(t, base, h.admin, agent)
				startAPIRun(t, base, h.admin, threads[run], agent, "count")
			}
		})
	histories := h.finishRuns(child, base, threads, kills)
	// The remote's executions, by thread and call as verifyCrashRuns reads them.
	ran := map[string][]string{}
	rt.mu.Lock()
	for run, id := range threads {
		for key, lives := range rt.ran {
			if call, ok := strings.CutPrefix(key, fmt.Sprintf("%d/", run)); ok {
				ran[id+"/"+call] = lives
			}
		}
	}
	rt.mu.Unlock()
	verifyCrashRuns(t, histories, ran)
	if t.Failed() {
		t.Log("the lives' logs:\n" + strings.Join(h.stderrs, "\n---\n"))
	}
}
