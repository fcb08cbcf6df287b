package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	a2asdk "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Governance whatever a tool's source (issue 46), end to end: quiver serve reads a
// configuration that puts a person's approval on an OpenAPI document's operations that change
// something (a rule over annotations), on a remote MCP server's tools (requires_confirmation)
// and on an A2A agent (a rule of its own). Each source is a real server on 127.0.0.1 that
// counts what reaches it, so a test sees whether a call ran, not only what Quiver says of it.
// One server serves every subtest: they share the sources and run in order.

// shopDoc is the OpenAPI source's document: a GET, which no rule governs, and a POST, which
// the source's rule over readOnlyHint: false makes wait for a person.
const shopDoc = `openapi: 3.0.3
info: {title: Shop, version: "1"}
paths:
  /refunds:
    get:
      operationId: listRefunds
      summary: Lists the refunds made.
      responses:
        "200":
          description: The refunds.
          content:
            application/json:
              schema: {type: array, items: {type: string}}
    post:
      operationId: createRefund
      summary: Refunds an order.
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: object
              properties:
                order: {type: string}
                amount: {type: integer}
              required: [order, amount]
      responses:
        "201":
          description: The refund made.
          content:
            application/json:
              schema: {type: object, properties: {status: {type: string}}}
`

// govSource is one governed tool source: its tool, the agent whose run calls it (and what the
// agent answers once the call ran), the arguments an MCP client calls it with, and how many
// times its server ran it.
type govSource struct {
	name, tool, agent, answer, ranText string
	args                               map[string]any
	ran                                *atomic.Int32
}

// govSite is quiver serve governing three sources, with its MCP endpoint.
type govSite struct {
	*consoleSite
	endpoint string
	sources  []govSource
	// listed counts the calls of the shop's GET, which no rule governs.
	listed *atomic.Int32
}

// startGovSite starts the three sources and quiver serve (SQLite) with the configuration and
// agents that use them, and waits until every source's tool is served.
func startGovSite(t *testing.T) *govSite {
	t.Helper()
	shopURL, refunds, listed := startShop(t)
	ledgerURL, booked := startLedger(t)
	payeeURL, paid := startPayee(t)
	s := &govSite{listed: listed, sources: []govSource{
		{name: "openapi", tool: "shop.createRefund", agent: "refunder", answer: "Refunded.", ranText: "refunded",
			args: map[string]any{"body": map[string]any{"order": "7", "amount": 5}}, ran: refunds},
		{name: "mcp", tool: "ledger.refund", agent: "booker", answer: "Booked.", ranText: "booked 5",
			args: map[string]any{"amount": 5}, ran: booked},
		{name: "a2a", tool: "payee", agent: "payer", answer: "Paid.", ranText: "Paid 5 euros.",
			args: map[string]any{"message": "Pay 5 euros for order 7."}, ran: paid},
	}}
	agents, script := scriptedAgentsDir(t)
	cfg := filepath.Join(t.TempDir(), "quiver.yaml")
	files := map[string]string{cfg: "openapi:\n" +
		"  - name: shop\n    document: " + shopURL + "/openapi.yaml\n    servers: ['" + shopURL + "']\n" +
		"    governance:\n      - when: {readOnlyHint: false}\n        requires_confirmation: true\n" +
		"mcp:\n  servers:\n    - {name: ledger, url: '" + ledgerURL + "', requires_confirmation: true}\n" +
		"a2a:\n  agents:\n    - name: payee\n      url: '" + payeeURL + "'\n      governance:\n        - requires_confirmation: true\n"}
	for _, src := range s.sources {
		// Each run plays a call, then an answer that holds only if the call's result came back.
		files[script(src.agent)] = "turns:\n  - calls: [{name: " + src.tool + ", args: " + asJSON(src.args) + "}]\n" +
			"  - {expect: {result_contains: " + jsonString(src.ranText) + "}, text: " + src.answer + "}\n"
		files[filepath.Join(agents, src.agent+".yaml")] = "name: " + src.agent + "\nmodel: scripted:" + script(src.agent) +
			"\ntools: [" + src.tool + "]\n"
	}
	writeTestFiles(t, files)
	endpoint, _, stderr := startServeWith(t, "--db", filepath.Join(t.TempDir(), "q.db"), "--agents", agents, "--config", cfg)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("quiver serve's log:\n%s", stderr.String())
		}
	})
	base := strings.TrimSuffix(endpoint, "/mcp")
	s.consoleSite = &consoleSite{origin: base, api: base + "/v1", admin: firstKeyRE.FindString(stderr.String())}
	s.endpoint = endpoint
	// The remote MCP server's tools are served once quiver serve has connected to it.
	want := map[string]bool{"shop.createRefund": true, "shop.listRefunds": false, "ledger.refund": true, "payee": true}
	waitUntil(t, "every source's tool served, governed", 20*time.Second, func() (bool, string) {
		got := map[string]any{}
		for name := range want {
			if status, _, out := apiDo(t, "GET", s.api+"/tools/served/"+name, s.admin, ""); status == 200 {
				got[name] = out["requires_confirmation"]
			}
		}
		return fmt.Sprint(got) == fmt.Sprint(want), fmt.Sprintf("requires_confirmation by tool: %v, want %v", got, want)
	})
	return s
}

