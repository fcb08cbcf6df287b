package openapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/openapi"
)

// TestAttacks: what a model (or a hostile service) may try through an imported tool. Each
// case calls a tool with arguments a model could send, against services on loopback, and
// checks both the result and what reached the services.
func TestAttacks(t *testing.T) {
	var elsewhere atomic.Int32
	// Another https host (httptest's TLS servers share a certificate the client trusts), so
	// that only the host check stands in the way.
	other := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		echo(w, r)
	}))
	defer other.Close()
	plain := httptest.NewServer(http.HandlerFunc(echo))
	defer plain.Close()
	var last atomic.Pointer[http.Request]
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		last.Store(r.Clone(context.Background()))
		switch r.URL.Path {
		case "/v1/echo/bearer":
			http.Redirect(w, r, other.URL+"/stolen", http.StatusTemporaryRedirect)
		case "/v1/echo/basic":
			http.Redirect(w, r, plain.URL+"/v1/echo/basic", http.StatusFound) // https to http
		case "/v1/echo/cookie":
			http.Redirect(w, r, "/v1/echo/cookie", http.StatusFound) // forever
		case "/v1/echo/header":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"error":"bad key ` + r.Header.Get("X-API-Key") + `"}`))
		default:
			echo(w, r)
		}
	}))
	defer tlsSrv.Close()
	reg, _ := securedTools(t, openapi.Source{Servers: []string{tlsSrv.URL + "/v1"}, Transport: tlsSrv.Client().Transport})
	query, _ := reg.Lookup("secured.echoQuery")
	vars := quiver.Vars{"SECURED_BEARER": bearerToken, "SECURED_BASIC": basicPair, "SECURED_HEADER_KEY": headerKey,
		"SECURED_QUERY_KEY": queryKey, "SECURED_COOKIE_KEY": cookieKey}
	d := &quiver.Dispatcher{Registry: reg, Resolver: vars}
	tests := []struct {
		name, tool, args string
		ok               bool
		want             string                       // in the result's error or value
		sent             func(r *http.Request) string // "" when what reached the service is right
	}{
		{"a redirect to a host that is not the source's", "secured.echoBearer", `{}`, false, "redirected to another host", nil},
		{"a redirect from https to http", "secured.echoBasic", `{}`, false, "redirected from https to http: refused", nil},
		{"redirects without end", "secured.echoCookie", `{}`, false, "more than 3 redirects", nil},
		{"a path argument of ..", "secured.echoOpen", `{"path_item":".."}`, false, `holds the dot segment ".."`, nil},
		{"label items making ..", "secured.labels", `{"ids":["",""]}`, false, `holds the dot segment ".."`, nil},
		{"a path argument of reserved characters", "secured.echoOpen", `{"path_item":"a=b&c;d,e"}`, true, "", func(r *http.Request) string {
			if r.URL.EscapedPath() != "/v1/echo/open/a%3Db%26c%3Bd%2Ce" {
				return r.URL.EscapedPath()
			}
			return ""
		}},
		{"a path argument climbing out", "secured.echoOpen", `{"path_item":"../../admin"}`, false, `holds the dot segment ".."`, nil},
		{"a path argument climbing out with backslashes", "secured.echoOpen", `{"path_item":"x\\..\\admin"}`, false, `holds the dot segment ".."`, nil},
		{"a path argument with a slash stays one segment", "secured.echoOpen", `{"path_item":"a/b"}`, true, "", func(r *http.Request) string {
			if r.URL.EscapedPath() != "/v1/echo/open/a%2Fb" {
				return r.URL.EscapedPath()
			}
			return ""
		}},
		{"an exploded object naming the key's query parameter", "secured.echoQuery", `{"opts":{"api_key":"mine"}}`, false, `the key "api_key" is another query parameter's or a credential's`, nil},
		{"an exploded object naming another parameter", "secured.echoQuery", `{"opts":{"Q":"x"}}`, false, `the key "Q" is another query parameter's`, nil},
		{"an exploded object of its own keys", "secured.echoQuery", `{"opts":{"color":"red"}}`, true, "", func(r *http.Request) string {
			if r.URL.Query().Get("color") != "red" || r.URL.Query().Get("api_key") != queryKey {
				return r.URL.RawQuery
			}
			return ""
		}},
		{"a path argument with a query and a fragment", "secured.echoOpen", `{"path_item":"x?admin=1#y"}`, true, "", func(r *http.Request) string {
			if r.URL.EscapedPath() != "/v1/echo/open/x%3Fadmin%3D1%23y" || r.URL.Query().Has("admin") {
				return r.URL.String()
			}
			return ""
		}},
		{"a path argument naming another host", "secured.echoOpen", `{"path_item":"http://127.0.0.1:1/x"}`, true, "", func(r *http.Request) string {
			if r.URL.EscapedPath() != "/v1/echo/open/http%3A%2F%2F127.0.0.1%3A1%2Fx" {
				return r.URL.EscapedPath()
			}
			return ""
		}},
		{"a query argument carrying another parameter", "secured.echoQuery", `{"q":"x&api_key=mine"}`, true, "", func(r *http.Request) string {
			if r.URL.Query().Get("q") != "x&api_key=mine" || r.URL.Query().Get("api_key") != queryKey {
				return r.URL.RawQuery
			}
			return ""
		}},
		{"the API key's query parameter as an argument", "secured.echoQuery", `{"api_key":"mine"}`, false, `unknown property "api_key"`, nil},
		{"the Host header as an argument", "secured.echoQuery", `{"Host":"evil.example"}`, false, `unknown property "Host"`, nil},
		{"the Authorization header as an argument", "secured.echoQuery", `{"Authorization":"Bearer mine"}`, false, `unknown property "Authorization"`, nil},
		{"the key's header as an argument", "secured.echoHeader", `{"X-API-Key":"mine"}`, false, `unknown property "X-API-Key"`, nil},
		{"a header argument splitting the request", "secured.echoHeader", `{"X-Trace":"a\r\nX-Admin: 1"}`, false, "invalid header", nil},
		{"an error answer echoing the key", "secured.echoHeader", `{}`, false, "401 Unauthorized", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			last.Store(nil)
			res, err := d.Dispatch(context.Background(), quiver.Call{ID: "c", Name: tc.tool, Args: json.RawMessage(tc.args)})
			if err != nil {
				t.Fatal(err)
			}
			got := res.Error + string(res.Value)
			if res.IsError() == tc.ok || !strings.Contains(got, tc.want) {
				t.Fatalf("result %+v, want ok=%v and %q", res, tc.ok, tc.want)
			}
			for _, secret := range []string{bearerToken, headerKey, queryKey, cookieKey, basicPair} {
				if strings.Contains(got, secret) {
					t.Errorf("the secret %s is in the result: %s", secret, got)
				}
			}
			if tc.sent != nil {
				r := last.Load()
				if r == nil {
					t.Fatal("nothing reached the service")
				}
				if msg := tc.sent(r); msg != "" {
					t.Errorf("the service received %s", msg)
				}
			}
		})
	}
	if n := elsewhere.Load(); n != 0 {
		t.Errorf("a host that is not the source's received %d requests", n)
	}
	if props := query.Spec().InputSchema.Properties; len(props) != 2 || props["q"] == nil || props["opts"] == nil {
		t.Errorf("echoQuery offers %v; only q and opts are the model's", mustJSON(query.Spec().InputSchema))
	}
}

