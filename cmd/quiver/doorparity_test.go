package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	a2asdk "github.com/a2aproject/a2a-go/a2a"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/platform"
)

// The door-parity test: the same operations through every door that has them (the CLI, the
// /v1 API, MCP over HTTP and over standard input and output, and A2A) give the same outcome
// and, when refused, the same refusal, on each backend. Rows are operations, columns doors: a
// door missing from a row has no such operation (MCP serves an agent as a prompt, which a
// client reads; it does not run it). Every door works on one database and one workspace (the local one), so that what
// differs between two doors can only be the door.

// doorOutcome is what one door made of an operation, in the terms the row compares.
type doorOutcome struct {
	// Refused says the door refused the operation; Words is all it said (stderr, a problem's
	// detail and fields, a tool result's text), in which the row looks for the refusal.
	Refused bool
	Words   string
	// Names are the tools a listing holds.
	Names []string
	// Ran says a tool's code ran; Decision that the door asked for, or waits for, a person's
	// decision on the call.
	Ran, Decision bool
	// Answer is an agent's final answer.
	Answer string
}

// doorRow is an operation and what each door that has it does.
type doorRow struct {
	name  string
	doors map[string]func(t *testing.T) doorOutcome
	// want checks one door's outcome; every door must pass it, so all agree.
	want func(t *testing.T, door string, o doorOutcome)
	// same, when set, is what must be equal between every two doors beyond want.
	same func(o doorOutcome) string
}

func TestDoorParity(t *testing.T) {
	forEachServeBackend(t, testDoorParity)
}

// paritySite is quiver serve and the CLI on one database: the flags that name it, the
// configuration and agents both read, the API's base and key, and the inventory service the
// configuration's OpenAPI tool calls.
type paritySite struct {
	dbArgs           []string
	config, agents   string
	endpoint, base   string
	admin            string
	inventoryCalls   *atomic.Int32
	refundsRun       string // the text the confirmed tool returns when it runs
	elicitationAsked atomic.Int32
}

const inventoryDoc = `openapi: 3.0.3
info: {title: Inventory, version: "1"}
paths:
  /items:
    get:
      operationId: listItems
      summary: Lists the items in stock.
      responses:
        "200":
          description: The items.
          content:
            application/json:
              schema: {type: array, items: {type: string}}
`

func startParitySite(t *testing.T, dbArgs []string) *paritySite {
	s := &paritySite{dbArgs: dbArgs, inventoryCalls: &atomic.Int32{}, refundsRun: "refunded 5"}
	inventory := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.inventoryCalls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `["apple","pear","plum"]`)
	}))
	t.Cleanup(inventory.Close)
	dir := t.TempDir()
	s.config, s.agents = filepath.Join(dir, "quiver.yaml"), filepath.Join(dir, "agents")
	doc := filepath.Join(dir, "inventory.yaml")
	// Each run plays two turns (a call, an answer); the script holds one pair for each door
	// that runs the agent, whichever process plays it.
	turns := strings.Repeat("  - calls: [{name: inventory.listItems}]\n  - {expect: {result_contains: plum}, text: 'In stock: apple, pear, plum.'}\n", 4)
	writeTestFiles(t, map[string]string{
		doc:                              inventoryDoc,
		s.config:                         "openapi:\n  - {name: inventory, document: '" + doc + "', servers: ['" + inventory.URL + "']}\n",
		filepath.Join(dir, "turns.yaml"): "turns:\n" + turns,
		filepath.Join(s.agents, "clerk.yaml"): "name: clerk\ndescription: Says what is in stock.\nmodel: scripted:" + filepath.Join(dir, "turns.yaml") +
			"\ntools: [inventory.listItems]\nexpose_as_tool: true\n",
	})
	endpoint, _, stderr := startServeWith(t, append(slices.Clone(dbArgs), "--agents", s.agents, "--config", s.config)...)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("quiver serve's log:\n%s", stderr.String())
		}
	})
	s.endpoint, s.base, s.admin = endpoint, strings.TrimSuffix(endpoint, "/mcp")+"/v1", firstKeyRE.FindString(stderr.String())

	// A stored tool that requires confirmation, a client tool, a stored OpenAPI document's tool
	// and a disabled tool: the workspace's own tools of each kind.
	createJSTool(t, s.base, s.admin, "refund", `export default ({ amount }) => "refunded " + amount`,
		`{"type":"object","description":"Refunds an amount.","properties":{"amount":{"type":"integer"}},"required":["amount"]}`, true)
	if status, _, out := apiDo(t, "POST", s.base+"/tools", s.admin, `{"name":"open_file","description":"Opens a file on the user's machine.",`+
		`"target":"client","input_schema":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}}`); status != 201 {
		t.Fatalf("the client tool: %d %v", status, out)
	}
	if status, _, out := apiDo(t, "POST", s.base+"/tools", s.admin, `{"name":"retired","description":"Was used once.","target":"client",`+
		`"input_schema":{"type":"object"},"enabled":false}`); status != 201 {
		t.Fatalf("the disabled tool: %d %v", status, out)
	}
	if status, _, out := apiDo(t, "POST", s.base+"/openapi-sources", s.admin, asJSON(map[string]any{
		"name": "catalog", "document": inventoryDoc, "servers": []string{"https://catalog.example.com"}})); status != 201 {
		t.Fatalf("the OpenAPI source: %d %v", status, out)
	}
	return s
}