// startShop serves the shop's OpenAPI document and its two operations, counting each.
func startShop(t *testing.T) (url string, refunds, listed *atomic.Int32) {
	refunds, listed = &atomic.Int32{}, &atomic.Int32{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /openapi.yaml", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/yaml")
		fmt.Fprint(w, shopDoc)
	})
	mux.HandleFunc("POST /refunds", func(w http.ResponseWriter, _ *http.Request) {
		refunds.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, `{"status":"refunded"}`)
	})
	mux.HandleFunc("GET /refunds", func(w http.ResponseWriter, _ *http.Request) {
		listed.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `["order 7"]`)
	})
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	return ts.URL, refunds, listed
}

// startLedger serves an MCP server (the go-sdk's, over streamable HTTP) whose refund tool
// counts its runs.
func startLedger(t *testing.T) (url string, ran *atomic.Int32) {
	ran = &atomic.Int32{}
	srv := sdk.NewServer(&sdk.Implementation{Name: "ledger", Version: "1"}, nil)
	sdk.AddTool(srv, &sdk.Tool{Name: "refund", Description: "Books a refund in the ledger."}, func(_ context.Context, _ *sdk.CallToolRequest, in struct {
		Amount int `json:"amount"`
	}) (*sdk.CallToolResult, any, error) {
		ran.Add(1)
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: fmt.Sprintf("booked %d", in.Amount)}}}, nil, nil
	})
	ts := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	return ts.URL, ran
}

// payee is an A2A agent that pays what it is asked to, counting its runs.
type payee struct{ ran *atomic.Int32 }

func (p payee) Execute(ctx context.Context, _ *a2asrv.RequestContext, q eventqueue.Queue) error {
	p.ran.Add(1)
	return q.Write(ctx, a2asdk.NewMessage(a2asdk.MessageRoleAgent, a2asdk.TextPart{Text: "Paid 5 euros."}))
}

func (payee) Cancel(context.Context, *a2asrv.RequestContext, eventqueue.Queue) error { return nil }

// startPayee serves the payee agent over A2A (JSON-RPC), its card at the well-known path.
func startPayee(t *testing.T) (url string, ran *atomic.Int32) {
	ran = &atomic.Int32{}
	mux := http.NewServeMux()
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	card := &a2asdk.AgentCard{Name: "Payee", Description: "Pays what it is asked to.", URL: ts.URL + "/invoke", Version: "1",
		PreferredTransport: a2asdk.TransportProtocolJSONRPC, DefaultInputModes: []string{"text"}, DefaultOutputModes: []string{"text"}}
	mux.Handle("/invoke", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(payee{ran: ran})))
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))
	return ts.URL, ran
}