// TestAttacksOnTheDocument: a document cannot make Quiver read other files or URLs, and a
// request that fails says so without the URL, whose query may hold a key.
func TestAttacksOnTheDocument(t *testing.T) {
	var fetched atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetched.Add(1)
		w.Write([]byte(`{"type":"string"}`))
	}))
	defer srv.Close()
	doc := `{"openapi":"3.0.3","info":{"title":"t","version":"1"},"servers":[{"url":"http://h"}],"paths":{"/a":{"get":{"responses":{"200":{"description":"ok","content":{"application/json":{"schema":{"$ref":"` + srv.URL + `/s.json"}}}}}}}}}`
	if _, err := openapi.Tools(context.Background(), openapi.Source{Name: "x", Document: []byte(doc)}); err == nil {
		t.Error("a document referring to a URL was read")
	}
	file := `{"openapi":"3.0.3","info":{"title":"t","version":"1"},"servers":[{"url":"http://h"}],"paths":{"/a":{"get":{"responses":{"200":{"description":"ok","content":{"application/json":{"schema":{"$ref":"/etc/passwd"}}}}}}}}}`
	if _, err := openapi.Tools(context.Background(), openapi.Source{Name: "x", Document: []byte(file)}); err == nil {
		t.Error("a document referring to a file was read")
	}
	if n := fetched.Load(); n != 0 {
		t.Errorf("reading the document fetched %d URLs", n)
	}
	if _, err := openapi.Tools(context.Background(), openapi.Source{Name: "x", Document: make([]byte, openapi.MaxDocumentBytes+1)}); err == nil ||
		!strings.Contains(err.Error(), "larger than") {
		t.Errorf("an oversized document: %v", err)
	}
	// A service that is down: the error names the operation, not the URL with the key.
	down := httptest.NewServer(http.NotFoundHandler())
	url := down.URL
	down.Close()
	reg, _ := securedTools(t, openapi.Source{Servers: []string{url + "/v1"}})
	d := &quiver.Dispatcher{Registry: reg, Resolver: quiver.Vars{"SECURED_QUERY_KEY": queryKey}}
	res, err := d.Dispatch(context.Background(), quiver.Call{ID: "c", Name: "secured.echoQuery", Args: json.RawMessage(`{}`)})
	if err != nil || !res.IsError() || !strings.Contains(res.Error, "GET /echo/query") || strings.Contains(res.Error, "api_key") {
		t.Errorf("down service: %+v %v", res, err)
	}
}