// cli runs a command of the CLI on the site's database and configuration, with a registry of
// its own (runOwn), and says what it made of it.
func (s *paritySite) cli(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	t.Setenv(configEnv, s.config)
	return runOwn(t, "", append(args, s.dbArgs...)...)
}

// cliRefusal is a CLI command's outcome when only success or refusal matters.
func (s *paritySite) cliRefusal(t *testing.T, args ...string) doorOutcome {
	code, stdout, stderr := s.cli(t, args...)
	return doorOutcome{Refused: code != exitOK, Words: stdout + stderr}
}

// api sends a request to /v1 with the admin's key; a problem's detail and its fields' messages
// are its words.
func (s *paritySite) api(t *testing.T, method, path, body string) (int, map[string]any, doorOutcome) {
	t.Helper()
	status, _, out := apiDo(t, method, s.base+path, s.admin, body)
	o := doorOutcome{Refused: status >= 400}
	if o.Refused {
		o.Words, _ = out["detail"].(string)
		errs, _ := out["errors"].([]any)
		for _, e := range errs {
			msg, _ := e.(map[string]any)["message"].(string)
			o.Words += "\n" + msg
		}
	}
	return status, out, o
}

// mcp opens an MCP session with the admin's key, whose user declines every confirmation it is
// asked for (counted).
func (s *paritySite) mcp(t *testing.T) *sdk.ClientSession {
	t.Helper()
	hc := &http.Client{Transport: bearer{key: s.admin, next: http.DefaultTransport}}
	c := sdk.NewClient(&sdk.Implementation{Name: "parity", Version: "1"}, &sdk.ClientOptions{
		ElicitationHandler: func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			s.elicitationAsked.Add(1)
			return &sdk.ElicitResult{Action: "decline"}, nil
		}})
	cs, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: s.endpoint, HTTPClient: hc, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// stdio starts quiver mcp stdio on the site's database and configuration, in this process
// with pipes for its standard input and output, and connects an MCP client to it whose user
// declines every confirmation it is asked for (counted); the server stops with the test.
func (s *paritySite) stdio(t *testing.T) *sdk.ClientSession {
	t.Helper()
	t.Setenv(configEnv, s.config)
	reg := &quiver.Registry{}
	if err := reg.Register(quiver.Default.Tools()...); err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var stderr syncBuffer
	a := &app{registry: reg, stdin: inR, stdout: outW, stderr: &stderr}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- a.run(ctx, append([]string{"mcp", "stdio"}, s.dbArgs...))
		outW.Close()
	}()
	c := sdk.NewClient(&sdk.Implementation{Name: "parity-stdio", Version: "1"}, &sdk.ClientOptions{
		ElicitationHandler: func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			s.elicitationAsked.Add(1)
			return &sdk.ElicitResult{Action: "decline"}, nil
		}})
	cs, err := c.Connect(context.Background(), &sdk.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		cancel()
		t.Fatalf("connecting to quiver mcp stdio: %v\n%s", err, stderr.String())
	}
	t.Cleanup(func() {
		cs.Close()
		inW.Close()
		cancel()
		if code := <-done; code != exitOK {
			t.Errorf("quiver mcp stdio exited %d:\n%s", code, stderr.String())
		}
	})
	return cs
}