// pendingCall waits until a thread's run is paused on a call for a person's decision and
// returns the call's id and tool.
func (s *govSite) pendingCall(t *testing.T, threadID string) (id, tool string) {
	t.Helper()
	waitUntil(t, "thread "+threadID+" to wait for a decision", consoleWait, func() (bool, string) {
		_, _, th := apiDo(t, "GET", s.api+"/threads/"+threadID, s.admin, "")
		state, _ := th["state"].(map[string]any)
		pending, _ := state["pending"].(map[string]any)
		call, _ := pending["call"].(map[string]any)
		id, _ = call["id"].(string)
		tool, _ = call["name"].(string)
		return th["status"] == "waiting" && pending["reason"] == "confirmation" && id != "", asJSON(th)
	})
	return id, tool
}

func TestGovernancePerSource(t *testing.T) {
	timed(t)
	s := startGovSite(t)
	t.Run("a run waits for a person, then runs the call once", func(t *testing.T) { testGovernedRuns(t, s) })
	t.Run("an MCP client is asked through elicitation", func(t *testing.T) { testGovernedElicitation(t, s) })
	t.Run("a workspace's rules over the API", func(t *testing.T) { testWorkspaceRules(t, s) })
}

// testGovernedRuns: a run of each source's agent pauses on its call, which the thread, the
// API's waiting calls and the console's approvals show, and which has not reached the source;
// approved over /v1, the call reaches it exactly once and the run ends with its answer.
func testGovernedRuns(t *testing.T, s *govSite) {
	threads, calls := map[string]string{}, map[string]string{}
	for _, src := range s.sources {
		threads[src.name] = s.namedThread(t, src.agent, "Governed "+src.name)
		startAPIRun(t, s.api, s.admin, threads[src.name], src.agent, "Please refund order 7.")
	}
	for _, src := range s.sources {
		id, tool := s.pendingCall(t, threads[src.name])
		if tool != src.tool {
			t.Errorf("%s: the run waits on %q, want %q", src.name, tool, src.tool)
		}
		calls[src.name] = id
	}
	_, _, out := apiDo(t, "GET", s.api+"/pending", s.admin, "")
	for _, src := range s.sources {
		if !strings.Contains(asJSON(out), `"thread_id":"`+threads[src.name]+`"`) || !strings.Contains(asJSON(out), `"name":"`+src.tool+`"`) {
			t.Errorf("GET /v1/pending lacks %s's call on %s: %s", src.tool, threads[src.name], asJSON(out))
		}
	}
	t.Run("the console's approvals show them", func(t *testing.T) {
		tab := newBrowser(t)
		tab.signIn(s.consoleSite, s.admin)
		tab.route("#/approvals")
		for _, src := range s.sources {
			tab.waitFor(src.tool+" waiting in the approvals", testEls("pending-item")+`.some((e) => e.textContent.includes(`+
				js(src.tool)+`) && e.textContent.includes(`+js("Governed "+src.name)+`))`, 0)
		}
	})
	for _, src := range s.sources {
		if n := src.ran.Load(); n != 0 {
			t.Errorf("%s: the call reached its server %d times before anyone decided", src.name, n)
		}
		body := asJSON(map[string]string{"call_id": calls[src.name], "action": "approve"})
		if status, _, out := apiDo(t, "POST", s.api+"/threads/"+threads[src.name]+"/decisions", s.admin, body); status != 202 {
			t.Fatalf("%s: approving: %d %v", src.name, status, out)
		}
	}
	for _, src := range s.sources {
		s.waitMessages(t, threads[src.name], src.answer)
	}
	for _, src := range s.sources {
		if n := src.ran.Load(); n != 1 {
			t.Errorf("%s: the approved call reached its server %d times, want once", src.name, n)
		}
	}
}