// TestPublicOnly: a source a workspace imports reaches no internal address, whether named by
// address or by a name that resolves to one, unless the operator allows the host; a refusal
// names the host as written and never what the server's resolver made of it (the addresses a
// name resolved to, the resolver asked), and a name that resolves to an internal address reads
// as one that does not resolve.
func TestPublicOnly(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(echo))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	_, port, _ := strings.Cut(host, ":")
	refused := func(hostport string) string {
		return "the server " + hostport + " is not allowed: it is not a public address, or its name does not resolve " +
			"(an operator may allow the host with quiver serve --openapi-internal-hosts)"
	}
	tests := []struct {
		name     string
		server   string // host:port
		internal []string
		want     string // "" for a call that goes through
	}{
		{"loopback by address", host, nil, refused(host)},
		{"loopback by name", "localhost:" + port, nil, refused("localhost:" + port)},
		{"an unspecified address", "0.0.0.0:" + port, nil, refused("0.0.0.0:" + port)},
		{"a name that does not resolve", "nonexistent.invalid:" + port, nil, refused("nonexistent.invalid:" + port)},
		{"allowed by host and port", host, []string{host}, ""},
		{"allowed by host", host, []string{"127.0.0.1"}, ""},
		{"another port of an allowed host", host, []string{"127.0.0.1:1"}, refused(host)},
		{"an allowed host with nothing listening", "localhost:1", []string{"localhost"}, "connecting to the server localhost:1: connect: connection refused"},
	}
	address := regexp.MustCompile(`\d+\.\d+\.\d+\.\d+|::1|\[|lookup| on `)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reg, _ := securedTools(t, openapi.Source{Servers: []string{"http://" + tc.server + "/v1"}, PublicOnly: true, Internal: tc.internal})
			d := &quiver.Dispatcher{Registry: reg}
			res, err := d.Dispatch(context.Background(), quiver.Call{ID: "c", Name: "secured.echoOpen", Args: json.RawMessage(`{"path_item":"x"}`)})
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == "" && res.IsError() || tc.want != "" && res.Error != "POST /echo/open/{item}: "+tc.want {
				t.Fatalf("result %+v, want %q", res, tc.want)
			}
			if leak := address.FindString(strings.ReplaceAll(res.Error, tc.server, "")); leak != "" {
				t.Errorf("the error says %q, which the document did not: %s", leak, res.Error)
			}
		})
	}
}

// TestLargeDocuments: a document whose large component many operations refer to costs its
// conversion once, and the tools' schemas in all are capped: what would take gigabytes is
// refused (or left out) with the reason.
func TestLargeDocuments(t *testing.T) {
	doc := func(props, ops int) []byte {
		var b strings.Builder
		b.WriteString(`{"openapi":"3.0.3","info":{"title":"big","version":"1"},"servers":[{"url":"https://big.example"}],"paths":{`)
		for i := range ops {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `"/op%d":{"post":{"operationId":"op%d","requestBody":{"required":true,"content":{"application/json":{"schema":{"$ref":"#/components/schemas/Big"}}}},"responses":{"200":{"description":"ok"}}}}`, i, i)
		}
		b.WriteString(`},"components":{"schemas":{"Big":{"type":"object","properties":{`)
		for i := range props {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `"p%d":{"type":"string","description":"property number %d"}`, i, i)
		}
		b.WriteString(`}}}}}`)
		return []byte(b.String())
	}
	tests := []struct {
		name       string
		props, ops int
		err        string // "" when the import succeeds
		skipped    int
	}{
		{"many operations over a large component", 1000, 400, "larger than 4194304 bytes in all", 0},
		{"a component over a tool's cap", 12000, 10, "", 10},
		{"more operations than a source may have", 1, 1001, "the document has more than 1000 operations, the most a source imports unless its cap is raised", 0},
		{"a large component, a few operations", 1000, 5, "", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			im, err := openapi.Tools(context.Background(), openapi.Source{Name: "big", Document: doc(tc.props, tc.ops)})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(im.Skipped) != tc.skipped || len(im.Tools) != tc.ops-tc.skipped {
				t.Fatalf("%d tools, %d skipped: %v", len(im.Tools), len(im.Skipped), im.Skipped[:min(1, len(im.Skipped))])
			}
			if tc.skipped > 0 && !strings.Contains(im.Skipped[0].Reason, "over the 524288 a tool may have") {
				t.Errorf("reason: %s", im.Skipped[0].Reason)
			}
		})
	}
}