// listedOver is the names of the tools an MCP session lists.
func listedOver(t *testing.T, cs *sdk.ClientSession) doorOutcome {
	t.Helper()
	var o doorOutcome
	for tool, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		o.Names = append(o.Names, tool.Name)
	}
	return o
}

// refusedWith is a row's check that every door refused, saying words.
func refusedWith(words ...string) func(t *testing.T, door string, o doorOutcome) {
	return func(t *testing.T, door string, o doorOutcome) {
		if !o.Refused {
			t.Errorf("%s did it: %s", door, o.Words)
			return
		}
		for _, w := range words {
			if !strings.Contains(o.Words, w) {
				t.Errorf("%s refused, not saying %q: %s", door, w, o.Words)
			}
		}
	}
}

func testDoorParity(t *testing.T, dbArgs []string) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	s := startParitySite(t, dbArgs)
	// The workspace has the server's first key; keys up to the cap leave room for none.
	for i := 1; i < platform.MaxKeysPerWorkspace; i++ {
		if status, _, out := s.api(t, "POST", "/keys", asJSON(map[string]string{"name": fmt.Sprintf("k%d", i), "role": "member"})); status != 201 {
			t.Fatalf("key %d: %d %v", i, status, out)
		}
	}
	rows := []doorRow{
		{name: "a key past the cap", want: refusedWith("the workspace has 100 working API keys, the most it may: revoke one first"),
			doors: map[string]func(t *testing.T) doorOutcome{
				"cli": func(t *testing.T) doorOutcome { return s.cliRefusal(t, "keys", "create", "--name", "one too many") },
				"v1": func(t *testing.T) doorOutcome {
					_, _, o := s.api(t, "POST", "/keys", `{"name":"one too many","role":"member"}`)
					return o
				},
			}},
		{name: "revoking a key that does not exist", want: refusedWith("no API key key_nope in this workspace"),
			doors: map[string]func(t *testing.T) doorOutcome{
				"cli": func(t *testing.T) doorOutcome { return s.cliRefusal(t, "keys", "revoke", "key_nope") },
				"v1": func(t *testing.T) doorOutcome {
					_, _, o := s.api(t, "DELETE", "/keys/key_nope", "")
					return o
				},
			}},
		{name: "revoking what is no key's id", want: refusedWith(`want a key_ id, got `),
			doors: map[string]func(t *testing.T) doorOutcome{
				"cli": func(t *testing.T) doorOutcome { return s.cliRefusal(t, "keys", "revoke", "tol_nope") },
				"v1": func(t *testing.T) doorOutcome {
					_, _, o := s.api(t, "DELETE", "/keys/tol_nope", "")
					return o
				},
			}},
	}
	rows = append(rows, toolNameRows(t, s)...)
	rows = append(rows, listRow(s), confirmRow(s), runRow(s))
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			got := map[string]doorOutcome{}
			for _, door := range []string{"cli", "v1", "mcp", "a2a"} {
				if do := row.doors[door]; do != nil {
					got[door] = do(t)
					row.want(t, door, got[door])
				}
			}
			if row.same == nil {
				return
			}
			var first string
			for door, o := range got {
				if first == "" {
					first = door
				}
				if a, b := row.same(got[first]), row.same(o); a != b {
					t.Errorf("%s and %s differ:\n%s: %s\n%s: %s", first, door, first, a, door, b)
				}
			}
		})
	}
}

