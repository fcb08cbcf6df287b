package openapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/openapi"
)

// echo answers what it received, credentials included: a service that leaks them back.
func echo(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	headers := map[string]string{}
	for _, h := range []string{"Authorization", "X-Api-Key", "X-Trace", "Cookie", "Content-Type"} {
		if v := r.Header.Get(h); v != "" {
			headers[h] = v
		}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"headers": headers, "query": r.URL.RawQuery, "path": r.URL.EscapedPath(), "body": string(body)})
}

const (
	bearerToken = "tok-0123456789abcdef"
	headerKey   = "hk-0123456789abcdef"
	queryKey    = "qk-0123456789abcdef"
	cookieKey   = "ck-0123456789abcdef"
	basicPair   = "alice:pw-0123456789"
)

func securedTools(t *testing.T, src openapi.Source) (*quiver.Registry, *openapi.Import) {
	t.Helper()
	src.Name = "secured"
	src.Document = readDoc(t, "secured.yaml")
	im, err := openapi.Tools(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	reg := &quiver.Registry{}
	if err := reg.Register(im.Tools...); err != nil {
		t.Fatal(err)
	}
	return reg, im
}

func TestCredentialsFromVariables(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(echo))
	defer srv.Close()
	reg, im := securedTools(t, openapi.Source{Servers: []string{srv.URL + "/v1"}, Credentials: map[string]string{"header_key": "SERVICE_KEY"}})
	skipped := map[string]string{}
	for _, s := range im.Skipped {
		skipped[s.Operation] = s.Reason
	}
	if len(skipped) != 2 || !strings.Contains(skipped["GET /mtls"], "bearer, basic and API key") ||
		!strings.Contains(skipped["POST /upload"], "multipart/form-data") {
		t.Errorf("skipped: %v", im.Skipped)
	}
	header, _ := reg.Lookup("secured.echoHeader")
	if props := header.Spec().InputSchema.Properties; props["X-API-Key"] != nil || props["X-Trace"] == nil {
		t.Errorf("echoHeader offers %v: the key's header must not be an argument", mustJSON(header.Spec().InputSchema))
	}
	if vars := header.Spec().Variables; len(vars) != 1 || vars[0].Name != "SERVICE_KEY" || vars[0].Type != quiver.VarSecret || !vars[0].Required {
		t.Errorf("echoHeader variables: %+v", vars)
	}
	query, _ := reg.Lookup("secured.echoQuery")
	if vars := query.Spec().Variables; len(vars) != 1 || vars[0].Name != "SECURED_QUERY_KEY" || vars[0].Required {
		t.Errorf("echoQuery (its key is optional) variables: %+v", vars)
	}
	all := quiver.Vars{"SECURED_BEARER": bearerToken, "SECURED_BASIC": basicPair, "SERVICE_KEY": headerKey,
		"SECURED_QUERY_KEY": queryKey, "SECURED_COOKIE_KEY": cookieKey}
	tests := []struct {
		tool, args string
		vars       quiver.Vars
		sent       string // what the service must have received, in the echo before masking
		code       quiver.Code
	}{
		{"secured.echoBearer", `{}`, all, `"Authorization":"Bearer ` + bearerToken, ""},
		{"secured.echoBasic", `{}`, all, `"Authorization":"Basic YWxpY2U6cHctMDEyMzQ1Njc4OQ=="`, ""},
		{"secured.echoHeader", `{"X-Trace":"t1"}`, all, `"X-Api-Key":"` + headerKey, ""},
		{"secured.echoQuery", `{}`, all, `api_key=` + queryKey, ""},
		{"secured.echoQuery", `{}`, quiver.Vars{}, `"query":""`, ""}, // {} is an alternative: no key needed
		{"secured.echoCookie", `{}`, all, `"Cookie":"session=` + cookieKey, ""},
		{"secured.echoBearer", `{}`, quiver.Vars{}, "SECURED_BEARER", quiver.CodeMissingVariable},
	}
	for _, tc := range tests {
		t.Run(tc.tool, func(t *testing.T) {
			d := &quiver.Dispatcher{Registry: reg, Resolver: tc.vars}
			res, err := d.Dispatch(context.Background(), quiver.Call{ID: "c", Name: tc.tool, Args: json.RawMessage(tc.args)})
			if err != nil {
				t.Fatal(err)
			}
			if tc.code != "" {
				if res.Code != tc.code || !strings.Contains(res.Error, tc.sent) {
					t.Fatalf("result %+v, want %s naming %s", res, tc.code, tc.sent)
				}
				return
			}
			if res.IsError() {
				t.Fatalf("result %+v", res)
			}
			sent := string(res.Value)
			for _, secret := range []string{bearerToken, headerKey, queryKey, cookieKey, basicPair, "YWxpY2U6cHctMDEyMzQ1Njc4OQ=="} {
				if strings.Contains(sent, secret) {
					t.Errorf("the secret %s came back unmasked: %s", secret, sent)
				}
			}
			// The echo is masked (TestCredentialsReachTheService checks what the service
			// received): it still shows where the credential was.
			place := tc.sent[:strings.IndexAny(tc.sent, "=:")+1]
			if tc.sent != `"query":""` && !strings.Contains(sent, place) {
				t.Errorf("echo %s does not show %s", sent, place)
			}
		})
	}
}