// TestComponentEdges: a component that fails takes down, with its reason, the tools of every
// component converted inside it; two names that make the same $defs key stay apart; tools
// refused for their size still count towards the source's cap.
func TestComponentEdges(t *testing.T) {
	ctx := context.Background()
	doc := `{"openapi":"3.0.3","info":{"title":"t","version":"1"},"servers":[{"url":"https://e.example"}],"paths":{
		"/one":{"get":{"operationId":"one","responses":{"200":{"description":"ok","content":{"application/json":{"schema":{"$ref":"#/components/schemas/A"}}}}}}},
		"/two":{"get":{"operationId":"two","responses":{"200":{"description":"ok","content":{"application/json":{"schema":{"$ref":"#/components/schemas/C"}}}}}}},
		"/x":{"get":{"operationId":"x","parameters":[{"name":"a","in":"query","schema":{"$ref":"#/components/schemas/Foo Bar"}},
			{"name":"b","in":"query","schema":{"$ref":"#/components/schemas/Foo_Bar"}}],"responses":{"204":{"description":"ok"}}}}},
		"components":{"schemas":{
		"A":{"allOf":[{"$ref":"#/components/schemas/C"},{"$ref":"#/components/schemas/B/properties/y"}]},
		"B":{"type":"object","properties":{"y":{"type":"string"}}},
		"C":{"type":"object","properties":{"a":{"$ref":"#/components/schemas/A"}}},
		"Foo Bar":{"type":"string"},"Foo_Bar":{"type":"integer"}}}}`
	im, err := openapi.Tools(ctx, openapi.Source{Name: "e", Document: []byte(doc)})
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Skipped) != 2 {
		t.Fatalf("skipped %v", im.Skipped)
	}
	for _, s := range im.Skipped {
		if !strings.Contains(s.Reason, "only references to #/components/schemas/NAME are followed") {
			t.Errorf("%s: %s", s.Operation, s.Reason)
		}
	}
	if len(im.Tools) != 1 {
		t.Fatalf("tools %d", len(im.Tools))
	}
	in := mustJSON(im.Tools[0].Spec().InputSchema)
	if !strings.Contains(in, `"Foo_Bar":{"type":"string"}`) || !strings.Contains(in, `"Foo_Bar_2":{"type":"integer"}`) {
		t.Errorf("two names of one key: %s", in)
	}

	// Operations each over a tool's cap only together (input and output), refused one by one
	// but counted: the source stops at its cap rather than encoding all of them.
	var b strings.Builder
	b.WriteString(`{"openapi":"3.0.3","info":{"title":"big","version":"1"},"servers":[{"url":"https://big.example"}],"paths":{`)
	for i := range 300 {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"/op%d":{"get":{"operationId":"op%d","parameters":[{"name":"q","in":"query","schema":{"$ref":"#/components/schemas/Big"}}],`+
			`"responses":{"200":{"description":"ok","content":{"application/json":{"schema":{"$ref":"#/components/schemas/Big"}}}}}}}`, i, i)
	}
	b.WriteString(`},"components":{"schemas":{"Big":{"type":"object","properties":{`)
	for i := range 6000 {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"p%d":{"type":"string","description":"property %d"}`, i, i)
	}
	b.WriteString(`}}}}}`)
	if _, err := openapi.Tools(ctx, openapi.Source{Name: "big", Document: []byte(b.String())}); err == nil ||
		!strings.Contains(err.Error(), "bytes in all") {
		t.Fatalf("operations over the cap together: %v", err)
	}
}