// testGovernedElicitation: an MCP client calling each source's tool is asked to approve it
// (the request names the tool); declined, the call does not reach the source; accepted, it
// runs once and the client gets its result.
func testGovernedElicitation(t *testing.T, s *govSite) {
	var mu sync.Mutex
	var asked []string
	action := "decline"
	hc := &http.Client{Transport: bearer{key: s.admin, next: http.DefaultTransport}}
	c := sdk.NewClient(&sdk.Implementation{Name: "governance-e2e", Version: "1"}, &sdk.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			mu.Lock()
			defer mu.Unlock()
			asked = append(asked, req.Params.Message)
			return &sdk.ElicitResult{Action: action}, nil
		}})
	cs, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: s.endpoint, HTTPClient: hc, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for _, src := range s.sources {
		for _, answer := range []string{"decline", "accept"} {
			mu.Lock()
			action, asked = answer, nil
			mu.Unlock()
			before := src.ran.Load()
			res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: src.tool, Arguments: src.args})
			if err != nil {
				t.Fatalf("%s: calling %s: %v", src.name, src.tool, err)
			}
			mu.Lock()
			questions := slices.Clone(asked)
			mu.Unlock()
			if len(questions) != 1 || !strings.Contains(questions[0], src.tool) {
				t.Errorf("%s (%s): the client was asked %q, want one request naming %s", src.name, answer, questions, src.tool)
			}
			ran, text := src.ran.Load()-before, resultText(res)
			switch {
			case answer == "decline" && (ran != 0 || !res.IsError || !strings.Contains(text, "declined")):
				t.Errorf("%s declined: ran %d times, result %q (error %v)", src.name, ran, text, res.IsError)
			case answer == "accept" && (ran != 1 || res.IsError || !strings.Contains(text, src.ranText)):
				t.Errorf("%s accepted: ran %d times, result %q (error %v), want once, saying %q", src.name, ran, text, res.IsError, src.ranText)
			}
		}
	}
}

// resultText is the text of an MCP tool result's content.
func resultText(res *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// mcpToolNames lists the tools an MCP session is offered.
func mcpToolNames(t *testing.T, cs *sdk.ClientSession) []string {
	t.Helper()
	var names []string
	for tool, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
	}
	return names
}

// testWorkspaceRules: PUT /v1/governance is an admin's (a member's key is refused 403), checks
// every rule (422 naming rules[i], nothing stored) and the version it changes from (409); a
// rule it stores denying a tool takes it out of an MCP client's list, and a call to it is
// refused with policy_denied at MCP and /v1 alike, before it reaches its server.
func testWorkspaceRules(t *testing.T, s *govSite) {
	cs, err := connectWithKey(t, s.endpoint, s.admin)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if names := mcpToolNames(t, cs); !slices.Contains(names, "shop.listRefunds") {
		t.Fatalf("before any workspace rule, MCP lists %v, without shop.listRefunds", names)
	}
	status, _, out := apiDo(t, "POST", s.api+"/keys", s.admin, `{"role":"member","name":"a member"}`)
	member, _ := out["secret"].(string)
	if status != 201 || member == "" {
		t.Fatalf("a member's key: %d %v", status, out)
	}
	deny := `{"rules":[{"tools":["shop.listRefunds"],"access":"deny"}],"version":0}`
	if status, _, out := apiDo(t, "PUT", s.api+"/governance", member, deny); status != 403 || out["code"] != "forbidden" {
		t.Errorf("a member's PUT /v1/governance: %d %v, want 403 forbidden", status, out)
	}
	checkRefusedRules(t, s)

	status, _, out = apiDo(t, "PUT", s.api+"/governance", s.admin, deny)
	if status != 200 || out["version"] != float64(1) || !strings.Contains(asJSON(out["workspace"]), `"access":"deny"`) {
		t.Fatalf("the admin's PUT /v1/governance: %d %v", status, out)
	}
	if status, _, out := apiDo(t, "PUT", s.api+"/governance", s.admin, deny); status != 409 || out["code"] != "conflict" {
		t.Errorf("a PUT from version 0 after version 1: %d %v, want 409 conflict", status, out)
	}
	checkDenied(t, s, cs)
}