func TestCredentialsReachTheService(t *testing.T) {
	got := make(chan *http.Request, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm() // the body is gone once the handler returns
		got <- r.Clone(context.Background())
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte("{}"))
	}))
	defer srv.Close()
	reg, _ := securedTools(t, openapi.Source{Servers: []string{srv.URL + "/v1"}})
	d := &quiver.Dispatcher{Registry: reg, Resolver: quiver.Vars{"SECURED_BEARER": bearerToken, "SECURED_HEADER_KEY": headerKey,
		"SECURED_QUERY_KEY": queryKey, "SECURED_BASIC": basicPair}}
	tests := []struct {
		tool, args string
		check      func(r *http.Request) bool
	}{
		{"secured.echoBearer", `{}`, func(r *http.Request) bool { return r.Header.Get("Authorization") == "Bearer "+bearerToken }},
		{"secured.echoBasic", `{}`, func(r *http.Request) bool { u, p, ok := r.BasicAuth(); return ok && u+":"+p == basicPair }},
		{"secured.echoHeader", `{}`, func(r *http.Request) bool { return r.Header.Get("X-API-Key") == headerKey }},
		{"secured.echoQuery", `{}`, func(r *http.Request) bool { return r.URL.Query().Get("api_key") == queryKey }},
		{"secured.styles", `{"s":[3,4,5],"l":[3,4,5],"m":{"role":"admin","firstName":"Alex"}}`, func(r *http.Request) bool {
			return r.URL.EscapedPath() == "/v1/styles/3,4,5/.3.4.5/;firstName=Alex;role=admin"
		}},
		{"secured.echoOpen", `{"path_item":"a/b c","query_item":"q","filter":{"k":"v"},"ids":[1,2],"body":{"note":"hi","count":2}}`,
			func(r *http.Request) bool {
				return r.URL.EscapedPath() == "/v1/echo/open/a%2Fb%20c" && r.URL.Query().Get("item") == "q" &&
					r.URL.Query().Get("filter[k]") == "v" && r.URL.Query().Get("ids") == "1|2" &&
					r.Header.Get("Authorization") == "" && r.PostForm.Get("note") == "hi" && r.PostForm.Get("count") == "2"
			}},
	}
	for _, tc := range tests {
		res, err := d.Dispatch(context.Background(), quiver.Call{ID: "c", Name: tc.tool, Args: json.RawMessage(tc.args)})
		if err != nil || res.IsError() {
			t.Fatalf("%s: %+v %v", tc.tool, res, err)
		}
		if r := <-got; !tc.check(r) {
			t.Errorf("%s: the service received %s %s %v", tc.tool, r.Method, r.URL, r.Header)
		}
	}
}

func TestSchemasConverted(t *testing.T) {
	reg, _ := securedTools(t, openapi.Source{})
	open, _ := reg.Lookup("secured.echoOpen")
	in := mustJSON(open.Spec().InputSchema)
	for _, want := range []string{`"path_item":{"type":"string"}`, `"query_item":{"type":"string"}`, `"exclusiveMinimum":0`,
		`"required":["path_item"]`} {
		if !strings.Contains(in, want) {
			t.Errorf("echoOpen input %s lacks %s", in, want)
		}
	}
	tree, _ := reg.Lookup("secured.putTree")
	spec := tree.Spec()
	if got := mustJSON(spec.InputSchema); !strings.Contains(got, `"items":{"$ref":"#/$defs/Node"}`) {
		t.Errorf("putTree input (recursive): %s", got)
	}
	if spec.OutputSchema != nil {
		t.Errorf("putTree (a PUT) declares an output schema: %s", mustJSON(spec.OutputSchema))
	}
	bearer, _ := reg.Lookup("secured.echoBearer")
	if got := mustJSON(bearer.Spec().OutputSchema); strings.Contains(got, "secret") {
		t.Errorf("a writeOnly property is in the output: %s", got)
	}
}