// toolNameRows add a tool under names the platform refuses: hostile input, and the names of
// tools the workspace serves already (a built-in one, a stored OpenAPI document's), which the
// new tool would take the place of.
func toolNameRows(t *testing.T, s *paritySite) []doorRow {
	dir := writeFiles(t, map[string]string{"tool.js": weatherJS, "tool.json": weatherSchema})
	add := func(name string) map[string]func(t *testing.T) doorOutcome {
		return map[string]func(t *testing.T) doorOutcome{
			"cli": func(t *testing.T) doorOutcome {
				return s.cliRefusal(t, "tools", "add", "--js", filepath.Join(dir, "tool.js"), "--schema", filepath.Join(dir, "tool.json"), "--name", name)
			},
			"v1": func(t *testing.T) doorOutcome {
				_, _, o := s.api(t, "POST", "/tools", asJSON(map[string]any{"name": name, "description": "Returns the temperature in a city.", "target": "client",
					"input_schema": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}}))
				return o
			},
		}
	}
	return []doorRow{
		{name: "a tool named with a control character", doors: add("bad\nname"), want: refusedWith("U+000A", quiver.NameRule)},
		{name: "a tool named as a blank", doors: add("   "), want: refusedWith("only whitespace")},
		{name: "a tool named as a built-in one", doors: add("get_current_time"),
			want: refusedWith(`the server serves a tool named "get_current_time" already: choose another name`)},
		{name: "a tool named as the configuration's", doors: add("inventory.listItems"),
			want: refusedWith(`the server serves a tool named "inventory.listItems" already: choose another name`)},
		{name: "a tool named as a stored OpenAPI document's", doors: add("catalog.listItems"),
			want: refusedWith(`an OpenAPI document of the workspace serves a tool named "catalog.listItems" already: choose another name`)},
	}
}

// listRow lists the workspace's tools: the built-in ones, the configuration's, a stored tool,
// a client tool and a stored OpenAPI document's, the same at every door; a disabled tool at
// none.
func listRow(s *paritySite) doorRow {
	return doorRow{name: "the workspace's tools",
		doors: map[string]func(t *testing.T) doorOutcome{
			"cli": func(t *testing.T) doorOutcome {
				code, stdout, stderr := s.cli(t, "tools", "list", "--json")
				var list []struct{ Name string }
				if err := json.Unmarshal([]byte(stdout), &list); code != exitOK || err != nil {
					t.Fatalf("tools list: exit %d, %v\n%s\n%s", code, err, stdout, stderr)
				}
				o := doorOutcome{}
				for _, e := range list {
					o.Names = append(o.Names, e.Name)
				}
				return o
			},
			"v1": func(t *testing.T) doorOutcome {
				status, out, o := s.api(t, "GET", "/tools/served", "")
				if status != 200 {
					t.Fatalf("GET /v1/tools/served: %d %v", status, out)
				}
				tools, _ := out["tools"].([]any)
				for _, e := range tools {
					o.Names = append(o.Names, e.(map[string]any)["name"].(string))
				}
				return o
			},
			"mcp": func(t *testing.T) doorOutcome {
				return listedOver(t, s.mcp(t))
			},
			"stdio": func(t *testing.T) doorOutcome {
				return listedOver(t, s.stdio(t))
			},
		},
		want: func(t *testing.T, door string, o doorOutcome) {
			for _, name := range []string{"get_current_time", "inventory.listItems", "refund", "open_file", "catalog.listItems"} {
				if !slices.Contains(o.Names, name) {
					t.Errorf("%s does not list %s: %v", door, name, o.Names)
				}
			}
			if slices.Contains(o.Names, "retired") {
				t.Errorf("%s lists the disabled tool", door)
			}
		},
		same: func(o doorOutcome) string {
			names := slices.Clone(o.Names)
			slices.Sort(names)
			return strings.Join(names, ", ")
		},
	}
}