// checkDenied checks that shop.listRefunds, which the workspace's rule 1 denies, is neither
// offered nor callable over MCP and /v1, and never reached its server.
func checkDenied(t *testing.T, s *govSite, cs *sdk.ClientSession) {
	t.Helper()
	names := mcpToolNames(t, cs)
	if slices.Contains(names, "shop.listRefunds") || !slices.Contains(names, "shop.createRefund") {
		t.Errorf("after the workspace denied shop.listRefunds, MCP lists %v", names)
	}
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "shop.listRefunds", Arguments: map[string]any{}})
	if err != nil || !res.IsError || !strings.Contains(resultText(res), "the workspace's governance rule 1 denies it") {
		t.Errorf("an MCP call of the denied tool: %v, %v", resultText(res), err)
	}
	status, _, out := apiDo(t, "POST", s.api+"/tools/shop.listRefunds/call", s.admin, `{"args":{}}`)
	if result, _ := out["result"].(map[string]any); status != 200 || result["code"] != "policy_denied" {
		t.Errorf("a /v1 call of the denied tool: %d %v, want its result refused with policy_denied", status, out)
	}
	if n := s.listed.Load(); n != 0 {
		t.Errorf("the denied tool reached its server %d times", n)
	}
}

// checkRefusedRules sends rules the API must refuse, each naming the rule at fault, and
// checks that none was stored.
func checkRefusedRules(t *testing.T, s *govSite) {
	t.Helper()
	tooMany := make([]map[string]any, 501)
	for i := range tooMany {
		tooMany[i] = map[string]any{"access": "deny"}
	}
	for _, c := range []struct {
		name, rules, where, says string
	}{
		{"a malformed pattern", `[{"tools":["[refund"],"access":"deny"}]`, "body.rules[0]", "malformed"},
		{"a rule that sets nothing", `[{"access":"deny"},{"tools":["payee"]}]`, "body.rules[1]", "sets nothing"},
		{"a confirmation lifted", `[{"source":"mcp:*","requires_confirmation":false}]`, "body.rules[0]", "not lift it"},
		{"an unknown access", `[{"access":"maybe"}]`, "body.rules[0].access", ""},
		{"a timeout that is no duration", `[{"access":"deny"},{"access":"deny"},{"timeout":"soon"}]`, "body.rules[2].timeout", "not a duration"},
		{"annotations", `[{"tools":["payee"],"annotations":{"readOnlyHint":true}}]`, "body.rules[0]", "may not set annotations"},
		{"a provider name", `[{"access":"deny"},{"tools":["shop.createRefund"],"provider_name":"refund"}]`, "body.rules[1]", "may not set provider_name"},
		{"over the cap", asJSON(tooMany), "body.rules", "500"},
	} {
		status, _, out := apiDo(t, "PUT", s.api+"/governance", s.admin, `{"rules":`+c.rules+`,"version":0}`)
		fields := asJSON(out["errors"])
		if status != 422 || !slices.Contains(problemLocations(out), c.where) || !strings.Contains(fields+fmt.Sprint(out["detail"]), c.says) {
			t.Errorf("%s: %d %v, want 422 naming %s, saying %q", c.name, status, out, c.where, c.says)
		}
		// The location names the rule; a message counting rules its own way would name another.
		if strings.Contains(fields, "governance rule") {
			t.Errorf("%s: the message numbers the rule apart from its location: %s", c.name, fields)
		}
	}
	if _, _, out := apiDo(t, "GET", s.api+"/governance", s.admin, ""); out["version"] != float64(0) {
		t.Errorf("refused rules were stored: %v", out)
	}
}