func TestBounds(t *testing.T) {
	other := httptest.NewServer(http.HandlerFunc(echo))
	defer other.Close()
	var srvURL string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/echo/bearer": // away, to a host that is not the source's
			http.Redirect(w, r, other.URL+"/v1/echo/basic", http.StatusFound)
		case "/v1/echo/basic": // within the source
			http.Redirect(w, r, srvURL+"/v1/echo/cookie", http.StatusFound)
		case "/v1/echo/header": // larger than the cap
			w.Write([]byte(`"` + strings.Repeat("x", 300) + `"`))
		case "/v1/echo/query": // slower than the timeout
			select {
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
		default:
			echo(w, r)
		}
	}))
	defer srv.Close()
	srvURL = srv.URL
	reg, _ := securedTools(t, openapi.Source{Servers: []string{srv.URL + "/v1"}, MaxResponseBytes: 200, Timeout: 200 * time.Millisecond})
	d := &quiver.Dispatcher{Registry: reg, Resolver: quiver.Vars{"SECURED_BEARER": bearerToken, "SECURED_BASIC": basicPair,
		"SECURED_HEADER_KEY": headerKey, "SECURED_QUERY_KEY": queryKey, "SECURED_COOKIE_KEY": cookieKey}}
	tests := []struct {
		tool, args, want string
		ok               bool
	}{
		{"secured.echoBearer", `{}`, "redirected to another host", false},
		{"secured.echoBasic", `{}`, `"path":"/v1/echo/cookie"`, true},
		{"secured.echoHeader", `{}`, "larger than 200 bytes", false},
		{"secured.echoQuery", `{}`, "timed out after 200ms", false},
		{"secured.echoOpen", `{"path_item":".."}`, `holds the dot segment ".."`, false},
	}
	for _, tc := range tests {
		res, err := d.Dispatch(context.Background(), quiver.Call{ID: "c", Name: tc.tool, Args: json.RawMessage(tc.args)})
		if err != nil {
			t.Fatal(err)
		}
		got := res.Error + string(res.Value)
		if res.IsError() == tc.ok || !strings.Contains(got, tc.want) {
			t.Errorf("%s: %+v, want %s", tc.tool, res, tc.want)
		}
		if strings.Contains(got, queryKey) || strings.Contains(got, srv.URL+"/v1/echo/query?") {
			t.Errorf("%s: the error names the URL with its key: %s", tc.tool, got)
		}
	}
}

func TestRefused(t *testing.T) {
	petstore := readDoc(t, "petstore-expanded.yaml")
	tests := []struct {
		name string
		src  openapi.Source
		want string
	}{
		{"no name", openapi.Source{Document: petstore}, "source name"},
		{"a name with a dot", openapi.Source{Name: "pet.store", Document: petstore}, "source name"},
		{"empty", openapi.Source{Name: "x"}, "empty"},
		{"not a document", openapi.Source{Name: "x", Document: []byte("hello: [")}, "not a readable OpenAPI document"},
		{"Swagger 2.0", openapi.Source{Name: "x", Document: []byte(`{"swagger":"2.0","info":{"title":"t","version":"1"},"paths":{}}`)}, "only OpenAPI 3.0 and 3.1"},
		{"a reference to another file", openapi.Source{Name: "x", Document: []byte(`{"openapi":"3.0.3","info":{"title":"t","version":"1"},"servers":[{"url":"http://h"}],
			"paths":{"/a":{"get":{"responses":{"200":{"description":"ok","content":{"application/json":{"schema":{"$ref":"other.yaml#/X"}}}}}}}}}`)}, "not a readable OpenAPI document"},
		{"no server", openapi.Source{Name: "x", Document: []byte(`{"openapi":"3.0.3","info":{"title":"t","version":"1"},
			"paths":{"/a":{"get":{"responses":{"200":{"description":"ok"}}}}}}`)}, "names no server"},
		{"a server that is not http", openapi.Source{Name: "x", Document: petstore, Servers: []string{"file:///etc"}}, "absolute http or https URL"},
		{"a server with credentials", openapi.Source{Name: "x", Document: petstore, Servers: []string{"http://u:p@h/"}}, "credentials in the URL"},
		{"a selector matching nothing", openapi.Source{Name: "x", Document: petstore, Operations: []string{"addPet", "tag:nope"}}, `no operation matches "tag:nope"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := openapi.Tools(context.Background(), tc.src)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

func TestSelection(t *testing.T) {
	_, im := securedTools(t, openapi.Source{Operations: []string{"tag:echo", "PUT /tree", "echoBearer"}})
	var names []string
	for _, tool := range im.Tools {
		names = append(names, tool.Name())
	}
	slices.Sort(names)
	want := []string{"secured.echoBasic", "secured.echoBearer", "secured.echoCookie", "secured.echoHeader", "secured.echoQuery", "secured.putTree"}
	if !slices.Equal(names, want) {
		t.Fatalf("selected %v, want %v", names, want)
	}
}