// confirmRow calls the tool that requires confirmation: no door runs it without a person's
// decision. The CLI and the API have no one to ask in the call and say it waits for one; an
// MCP client is asked (through elicitation), and its user declines here.
func confirmRow(s *paritySite) doorRow {
	ran := func(text string) bool { return strings.Contains(text, s.refundsRun) }
	return doorRow{name: "a call that requires confirmation",
		doors: map[string]func(t *testing.T) doorOutcome{
			"cli": func(t *testing.T) doorOutcome {
				_, stdout, stderr := s.cli(t, "call", "refund", "--args", `{"amount":5}`)
				var r quiver.Result
				if err := json.Unmarshal([]byte(stdout), &r); err != nil {
					t.Fatalf("call: %v\n%s\n%s", err, stdout, stderr)
				}
				return doorOutcome{Ran: ran(stdout), Decision: r.Code == quiver.CodeConfirmationRequired, Words: stdout}
			},
			"v1": func(t *testing.T) doorOutcome {
				status, out, o := s.api(t, "POST", "/tools/refund/call", `{"args":{"amount":5}}`)
				if status != 200 {
					t.Fatalf("the call: %d %v", status, out)
				}
				var r struct{ Result quiver.Result }
				if err := json.Unmarshal([]byte(asJSON(out)), &r); err != nil {
					t.Fatal(err)
				}
				o.Ran, o.Words = ran(asJSON(out)), asJSON(out)
				o.Decision = r.Result.Code == quiver.CodeConfirmationRequired
				return o
			},
			"mcp": func(t *testing.T) doorOutcome {
				before := s.elicitationAsked.Load()
				res, err := s.mcp(t).CallTool(context.Background(), &sdk.CallToolParams{Name: "refund", Arguments: map[string]any{"amount": 5}})
				if err != nil {
					t.Fatal(err)
				}
				return doorOutcome{Ran: ran(asJSON(res)), Decision: s.elicitationAsked.Load() == before+1, Words: asJSON(res)}
			},
			"stdio": func(t *testing.T) doorOutcome {
				before := s.elicitationAsked.Load()
				res, err := s.stdio(t).CallTool(context.Background(), &sdk.CallToolParams{Name: "refund", Arguments: map[string]any{"amount": 5}})
				if err != nil {
					t.Fatal(err)
				}
				return doorOutcome{Ran: ran(asJSON(res)), Decision: s.elicitationAsked.Load() == before+1, Words: asJSON(res)}
			},
		},
		want: func(t *testing.T, door string, o doorOutcome) {
			if o.Ran || !o.Decision {
				t.Errorf("%s: ran %v, asked for or waits on a decision %v: %s", door, o.Ran, o.Decision, o.Words)
			}
		},
	}
}

// runRow runs the agent whose tool is the configuration's OpenAPI operation: every door's run
// calls it once and answers with what it returned.
func runRow(s *paritySite) doorRow {
	called := func(t *testing.T, run func() string) doorOutcome {
		before := s.inventoryCalls.Load()
		answer := run()
		return doorOutcome{Answer: answer, Ran: s.inventoryCalls.Load() == before+1}
	}
	const message, answer = "What is in stock?", "In stock: apple, pear, plum."
	return doorRow{name: "a run of an agent with a configuration's tool",
		doors: map[string]func(t *testing.T) doorOutcome{
			"cli": func(t *testing.T) doorOutcome {
				return called(t, func() string {
					code, stdout, stderr := s.cli(t, "run", "--agents", s.agents, "--agent", "clerk", "--config", s.config, message)
					if code != exitOK {
						t.Errorf("run: exit %d\n%s\n%s", code, stdout, stderr)
					}
					return strings.TrimSpace(stdout)
				})
			},
			"v1": func(t *testing.T) doorOutcome {
				return called(t, func() string {
					th := newAPIThread(t, s.base, s.admin, "clerk")
					startAPIRun(t, s.base, s.admin, th, "clerk", message)
					var last string
					waitUntil(t, "the run's answer", 30*time.Second, func() (bool, string) {
						msgs, _ := threadMessages(t, s.base, s.admin, th)
						if n := len(msgs); n > 0 && msgs[n-1].Role == "assistant" && len(msgs[n-1].ToolCalls) == 0 {
							last = msgs[n-1].Content
							return true, last
						}
						return false, asJSON(msgs)
					})
					return last
				})
			},
			"a2a": func(t *testing.T) doorOutcome {
				return called(t, func() string {
					c := a2aClient(t, strings.TrimSuffix(s.base, "/v1")+"/a2a/clerk", s.admin)
					res, err := c.SendMessage(context.Background(), &a2asdk.MessageSendParams{Message: a2asdk.NewMessage(a2asdk.MessageRoleUser, a2asdk.TextPart{Text: message})})
					task, ok := res.(*a2asdk.Task)
					if err != nil || !ok || task.Status.State != a2asdk.TaskStateCompleted || len(task.Artifacts) != 1 {
						t.Fatalf("message/send: %+v %v", res, err)
					}
					return task.Artifacts[0].Parts[0].(a2asdk.TextPart).Text
				})
			},
		},
		want: func(t *testing.T, door string, o doorOutcome) {
			if !o.Ran || o.Answer != answer {
				t.Errorf("%s: the configuration's tool called once %v, answer %q, want %q", door, o.Ran, o.Answer, answer)
			}
		},
	}
}
