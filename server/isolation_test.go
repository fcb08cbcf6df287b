package server_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/internal/apicontract"
	"github.com/quiverhq/quiver/internal/ids"
	"github.com/quiverhq/quiver/jobs"
	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/model/scripted"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/server"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/postgres"
	"github.com/quiverhq/quiver/store/postgres/pgtest"
	"github.com/quiverhq/quiver/store/secret"
	"github.com/quiverhq/quiver/store/sqlite"
	"github.com/quiverhq/quiver/store/vars"
)

// The isolation suite (issue 13): no data crosses workspaces. Two workspaces, A and B, share a
// server; B has one of everything that has an id. With A's admin key, every operation of the
// OpenAPI document is tried with B's ids (in its path, its query and its body) and every
// answer is checked: 404 where the operation addresses a record of B, and the very answer an
// id that never existed gets; no answer holds anything of B that the request did not send;
// nothing is a 5xx. B's state, read from the store before and after the sweep, is the same
// byte for byte. MCP is tried too: A's session sees none of B's tools, and B's session does
// not answer A's key.
//
// The suite cannot miss an endpoint silently: it fails when the document has an operation
// the table (isoTable) does not cover, when the table names one the document no longer has,
// and when an operation takes an id-like field (…_id, cursor, name, path, tags, email) that no
// case of its row fills with a value of B's.

// isoStore is what the suite needs of a store; both backends provide it.
type isoStore = store.Backend

// isoBackend is a fresh store and how to start background runs on its database.
type isoBackend struct {
	st        isoStore
	startJobs func(t *testing.T, cfg jobs.Config) *jobs.Jobs
	// journal is where calls are recorded before they reach the store, as quiver serve does on
	// SQLite; "" records them in the store directly.
	journal string
}

// openJournal puts the backend's journal, when it has one, in front of p's store.
func (be isoBackend) openJournal(ctx context.Context, p *platform.Platform) error {
	if be.journal == "" {
		return nil
	}
	return p.OpenJournal(ctx, be.journal)
}

// isoEach runs fn on SQLite and on PostgreSQL (skipped without QUIVER_TEST_POSTGRES, failed
// under CI=true without it).
func isoEach(t *testing.T, fn func(t *testing.T, be isoBackend)) {
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "q.db")
		st, err := sqlite.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		fn(t, isoBackend{st: st, journal: path + ".journal", startJobs: func(t *testing.T, cfg jobs.Config) *jobs.Jobs {
			j, err := jobs.StartSQLite(context.Background(), path, cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = j.Stop(context.Background()) })
			return j
		}})
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := pgtest.DSN(t)
		schemaName := pgtest.Schema(t, dsn)
		st, err := postgres.Open(context.Background(), dsn, postgres.WithSchema(schemaName))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		fn(t, isoBackend{st: st, startJobs: func(t *testing.T, cfg jobs.Config) *jobs.Jobs {
			pc, err := pgxpool.ParseConfig(dsn)
			if err != nil {
				t.Fatal(err)
			}
			pc.ConnConfig.RuntimeParams["search_path"] = schemaName
			pool, err := pgxpool.NewWithConfig(context.Background(), pc)
			if err != nil {
				t.Fatal(err)
			}
			j, err := jobs.StartPostgres(context.Background(), pool, cfg)
			if err != nil {
				pool.Close()
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = j.Stop(context.Background()); pool.Close() })
			return j
		}})
	})
}

// ---- the table

// isoWant is what an answer to A must be.
type isoWant int

const (
	// isoNotFound: 404 not_found, and the same answer as for ids that never existed.
	isoNotFound isoWant = iota
	// isoRefused: a 4xx, and the same answer as for ids that never existed (a reference in a
	// body to a record the workspace does not have, which some endpoints answer with 400).
	isoRefused
	// isoListed: 2xx; a listing of A's own records.
	isoListed
	// isoListedOrRefused: 2xx or 4xx (a cursor of B's may be refused or ignored).
	isoListedOrRefused
	// isoUnknownTool: 200 with an error result whose code is unknown_tool, as for a name no
	// tool has.
	isoUnknownTool
	// isoCreated: 2xx; a record of A's own, made with B's names (names are per workspace).
	// These run last: they give A records named like B's.
	isoCreated
)

// isoCase is one request of an operation. Placeholders {kind} in query and body are replaced by
// the world's values (isoWorld.vals): B's, or A's own for kinds starting with a_.
type isoCase struct {
	// params maps each path parameter to the kind of value it is given.
	params map[string]string
	query  string
	body   string
	want   isoWant
	// allow names kinds of B's values the answer may hold although the request did not send
	// them; see the one case that uses it.
	allow []string
}

// isoTable maps every operation of the API ("METHOD /v1/path", as the OpenAPI document names
// it) to the requests A's admin sends with B's values. Each case is also sent again with every
// other value of B's, ids of other kinds and ids with another prefix or none included, in each
// path parameter (the first case of the operation) and in each id-like field (the first case
// that sends one of B's values in it): see isoWorld.variants.
func isoTable() map[string][]isoCase {
	p := func(kv ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	each := func(param string, kinds []string, query, body string, want isoWant) []isoCase {
		var out []isoCase
		for _, k := range kinds {
			out = append(out, isoCase{params: p(param, k), query: query, body: body, want: want})
		}
		return out
	}
	threads := []string{"thread", "run_thread", "confirm_thread", "mcp_thread"}
	tools := []string{"tool", "client_tool", "confirm_tool", "deleted_tool"}
	users := []string{"user", "admin_user"}
	keys := []string{"key", "admin_key", "sam_key"}
	const serverTool = `"target":"server","input_schema":{"type":"object","description":"A's tool.","properties":{"x":{"type":"integer"}}}`
	cat := func(lists ...[]isoCase) []isoCase { return slices.Concat(lists...) }

	return map[string][]isoCase{
		// Tools the workspace is served, and calls.
		"GET /v1/tools/served": {{want: isoListed}},
		"POST /v1/tools/{name}/call": cat(
			each("name", []string{"tool_name", "client_tool_name", "confirm_tool_name", "deleted_tool_name", "openapi_tool_name"}, "", `{"args":{"x":1}}`, isoUnknownTool),
			[]isoCase{
				{params: p("name", "a_echo"), body: `{"args":{"text":"from A"},"thread_id":"{thread}"}`, want: isoNotFound},
				{params: p("name", "a_echo"), body: `{"args":{"text":"from A"},"thread_id":"{run_thread}"}`, want: isoNotFound},
				{params: p("name", "a_echo"), body: `{"args":{"text":"from A"},"thread_id":"{mcp_thread}"}`, want: isoNotFound},
				{params: p("name", "tool_name"), body: `{"args":{"x":1},"thread_id":"{thread}"}`, want: isoNotFound},
			}),

		// Threads, their messages, events and runs.
		"GET /v1/threads": {
			{query: "limit=100", want: isoListed},
			{query: "tag={tag}", want: isoListed},
			{query: "agent=iso_client", want: isoListed},
			{query: "agent=iso_confirm&status=idle&tag={tag}", want: isoListed},
			{query: "name={thread_name}", want: isoListed},
			{query: "limit=1&cursor={threads_cursor}", want: isoListedOrRefused},
			{query: "limit=1&tag={tag}&cursor={tag_cursor}", want: isoListedOrRefused},
		},
		"GET /v1/threads/{id}/files": cat(
			each("id", threads, "", "", isoNotFound),
			[]isoCase{
				{params: p("id", "thread"), query: "path={file_path}", want: isoNotFound},
				{params: p("id", "thread"), query: "path=/attachments&limit=1", want: isoNotFound},
				{params: p("id", "a_thread"), query: "path={file_path}", want: isoNotFound},
			}),
		"GET /v1/threads/{id}/files/{path}": {
			{params: p("id", "thread", "path", "file_rel"), want: isoNotFound},
			{params: p("id", "thread", "path", "attachment_rel"), want: isoNotFound},
			{params: p("id", "a_thread", "path", "file_rel"), want: isoNotFound},
		},
		"GET /v1/threads/{id}/variables": each("id", threads, "", "", isoNotFound),
		"PUT /v1/threads/{id}/variables/{name}": {
			{params: p("id", "thread", "name", "secret_var"), body: `{"value":"from A","secret":true}`, want: isoNotFound},
			{params: p("id", "thread", "name", "plain_var"), body: `{"value":"from A"}`, want: isoNotFound},
			{params: p("id", "run_thread", "name", "plain_var"), body: `{"value":"from A","scoped":true}`, want: isoNotFound},
			{params: p("id", "a_thread", "name", "secret_var"), body: `{"value":"A's own","secret":true}`, want: isoCreated},
		},
		// A deferred sub-agent's variables request: B's thread as the parent, or as the
		// request under A's own thread, is not found.
		"GET /v1/threads/{id}/children": each("id", threads, "", "", isoNotFound),
		"GET /v1/threads/{id}/trace":    each("id", threads, "", "", isoNotFound),
		// The inbox lists A's waiting calls only (B has two paused runs), and the session is A's.
		"GET /v1/pending": {{query: "limit=100", want: isoListed}, {query: "limit=1&cursor={threads_cursor}", want: isoListedOrRefused}},
		"GET /v1/session": {{want: isoListed}},
		// A served tool and checking arguments against it: B's tools are not A's.
		"GET /v1/tools/served/{name}": cat(
			each("name", []string{"tool_name", "client_tool_name", "confirm_tool_name"}, "", "", isoNotFound),
			[]isoCase{{params: p("name", "a_echo"), want: isoListed}}),
		"POST /v1/tools/served/{name}/validate": cat(
			each("name", []string{"tool_name", "client_tool_name", "confirm_tool_name", "deleted_tool_name"}, "", `{"args":{"x":1}}`, isoNotFound),
			[]isoCase{{params: p("name", "a_echo"), body: `{"args":{"text":"from A"}}`, want: isoListed}}),
		// Agents are the server's, their variables each workspace's: A lists, sets and removes
		// its own values of iso_client (B set ZULU_AGENT on it); B's tool name is no agent.
		"GET /v1/agents/{agent}/variables": {
			{params: p("agent", "a_agent"), want: isoListed},
			{params: p("agent", "tool_name"), want: isoRefused},
		},
		"PUT /v1/agents/{agent}/variables/{name}": {
			{params: p("agent", "tool_name", "name", "plain_var"), body: `{"value":"from A"}`, want: isoNotFound},
			{params: p("agent", "a_agent", "name", "a_var"), body: `{"value":"A's own","secret":true}`, want: isoCreated},
		},
		"DELETE /v1/agents/{agent}/variables/{name}": {
			{params: p("agent", "a_agent", "name", "agent_var"), want: isoNotFound},
			{params: p("agent", "tool_name", "name", "plain_var"), want: isoNotFound},
		},
		// A user's variables: B's members are not A's; Sam, a member of both, has B's secret
		// ZULU_SAM_TOKEN, which A neither lists nor removes.
		"GET /v1/users/{id}/variables": cat(
			each("id", users, "", "", isoNotFound),
			[]isoCase{{params: p("id", "a_sam"), want: isoListed}}),
		"PUT /v1/users/{id}/variables/{name}": {
			{params: p("id", "user", "name", "plain_var"), body: `{"value":"from A"}`, want: isoNotFound},
			{params: p("id", "admin_user", "name", "secret_var"), body: `{"value":"from A","secret":true}`, want: isoNotFound},
			{params: p("id", "a_sam", "name", "a_var"), body: `{"value":"A's own","secret":true}`, want: isoCreated},
		},
		"DELETE /v1/users/{id}/variables/{name}": {
			{params: p("id", "user", "name", "plain_var"), want: isoNotFound},
			{params: p("id", "a_sam", "name", "user_var"), want: isoNotFound},
		},
		"GET /v1/threads/{id}/variables/{name}": {
			{params: p("id", "thread", "name", "request"), want: isoNotFound},
			{params: p("id", "a_thread", "name", "request"), want: isoNotFound},
		},
		"POST /v1/threads/{id}/variables/{name}": {
			{params: p("id", "thread", "name", "request"), body: `{"values":{"ZULU_REPO":"from A"}}`, want: isoNotFound},
			{params: p("id", "a_thread", "name", "request"), body: `{"values":{"ZULU_REPO":"from A"}}`, want: isoNotFound},
		},
		"DELETE /v1/threads/{id}/variables/{name}": {
			{params: p("id", "thread", "name", "secret_var"), want: isoNotFound},
			{params: p("id", "thread", "name", "plain_var"), want: isoNotFound},
		},
		"GET /v1/threads/{id}": each("id", threads, "", "", isoNotFound),
		"GET /v1/threads/{id}/messages": cat(
			each("id", threads, "limit=1000", "", isoNotFound),
			[]isoCase{{params: p("id", "thread"), query: "before=3&limit=1", want: isoNotFound}}),
		"GET /v1/threads/{id}/events":  each("id", threads, "", "", isoNotFound),
		"GET /v1/threads/{id}/pending": each("id", threads, "", "", isoNotFound),
		"POST /v1/threads/{id}/results": cat(
			each("id", []string{"run_thread"}, "", `{"agent":"iso_client","call_id":"{call}","status":"success","text":"from A"}`, isoNotFound),
			[]isoCase{{params: p("id", "run_thread"), body: `{"agent":"iso_client","call_id":"{call}","status":"error","error":"from A"}`, want: isoNotFound}},
			each("id", []string{"thread", "confirm_thread"}, "", `{"agent":"iso_client","call_id":"{confirm_call}","status":"success","text":"from A"}`, isoNotFound)),
		"POST /v1/threads/{id}/decisions": cat(
			each("id", []string{"confirm_thread"}, "", `{"agent":"iso_confirm","call_id":"{confirm_call}","action":"approve"}`, isoNotFound),
			[]isoCase{
				{params: p("id", "confirm_thread"), body: `{"agent":"iso_confirm","call_id":"{confirm_call}","action":"deny","message":"from A"}`, want: isoNotFound},
				{params: p("id", "confirm_thread"), body: `{"agent":"iso_confirm","call_id":"{confirm_call}","action":"edit","args":{"x":2}}`, want: isoNotFound},
				{params: p("id", "run_thread"), body: `{"agent":"iso_client","call_id":"{call}","action":"approve"}`, want: isoNotFound},
			}),
		"POST /v1/threads/{id}/runs": each("id", threads, "", `{"agent":"iso_client","message":"from A"}`, isoNotFound),
		"POST /v1/threads":           {{body: `{"agent":"iso_client","tags":["{tag}"]}`, want: isoCreated}},

		// The workspace, its members and keys.
		"GET /v1/workspaces/{id}": each("id", []string{"workspace"}, "", "", isoNotFound),
		"PATCH /v1/workspaces/{id}": {
			{params: p("id", "workspace"), body: `{"name":"{workspace_name} by A"}`, want: isoNotFound},
			{params: p("id", "workspace"), body: `{"default_runtime_user_id":null,"retention_tier":"none"}`, want: isoNotFound},
			{params: p("id", "a_workspace"), body: `{"default_runtime_user_id":"{user}"}`, want: isoRefused},
			{params: p("id", "a_workspace"), body: `{"default_runtime_user_id":"{admin_user}"}`, want: isoRefused},
		},
		"POST /v1/workspaces": {{body: `{"name":"{workspace_name}"}`, want: isoCreated}},
		"GET /v1/members":     {{want: isoListed}},
		"POST /v1/members": {
			{body: `{"email":"fresh-iso@acme-iso.test","name":"{user_name}"}`, want: isoCreated},
			// Users are global and a member is added by email: A's admin who knows the email of
			// B's member adds that user to A, and the answer is the user's record (id, email,
			// name). Nothing of B comes with it (B's membership and records stay B's, which the
			// snapshot checks); what A learns is that the email has an account here.
			{body: `{"email":"{email}"}`, want: isoCreated, allow: []string{"user", "user_name"}},
		},
		"PATCH /v1/members/{user_id}": cat(
			each("user_id", users, "", `{"role":"admin"}`, isoNotFound),
			each("user_id", users, "", `{"role":"member"}`, isoNotFound)),
		"DELETE /v1/members/{user_id}": each("user_id", users, "", "", isoNotFound),
		"GET /v1/keys":                 {{want: isoListed}},
		// The governance rules: A's own, which may name B's tools (names are per workspace) and
		// govern A's calls only.
		"GET /v1/governance": {{want: isoListed}},
		"PUT /v1/governance": {{body: `{"rules":[{"tools":["{tool_name}"],"access":"deny"}],"version":0}`, want: isoCreated}},
		// The entitlements: A's own, which may name B's keys, users and tools (kept, and
		// warned about, as names that are not there), and explain only of A's.
		"GET /v1/entitlements": {{want: isoListed}},
		"PUT /v1/entitlements": {{body: `{"document":{"rules":[{"who":{"key":"{key}","user":"{user}"},"tools":["{tool_name}"],"access":"deny"}]},"after":0}`,
			want: isoCreated}},
		"GET /v1/entitlements/explain": {
			{query: "tool={tool_name}", want: isoNotFound},
			{query: "tool={a_echo}&subject=key:{key}", want: isoNotFound},
			{query: "tool={a_echo}&subject=user:{user}", want: isoNotFound},
		},
		"GET /v1/toolsets": {{want: isoListed}},
		// The limits: A's own, which may name B's keys, users and tools (who and tools select
		// calls; a name that is not there selects none), and count A's calls alone.
		"GET /v1/limits":        {{want: isoListed}},
		"GET /v1/limits/status": {{want: isoListed}},
		// Usage: A's calls alone, whatever it is grouped by (B's keys, users and tools have
		// calls of their own in B).
		"GET /v1/usage": {{query: "bucket=all&group_by=key,user,agent,tool,model", want: isoListed},
			{query: "bucket=minute&group_by=tool", want: isoListed}, {query: "format=csv&group_by=key,user", want: isoListed}},
		// Connections: A's providers (which may name B's), A's people's connections alone; B's
		// provider is not A's to connect to or disconnect from.
		"GET /v1/connection-providers": {{want: isoListed}},
		"PUT /v1/connection-providers": {{body: `{"document":{"providers":[{"name":"a-provider","description":"{provider}","authorization_url":"https://auth.example/a",` +
			`"token_url":"https://auth.example/t","client_id":"{key}"}]},"after":0}`, want: isoCreated}},
		"GET /v1/connections":               {{want: isoListed}},
		"POST /v1/connections/{provider}":   each("provider", []string{"provider"}, "", `{"scopes":[]}`, isoNotFound),
		"DELETE /v1/connections/{provider}": each("provider", []string{"provider"}, "", "", isoNotFound),
		"PUT /v1/limits": {{body: `{"document":{"limits":[{"name":"b","who":{"key":"{key}","user":"{user}"},"tools":["{tool_name}"],"calls":{"per_minute":1}}]},"after":0}`,
			want: isoCreated}},
		"POST /v1/keys": {
			{body: `{"user_id":"{user}","role":"viewer","name":"{key_name}"}`, want: isoRefused},
			{body: `{"user_id":"{admin_user}","role":"admin","name":"from A"}`, want: isoRefused},
		},
		"DELETE /v1/keys/{id}": each("id", keys, "", "", isoNotFound),

		// Stored tools and functions.
		"GET /v1/tools": {
			{query: "limit=100&include_deleted=true&include_system=true", want: isoListed},
			{query: "function_id={function}&include_deleted=true", want: isoListed},
			{query: "name={tool_name}", want: isoListed},
			{query: "name={deleted_tool_name}&include_deleted=only", want: isoListed},
			{query: "name=zulu&name_prefix=true&include_deleted=true", want: isoListed},
			{query: "limit=1&include_deleted=true&cursor={tools_cursor}", want: isoListedOrRefused},
		},
		"POST /v1/tools": {
			{body: `{"name":"iso_new_one","function_id":"{function}",` + serverTool + `}`, want: isoNotFound},
			{body: `{"name":"iso_new_two","function_id":"{a_function}","function_version_id":"{version}",` + serverTool + `}`, want: isoNotFound},
			{body: `{"name":"iso_new_three","function_id":"{a_function}","runtime_user_id":"{user}",` + serverTool + `}`, want: isoRefused},
			{body: `{"name":"{tool_name}","description":"A's own.","target":"client","input_schema":{"type":"object"}}`, want: isoCreated},
		},
		"GET /v1/tools/{id}": each("id", tools, "", "", isoNotFound),
		"PATCH /v1/tools/{id}": cat(
			each("id", tools, "", `{"name":"{client_tool_name}_a","description":"changed by A"}`, isoNotFound),
			[]isoCase{
				{params: p("id", "tool"), body: `{"enabled":false,"requires_confirmation":true}`, want: isoNotFound},
				{params: p("id", "a_tool"), body: `{"function_id":"{function}"}`, want: isoNotFound},
				{params: p("id", "a_tool"), body: `{"function_version_id":"{version}"}`, want: isoNotFound},
				{params: p("id", "a_tool"), body: `{"runtime_user_id":"{user}"}`, want: isoRefused},
			}),
		"DELETE /v1/tools/{id}": cat(
			each("id", tools, "", "", isoNotFound),
			each("id", tools, "retention_tier=none", "", isoNotFound)),
		// OpenAPI documents: B's is not A's to read or delete; A imports one of its own under
		// the same name (names are per workspace).
		"GET /v1/openapi-sources":           {{want: isoListed}},
		"GET /v1/openapi-sources/{name}":    each("name", []string{"openapi_source"}, "", "", isoNotFound),
		"DELETE /v1/openapi-sources/{name}": each("name", []string{"openapi_source"}, "", "", isoNotFound),
		"POST /v1/openapi-sources":          {{body: `{"name":"{openapi_source}","document":"` + isoAcmeDoc + `"}`, want: isoCreated}},
		"GET /v1/functions":                 {{want: isoListed}},
		"POST /v1/functions":                {{body: `{"name":"{function_name}"}`, want: isoCreated}},
		"GET /v1/functions/{id}":            each("id", []string{"function"}, "", "", isoNotFound),
		"POST /v1/functions/{id}/versions":  each("id", []string{"function"}, "", `{"code":"export default function () { return 1 }"}`, isoNotFound),
		"GET /v1/functions/{id}/versions":   each("id", []string{"function"}, "", "", isoNotFound),
		"PUT /v1/functions/{id}/default-version": {
			{params: p("id", "function"), body: `{"version_id":"{version}"}`, want: isoNotFound},
			{params: p("id", "function"), body: `{"version_id":"{version2}"}`, want: isoNotFound},
			{params: p("id", "a_function"), body: `{"version_id":"{version}"}`, want: isoRefused},
		},
	}
}

// ---- the world

// isoWorld is a server with runs on a real store, over HTTP on 127.0.0.1, serving two
// workspaces: A, whose admin key sends every request of the sweep, and B, with one of
// everything. Every name and text of B's holds "zulu", so that an answer holding it stands out
// (no id holds it: their alphabet has no l and no u).
type isoWorld struct {
	st   isoStore
	url  string
	keyA string // A's admin key
	keyB string // B's admin key
	a, b string // the workspaces' ids
	// shared are the values of Sam, a user who is a member of both workspaces: A may see them.
	shared []string
	// vals are the values the placeholders of the table stand for: B's, and A's own (a_...).
	vals map[string]string
	// secrets are values of B's that its snapshot does not hold as they are: its API keys, a
	// secret variable's plaintext, its MCP session's id.
	secrets []string
	// markers are B's values no answer to A may hold (unless A's request sent them): every id
	// and every text with "zulu" in B's snapshot, and the secrets.
	markers []string
	// bSession is an MCP session of B's key, open for the whole test.
	bSession *sdk.ClientSession
	resolver *vars.Resolver
	p        *platform.Platform
	runs     *jobs.Jobs
}

// isoNoTwin are the kinds of values that have no twin (a value of the same kind that never
// existed): a cursor is a position, not a record.
var isoNoTwin = map[string]bool{"threads_cursor": true, "tag_cursor": true, "tools_cursor": true}

const (
	isoInput    = `{"type":"object","description":"Zulu: says which version runs.","properties":{"x":{"type":"integer"}}}`
	isoPathIn   = `{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`
	isoV1Code   = "export default function (args) { return {zulu: 'zulu_code_v1', x: args.x} }"
	isoV2Code   = "export default function (args) { return {zulu: 'zulu_code_v2', x: args.x} }"
	isoAcmeCode = "export default function (args) { return {acme: 1} }"
	// isoZuluDoc is B's OpenAPI document; isoAcmeDoc A's, imported under B's source's name.
	isoZuluDoc = `{"openapi":"3.0.3","info":{"title":"Zulu pets","version":"1"},"servers":[{"url":"https://zulu.example.com/api"}],` +
		`"components":{"securitySchemes":{"key":{"type":"apiKey","in":"header","name":"X-Zulu-Key"}}},"security":[{"key":[]}],` +
		`"paths":{"/pets":{"get":{"operationId":"zuluFind","summary":"Zulu: finds pets.","responses":{"200":{"description":"ok"}}}}}}`
	isoAcmeDoc = `{\"openapi\":\"3.0.3\",\"info\":{\"title\":\"Acme\",\"version\":\"1\"},\"servers\":[{\"url\":\"https://acme.example.com\"}],` +
		`\"paths\":{\"/x\":{\"get\":{\"operationId\":\"acmeX\",\"responses\":{\"200\":{\"description\":\"ok\"}}}}}}`
)

func newIsoWorld(t *testing.T, be isoBackend) *isoWorld {
	t.Helper()
	ctx := context.Background()
	st := be.st
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	discard := slog.New(slog.DiscardHandler)
	w := &isoWorld{st: st, vals: map[string]string{}}

	// The workspaces and their admins, made in the store; Sam is a member of both.
	a, b := &store.Workspace{Name: "acme-iso"}, &store.Workspace{Name: "zulu-globex"}
	ada := &store.User{Email: "ada@acme-iso.test", Name: "Ada"}
	gil := &store.User{Email: "zulu-gil@globex.test", Name: "Zulu Gil"}
	sam := &store.User{Email: "sam@shared.test", Name: "Sam"}
	must(st.CreateWorkspace(ctx, a))
	must(st.CreateWorkspace(ctx, b))
	for _, u := range []*store.User{ada, gil, sam} {
		must(st.CreateUser(ctx, u))
	}
	for _, m := range []*store.Membership{
		{WorkspaceID: a.ID, UserID: ada.ID, Role: store.MemberRoleAdmin},
		{WorkspaceID: a.ID, UserID: sam.ID, Role: store.MemberRoleMember},
		{WorkspaceID: b.ID, UserID: gil.ID, Role: store.MemberRoleAdmin},
		{WorkspaceID: b.ID, UserID: sam.ID, Role: store.MemberRoleMember},
	} {
		must(st.AddMember(ctx, m))
	}
	w.a, w.b, w.shared = a.ID, b.ID, []string{sam.ID, sam.Email, sam.Name}
	var err error
	w.keyA, err = platform.IssueAPIKey(ctx, st, &store.APIKey{WorkspaceID: a.ID, UserID: ada.ID, Name: "acme admin", Role: store.KeyRoleAdmin})
	must(err)
	bAdminKey := &store.APIKey{WorkspaceID: b.ID, UserID: gil.ID, Name: "zulu admin key", Role: store.KeyRoleAdmin}
	w.keyB, err = platform.IssueAPIKey(ctx, st, bAdminKey)
	must(err)

	// The server, with variables (secrets sealed), tools of its own and background runs of
	// two agents: one calls B's client tool, the other B's tool that requires confirmation.
	key, _, err := secret.GenerateKey()
	must(err)
	resolver := vars.New(st, secret.NewKeyring(key))
	w.resolver = resolver
	reg := &quiver.Registry{}
	must(reg.Register(
		quiver.Func("iso_echo", "Echoes its text.", func(_ context.Context, in struct {
			Text string `json:"text"`
		}) (string, error) {
			return in.Text, nil
		}),
		quiver.Func("iso_attach", "Attaches a note as a file.", func(_ context.Context, in struct {
			Note string `json:"note"`
		}) (*quiver.Result, error) {
			return &quiver.Result{Text: "attached " + in.Note, Attachments: []quiver.Attachment{{Name: in.Note + ".txt", MimeType: "text/plain",
				Data: "enVsdSBhdHRhY2hlZCBmaWxl"}}}, nil // "zulu attached file"
		}),
	))
	models := map[string]model.Model{
		"iso:client": scripted.Turns(scripted.Turn{Calls: []scripted.Call{{Name: "zulu_client", Args: map[string]any{"path": "/zulu/motd"}}}},
			scripted.Turn{Text: "zulu: the client tool answered"}),
		"iso:confirm": scripted.Turns(scripted.Turn{Calls: []scripted.Call{{Name: "zulu_confirm", Args: map[string]any{"x": 7}}}},
			scripted.Turn{Text: "zulu: the confirmed call answered"}),
	}
	agents := map[string]*agent.Agent{
		"iso_client":  {Name: "iso_client", Prompt: &agent.Prompt{Name: "iso_client", Model: "iso:client", Tools: []string{"zulu_client"}}},
		"iso_confirm": {Name: "iso_confirm", Prompt: &agent.Prompt{Name: "iso_confirm", Model: "iso:confirm", Tools: []string{"zulu_confirm"}}},
	}
	p, err := platform.New(platform.Config{Store: st, Registry: reg, Resolver: resolver, Logger: discard,
		Catalog: &agent.Catalog{Agents: agents},
		OpenModel: func(spec string) (model.Model, error) {
			if m, ok := models[spec]; ok {
				return m, nil
			}
			return nil, fmt.Errorf("no model %q", spec)
		}})
	must(err)
	must(be.openJournal(ctx, p))
	must(p.StartJobs(ctx, func(_ context.Context, c jobs.Config) (*jobs.Jobs, error) { return be.startJobs(t, c), nil }))
	// A is the operator's: it makes workspaces.
	srv, err := server.New(ctx, server.Config{Platform: p, Auth: &server.Authenticator{Keys: st}, WorkspaceID: a.ID, Logger: discard})
	must(err)
	w.p, w.runs = p, p.Jobs()
	ts := httptest.NewServer(apicontract.Handler(t, srv.Handler()))
	t.Cleanup(func() { srv.Close(); ts.Close(); _ = p.Close() })
	w.url = ts.URL

	// B's records, made over the API with B's key: a member and keys, a function with two
	// versions, a server tool (pinned, running as the member), one that requires confirmation,
	// a client tool and a deleted one.
	B := func(method, path, body string, want int, out any) {
		t.Helper()
		w.expect(t, w.keyB, method, path, body, want, out)
	}
	var mel struct {
		UserID string `json:"user_id"`
	}
	B("POST", "/v1/members", `{"email":"zulu-mel@globex.test","name":"Zulu Mel","role":"member"}`, 201, &mel)
	var newKey struct {
		Key    store.APIKey `json:"key"`
		Secret string       `json:"secret"`
	}
	B("POST", "/v1/keys", `{"user_id":"`+mel.UserID+`","role":"member","name":"zulu mel key"}`, 201, &newKey)
	melKey := newKey
	B("POST", "/v1/keys", `{"user_id":"`+sam.ID+`","role":"viewer","name":"zulu sam key"}`, 201, &newKey)
	samKey := newKey
	var fn, v1, v2, rec struct {
		ID string `json:"id"`
	}
	B("POST", "/v1/functions", `{"name":"zulu_fn"}`, 201, &fn)
	B("POST", "/v1/functions/"+fn.ID+"/versions", isoJSON(map[string]any{"code": isoV1Code, "input_schema": json.RawMessage(isoInput)}), 201, &v1)
	B("POST", "/v1/functions/"+fn.ID+"/versions", isoJSON(map[string]any{"code": isoV2Code, "input_schema": json.RawMessage(isoInput)}), 201, &v2)
	B("PUT", "/v1/functions/"+fn.ID+"/default-version", `{"version_id":"`+v2.ID+`"}`, 200, nil)
	B("PATCH", "/v1/workspaces/"+b.ID, `{"default_runtime_user_id":"`+mel.UserID+`"}`, 200, nil)
	tool := func(body map[string]any) string {
		t.Helper()
		B("POST", "/v1/tools", isoJSON(body), 201, &rec)
		return rec.ID
	}
	serverTool := tool(map[string]any{"name": "zulu_server", "description": "Zulu server tool.", "target": "server", "function_id": fn.ID,
		"function_version_id": v1.ID, "runtime_user_id": mel.UserID, "input_schema": json.RawMessage(isoInput),
		"examples": []map[string]any{{"args": map[string]any{"x": 1}}}})
	confirmTool := tool(map[string]any{"name": "zulu_confirm", "description": "Zulu tool that waits for a person.", "target": "server",
		"function_id": fn.ID, "requires_confirmation": true, "input_schema": json.RawMessage(isoInput)})
	clientTool := tool(map[string]any{"name": "zulu_client", "description": "Zulu: opens a file on the user's machine.", "target": "client",
		"input_schema": json.RawMessage(isoPathIn)})
	deletedTool := tool(map[string]any{"name": "zulu_gone", "description": "Zulu: a deleted tool.", "target": "client",
		"input_schema": json.RawMessage(isoPathIn)})
	B("DELETE", "/v1/tools/"+deletedTool+"?retention_tier=none", "", 200, nil)

	// An OpenAPI document of B's, whose operation is B's tool zulu_pets.zuluFind.
	B("POST", "/v1/openapi-sources", isoJSON(map[string]any{"name": "zulu_pets", "document": isoZuluDoc,
		"credentials": map[string]string{"key": "ZULU_PETS_KEY"}}), 201, nil)

	// A thread of B's with calls (one attaches a file), a file of its own, and variables: a
	// text and a secret on the thread, a secret of Sam's (a user of both workspaces), an
	// instance value and an agent's.
	var call struct {
		ThreadID string        `json:"thread_id"`
		Result   quiver.Result `json:"result"`
	}
	B("POST", "/v1/tools/iso_attach/call", `{"args":{"note":"zulu_note"}}`, 200, &call)
	thread := call.ThreadID
	if call.Result.IsError() || len(call.Result.Attachments) != 1 || !strings.HasPrefix(call.Result.Attachments[0].Path, "/attachments/") {
		t.Fatalf("B's attaching call: %+v", call.Result)
	}
	attachment := call.Result.Attachments[0].Path
	must(p.Flush(ctx))
	B("POST", "/v1/tools/zulu_server/call", `{"args":{"x":5},"thread_id":"`+thread+`"}`, 200, &call)
	if call.Result.IsError() || !strings.Contains(string(call.Result.Value), "zulu_code_v1") {
		t.Fatalf("B's call of its tool: %+v", call.Result)
	}
	_, err = st.WriteFile(ctx, b.ID, thread, "/notes/zulu_notes.md", []byte("zulu notes"), store.FileMeta{MimeType: "text/markdown"})
	must(err)
	threadSecret, samSecret := "zulu-thread-secret-"+ids.Random(8), "zulu-sam-secret-"+ids.Random(8)
	must(resolver.Set(ctx, b.ID, quiver.LayerThread, thread, vars.Value{Name: "ZULU_PLAIN", Value: "zulu plain value"},
		vars.Value{Name: "ZULU_SECRET", Value: threadSecret, Secret: true}))
	must(resolver.Set(ctx, b.ID, quiver.LayerUser, sam.ID, vars.Value{Name: "ZULU_SAM_TOKEN", Value: samSecret, Secret: true}))
	must(resolver.Set(ctx, b.ID, quiver.LayerInstance, "", vars.Value{Name: "ZULU_REGION", Value: "zulu-region"}))
	must(resolver.Set(ctx, b.ID, quiver.LayerAgent, "iso_client", vars.Value{Name: "ZULU_AGENT", Value: "zulu agent value"}))

	// B's provider, and Mel's connection to it.
	B("PUT", "/v1/connection-providers", `{"document":{"providers":[{"name":"zulu-provider","authorization_url":"https://auth.zulu.example/a",`+
		`"token_url":"https://auth.zulu.example/t","client_id":"zulu-client"}]},"after":0}`, 200, nil)
	must(st.(store.Connections).PutConnection(ctx, &store.Connection{WorkspaceID: b.ID, UserID: mel.UserID, Provider: "zulu-provider",
		AccessToken: "zulu-conn-sealed", Scopes: []string{"zulu-scope"}}))

	// A sub-agent of B's deferred for a variable, as subagent_create leaves it.
	deferred := &store.Thread{WorkspaceID: b.ID, ParentID: thread, AgentID: "iso_client", Tags: []string{"name:zulu-child"},
		State: json.RawMessage(`{"spawn":{"agent":"iso_client","path":["iso_client","iso_client"],"deferred":[{"name":"ZULU_REPO",` +
			`"type":"text","required":true,"scoped":true,"description":"zulu repo"}],"message":"zulu deferred message"}}`)}
	must(st.CreateThread(ctx, deferred))

	// Two runs of B's, paused: one on its client tool's call, one on a confirmation.
	runThread, clientCall := w.pausedRun(t, "iso_client", "client_tool")
	confirmThread, confirmCall := w.pausedRun(t, "iso_confirm", "confirmation")

	// An MCP session of B's, with a call recorded on its thread; it stays open.
	w.bSession = w.mcpSession(t, w.keyB)
	if names := isoToolNames(t, w.bSession); !slices.Contains(names, "zulu_server") || !slices.Contains(names, "zulu_client") {
		t.Fatalf("B's MCP session lists %v", names)
	}
	if r, err := w.bSession.CallTool(ctx, &sdk.CallToolParams{Name: "iso_echo", Arguments: map[string]any{"text": "zulu mcp text"}}); err != nil || r.IsError {
		t.Fatalf("B's MCP call: %v %+v", err, r)
	}
	var mcpThread string
	for _, th := range w.threadsOf(t, w.keyB) {
		if slices.Contains(th.Tags, "mcp") {
			mcpThread = th.ID
		}
	}
	if mcpThread == "" {
		t.Fatal("B's MCP session has no thread")
	}

	// A's own records, which some cases name beside B's.
	var acmeFn, acmeTool struct {
		ID string `json:"id"`
	}
	var acmeCall struct {
		ThreadID string `json:"thread_id"`
	}
	w.expect(t, w.keyA, "POST", "/v1/functions", `{"name":"acme_fn"}`, 201, &acmeFn)
	w.expect(t, w.keyA, "POST", "/v1/functions/"+acmeFn.ID+"/versions", isoJSON(map[string]any{"code": isoAcmeCode}), 201, nil)
	w.expect(t, w.keyA, "POST", "/v1/tools", isoJSON(map[string]any{"name": "acme_tool", "target": "server", "function_id": acmeFn.ID,
		"input_schema": json.RawMessage(`{"type":"object","description":"Acme's tool.","properties":{"x":{"type":"integer"}}}`)}), 201, &acmeTool)
	w.expect(t, w.keyA, "POST", "/v1/tools/iso_echo/call", `{"args":{"text":"acme"}}`, 200, &acmeCall)

	// Cursors of B's listings.
	var page struct {
		NextCursor string `json:"next_cursor"`
	}
	B("GET", "/v1/threads?limit=1", "", 200, &page)
	threadsCursor := page.NextCursor
	B("GET", "/v1/threads?limit=1&tag=zulu-tag", "", 200, &page)
	tagCursor := page.NextCursor
	B("GET", "/v1/tools?limit=1&include_deleted=true", "", 200, &page)
	toolsCursor := page.NextCursor
	if threadsCursor == "" || tagCursor == "" || toolsCursor == "" {
		t.Fatalf("B's listings give no cursor: threads %q, by tag %q, tools %q", threadsCursor, tagCursor, toolsCursor)
	}

	w.vals = map[string]string{
		"workspace": b.ID, "workspace_name": b.Name,
		"user": mel.UserID, "user_name": "Zulu Mel", "email": "zulu-mel@globex.test", "admin_user": gil.ID,
		"key": melKey.Key.ID, "admin_key": bAdminKey.ID, "sam_key": samKey.Key.ID, "key_name": "zulu mel key",
		"function": fn.ID, "function_name": "zulu_fn", "version": v1.ID, "version2": v2.ID,
		"tool": serverTool, "tool_name": "zulu_server", "confirm_tool": confirmTool, "confirm_tool_name": "zulu_confirm",
		"client_tool": clientTool, "client_tool_name": "zulu_client", "deleted_tool": deletedTool, "deleted_tool_name": "zulu_gone",
		"thread": thread, "run_thread": runThread, "confirm_thread": confirmThread, "mcp_thread": mcpThread, "request": deferred.ID, "thread_name": "zulu-child",
		"call": clientCall, "confirm_call": confirmCall, "tag": "zulu-tag",
		"file_path": "/notes/zulu_notes.md", "file_rel": "notes/zulu_notes.md", "attachment_rel": strings.TrimPrefix(attachment, "/"),
		"plain_var": "ZULU_PLAIN", "secret_var": "ZULU_SECRET",
		"threads_cursor": threadsCursor, "tag_cursor": tagCursor, "tools_cursor": toolsCursor,
		"a_workspace": a.ID, "a_function": acmeFn.ID, "a_tool": acmeTool.ID, "a_echo": "iso_echo", "a_thread": acmeCall.ThreadID,
		"agent_var": "ZULU_AGENT", "user_var": "ZULU_SAM_TOKEN", "a_agent": "iso_client", "a_sam": sam.ID, "a_var": "ACME_CONSOLE",
		"openapi_source": "zulu_pets", "openapi_tool_name": "zulu_pets.zuluFind", "provider": "zulu-provider",
	}
	w.secrets = []string{w.keyB, melKey.Secret, samKey.Secret, bAdminKey.Prefix, melKey.Key.Prefix, samKey.Key.Prefix,
		threadSecret, samSecret, w.bSession.ID()}
	return w
}

// pausedRun makes a thread of B's for the agent and runs it until it waits on a call for the
// reason given; it returns the thread and the call.
func (w *isoWorld) pausedRun(t *testing.T, agentName string, reason agent.Reason) (string, string) {
	t.Helper()
	var th struct {
		ID string `json:"id"`
	}
	w.expect(t, w.keyB, "POST", "/v1/threads", `{"agent":"`+agentName+`","tags":["zulu-tag"]}`, 201, &th)
	var run struct {
		JobID int64 `json:"job_id"`
	}
	w.expect(t, w.keyB, "POST", "/v1/threads/"+th.ID+"/runs", `{"agent":"`+agentName+`","message":"zulu message for `+agentName+`"}`, 202, &run)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var out struct {
			Pending []agent.Pending `json:"pending"`
		}
		w.expect(t, w.keyB, "GET", "/v1/threads/"+th.ID+"/pending", "", 200, &out)
		stored, err := w.st.Thread(context.Background(), w.b, th.ID)
		if err != nil {
			t.Fatal(err)
		}
		state, err := w.runs.RunStatus(context.Background(), w.b, th.ID, run.JobID)
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Pending) == 1 && stored.Status == store.StatusIdle && state == jobs.RunDone {
			if out.Pending[0].Reason != reason {
				t.Fatalf("the run of %s waits on %+v, want a call waiting for %s", agentName, out.Pending[0], reason)
			}
			return th.ID, out.Pending[0].Call.ID
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run of %s did not pause within 30 s: pending %+v, thread %+v, job %s", agentName, out.Pending, stored, state)
		}
	}
}

type isoThreadItem struct {
	ID   string   `json:"id"`
	Tags []string `json:"tags"`
}

// threadsOf lists every thread the key's workspace has, through the API.
func (w *isoWorld) threadsOf(t *testing.T, key string) []isoThreadItem {
	t.Helper()
	var all []isoThreadItem
	cursor := ""
	for {
		var page struct {
			Threads    []isoThreadItem `json:"threads"`
			NextCursor string          `json:"next_cursor"`
		}
		w.expect(t, key, "GET", "/v1/threads?limit=100&cursor="+url.QueryEscape(cursor), "", 200, &page)
		all = append(all, page.Threads...)
		if page.NextCursor == "" {
			return all
		}
		cursor = page.NextCursor
	}
}

func isoJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// ---- requests

type isoReq struct {
	method, path, query, body string
	header                    map[string]string
}

func (r isoReq) String() string {
	s := r.method + " " + r.path
	if r.query != "" {
		s += "?" + r.query
	}
	if r.body != "" {
		s += " " + r.body
	}
	return s
}

// sent is what the request carries, unescaped: an answer may hold what was sent.
func (r isoReq) sent() string {
	p, _ := url.PathUnescape(r.path)
	q, _ := url.QueryUnescape(r.query)
	var h strings.Builder
	for k, v := range r.header {
		h.WriteString(k + ": " + v + "\n")
	}
	return r.path + "\n" + p + "\n" + r.query + "\n" + q + "\n" + r.body + "\n" + h.String()
}

type isoResp struct {
	status int
	ctype  string
	body   []byte
	header []byte
}

func (r isoResp) String() string {
	b := r.body
	if len(b) > 600 {
		b = append(b[:600:600], "..."...)
	}
	return fmt.Sprintf("%d %s", r.status, bytes.TrimSpace(b))
}

// send sends a request with key ("" for none). An event stream is read for half a second.
func (w *isoWorld) send(t *testing.T, key string, req isoReq) isoResp {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	u := w.url + req.path
	if req.query != "" {
		u += "?" + req.query
	}
	var body io.Reader
	if req.body != "" {
		body = strings.NewReader(req.body)
	}
	hr, err := http.NewRequestWithContext(ctx, req.method, u, body)
	if err != nil {
		t.Fatalf("%s: %v", req, err)
	}
	if req.body != "" {
		hr.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		hr.Header.Set("Authorization", "Bearer "+key)
	}
	for k, v := range req.header {
		hr.Header.Set(k, v)
	}
	res, err := isoClient.Do(hr)
	if err != nil {
		t.Fatalf("%s: %v", req, err)
	}
	defer res.Body.Close()
	if strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		stop := time.AfterFunc(500*time.Millisecond, cancel)
		defer stop.Stop()
	}
	data, err := io.ReadAll(res.Body)
	if err != nil && ctx.Err() == nil {
		t.Fatalf("%s: reading the answer: %v", req, err)
	}
	var h bytes.Buffer
	_ = res.Header.Write(&h)
	return isoResp{status: res.StatusCode, ctype: res.Header.Get("Content-Type"), body: data, header: h.Bytes()}
}

// expect sends a request that must answer want, and decodes the answer into out (when not nil).
func (w *isoWorld) expect(t *testing.T, key, method, pathQuery, body string, want int, out any) {
	t.Helper()
	path, query, _ := strings.Cut(pathQuery, "?")
	r := w.send(t, key, isoReq{method: method, path: path, query: query, body: body})
	if r.status != want {
		t.Fatalf("%s %s: %s, want %d", method, pathQuery, r, want)
	}
	if out != nil {
		if err := json.Unmarshal(r.body, out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, pathQuery, err, r.body)
		}
	}
}

// isoClient follows no redirect: each answer is the server's own.
var isoClient = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

var isoPlaceholder = regexp.MustCompile(`\{([a-z0-9_]+)\}`)

// build makes the request of a case of the operation with the values given.
func isoBuild(op isoOp, c isoCase, vals map[string]string) (isoReq, error) {
	var missing []string
	value := func(kind string) string {
		v, ok := vals[kind]
		if !ok {
			missing = append(missing, kind)
		}
		return v
	}
	path := op.path
	for param, kind := range c.params {
		v := url.PathEscape(value(kind))
		if param == "path" {
			// A file's path takes the rest of the URL, its slashes as they are.
			segs := strings.Split(value(kind), "/")
			for i := range segs {
				segs[i] = url.PathEscape(segs[i])
			}
			v = strings.Join(segs, "/")
		}
		path = strings.ReplaceAll(path, "{"+param+"}", v)
	}
	if strings.Contains(path, "{") {
		return isoReq{}, fmt.Errorf("a path parameter of %s has no value in the case (params %v)", op.key, c.params)
	}
	fill := func(tmpl string, escape func(string) string) string {
		return isoPlaceholder.ReplaceAllStringFunc(tmpl, func(m string) string {
			return escape(value(m[1 : len(m)-1]))
		})
	}
	req := isoReq{method: op.method, path: path,
		query: fill(c.query, url.QueryEscape),
		body: fill(c.body, func(s string) string {
			b, _ := json.Marshal(s)
			return string(b[1 : len(b)-1])
		})}
	if len(missing) > 0 {
		return isoReq{}, fmt.Errorf("%s: no value for %v", op.key, missing)
	}
	return req, nil
}

// isoKinds are the kinds of values a case uses.
func isoKinds(c isoCase) []string {
	var out []string
	for _, k := range c.params {
		out = append(out, k)
	}
	for _, m := range isoPlaceholder.FindAllStringSubmatch(c.query+" "+c.body, -1) {
		out = append(out, m[1])
	}
	slices.Sort(out)
	return slices.Compact(out)
}

var (
	isoIDRE   = regexp.MustCompile(`\b([a-z]{2,5})_[0-9a-z]{26}\b`)
	isoBareID = regexp.MustCompile(`^[0-9a-z]{26}$`)
)

// isoTwin is a value like v that names nothing: an id of the same kind that was never made, a
// name no record has.
func isoTwin(v string) string {
	switch m := isoIDRE.FindStringSubmatch(v); {
	case m != nil && m[0] == v:
		return ids.New(m[1])
	case isoBareID.MatchString(v):
		return ids.Random(16)
	}
	// Any other value keeps its shape (a name's characters, a path's slashes), so that it is
	// refused for its form exactly when B's is: each letter and digit is drawn again.
	const lower, upper, digits = "abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "0123456789"
	seed := []byte(ids.Random(len(v) + 1))
	out := []rune(v)
	for i, r := range out {
		n := int(seed[i%len(seed)])
		switch {
		case r >= 'a' && r <= 'z':
			out[i] = rune(lower[n%26])
		case r >= 'A' && r <= 'Z':
			out[i] = rune(upper[n%26])
		case r >= '0' && r <= '9':
			out[i] = rune(digits[n%10])
		}
	}
	return string(out)
}

// ---- the document

// isoOp is an operation of the OpenAPI document.
type isoOp struct {
	key, method, path string
	pathParams        []string
	// fields are the names of its query parameters and of its JSON body's properties.
	fields []string
}

// isoIDLike says whether a query parameter or body property may carry a record's id or name:
// each such field of an operation must be sent with a value of B's by a case of the table.
func isoIDLike(name string) bool {
	switch name {
	case "id", "ids", "cursor", "name", "names", "path", "paths", "tag", "tags", "email":
		return true
	}
	return strings.HasSuffix(name, "_id") || strings.HasSuffix(name, "_ids")
}

// isoOps reads the operations of the OpenAPI document.
func isoOps(t *testing.T, raw []byte) []isoOp {
	t.Helper()
	var doc struct {
		OpenAPI    string                                `json:"openapi"`
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
		Components struct {
			Schemas map[string]struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil || doc.OpenAPI == "" || len(doc.Paths) == 0 {
		t.Fatalf("the OpenAPI document: %v: %.300s", err, raw)
	}
	var ops []isoOp
	for path, methods := range doc.Paths {
		for method, rawOp := range methods {
			var op struct {
				Parameters []struct {
					Name string `json:"name"`
					In   string `json:"in"`
				} `json:"parameters"`
				RequestBody struct {
					Content map[string]struct {
						Schema struct {
							Ref        string                     `json:"$ref"`
							Properties map[string]json.RawMessage `json:"properties"`
						} `json:"schema"`
					} `json:"content"`
				} `json:"requestBody"`
			}
			if method == "parameters" || json.Unmarshal(rawOp, &op) != nil {
				continue
			}
			o := isoOp{key: strings.ToUpper(method) + " " + path, method: strings.ToUpper(method), path: path}
			for _, p := range op.Parameters {
				switch p.In {
				case "path":
					o.pathParams = append(o.pathParams, p.Name)
				case "query":
					o.fields = append(o.fields, p.Name)
				}
			}
			for _, c := range op.RequestBody.Content {
				props := c.Schema.Properties
				if ref, ok := strings.CutPrefix(c.Schema.Ref, "#/components/schemas/"); ok {
					props = doc.Components.Schemas[ref].Properties
				}
				for name := range props {
					o.fields = append(o.fields, name)
				}
			}
			slices.Sort(o.fields)
			o.fields = slices.Compact(o.fields)
			ops = append(ops, o)
		}
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i].key < ops[j].key })
	return ops
}

// isoCoverage fails the test when the document and the table differ: an operation without a
// row, a row without an operation, a case that leaves a path parameter out, a path parameter
// never given a value of B's, an id-like field never sent with one.
func isoCoverage(t *testing.T, ops []isoOp, table map[string][]isoCase) {
	t.Helper()
	inDoc := map[string]bool{}
	for _, op := range ops {
		inDoc[op.key] = true
		cases, ok := table[op.key]
		if !ok || len(cases) == 0 {
			t.Errorf("the API has %s, which the isolation table does not cover: add its row to isoTable (which of B's records can it reach, by path, query or body?)", op.key)
			continue
		}
		for _, param := range op.pathParams {
			withB := false
			for i, c := range cases {
				kind, ok := c.params[param]
				if !ok {
					t.Errorf("%s: case %d gives path parameter %q no value", op.key, i, param)
				}
				withB = withB || ok && !strings.HasPrefix(kind, "a_")
			}
			if !withB {
				t.Errorf("%s: no case gives path parameter %q a value of B's", op.key, param)
			}
		}
		for i, c := range cases {
			for param := range c.params {
				if !slices.Contains(op.pathParams, param) {
					t.Errorf("%s: case %d gives a value to %q, which is not a path parameter of the operation", op.key, i, param)
				}
			}
		}
		for _, field := range op.fields {
			if !isoIDLike(field) {
				continue
			}
			sent := false
			for _, c := range cases {
				sent = sent || isoFieldKind(c, field) != ""
			}
			if !sent {
				t.Errorf("%s takes %q, which may name a record, and no case of the isolation table sends it with a value of B's", op.key, field)
			}
		}
	}
	for key := range table {
		if !inDoc[key] {
			t.Errorf("the isolation table has a row for %s, which the API no longer has: remove it (or fix its name)", key)
		}
	}
}

// ---- the sweep

// isoPhase orders the cases: reads first, then requests that address B's records, then the
// ones that create A's records named like B's (which would otherwise show in A's listings).
func isoPhase(w isoWant) int {
	switch w {
	case isoListed, isoListedOrRefused:
		return 0
	case isoCreated:
		return 2
	}
	return 1
}

// run sends the table's cases of the phase.
func (w *isoWorld) run(t *testing.T, ops []isoOp, table map[string][]isoCase, phase int) int {
	t.Helper()
	n := 0
	for _, op := range ops {
		for i, c := range table[op.key] {
			if isoPhase(c.want) != phase {
				continue
			}
			n++
			w.check(t, fmt.Sprintf("%s case %d", op.key, i), op, c, w.vals, c.want)
		}
	}
	return n
}

// variantValues are B's values of every kind (but cursors), and B's ids with another prefix
// (tol_ for a thr_ id, thr_ for the others) and with none.
func (w *isoWorld) variantValues() []string {
	var values []string
	for kind, v := range w.vals {
		if strings.HasPrefix(kind, "a_") || isoNoTwin[kind] {
			continue
		}
		values = append(values, v)
		if m := isoIDRE.FindStringSubmatch(v); m != nil && m[0] == v {
			rest := strings.TrimPrefix(v, m[1]+"_")
			other := "thr"
			if m[1] == "thr" {
				other = "tol"
			}
			values = append(values, other+"_"+rest, rest)
		}
	}
	slices.Sort(values)
	return slices.Compact(values)
}

// isoRelax is what a variant of a case must answer: a value of another kind may be refused
// for its form (400) where B's own gets 404, and a listing may refuse it.
func isoRelax(want isoWant) isoWant {
	switch want {
	case isoNotFound:
		return isoRefused
	case isoListed:
		return isoListedOrRefused
	case isoUnknownTool:
		return isoSameAsNone
	}
	return want
}

// variants sends cases again with every other value of B's (variantValues) in one place: the
// first case of each operation with path parameters, in each parameter; and, for each id-like
// query parameter or body field, the first case that sends it with a value of B's, in that
// field. Each answer must be the one a value that names nothing gets, a 4xx where the case
// expects 404, never a 5xx, and hold nothing of B's it was not sent.
func (w *isoWorld) variants(t *testing.T, ops []isoOp, table map[string][]isoCase) int {
	t.Helper()
	values := w.variantValues()
	n := 0
	send := func(op isoOp, c isoCase, where string, want isoWant) {
		for _, v := range values {
			if strings.HasPrefix(v, "/") && strings.HasPrefix(where, "path ") {
				continue // a URL path with // is cleaned by the HTTP server, which redirects
			}
			vals := isoCopy(w.vals)
			vals["variant"] = v
			n++
			w.check(t, fmt.Sprintf("%s with %s=%s", op.key, where, v), op, c, vals, isoRelax(want))
		}
	}
	for _, op := range ops {
		cases := table[op.key]
		if len(cases) == 0 {
			continue
		}
		for _, param := range op.pathParams {
			if cases[0].want == isoCreated {
				break // it would make records; the operation's other cases name B's
			}
			c := cases[0]
			c.params = isoCopy(c.params)
			c.params[param] = "variant"
			send(op, c, "path "+param, cases[0].want)
		}
		for _, field := range op.fields {
			if !isoIDLike(field) {
				continue
			}
			for _, c := range cases {
				kind := isoFieldKind(c, field)
				if kind == "" || c.want == isoCreated {
					continue
				}
				c.query = strings.ReplaceAll(c.query, "{"+kind+"}", "{variant}")
				c.body = strings.ReplaceAll(c.body, "{"+kind+"}", "{variant}")
				send(op, c, "field "+field, c.want)
				break
			}
		}
	}
	return n
}

// isoFieldKind is the kind of B's value the case sends in field (a query parameter or a
// top-level body property), "" when it sends none.
func isoFieldKind(c isoCase, field string) string {
	var in []string
	if q, err := url.ParseQuery(c.query); err == nil {
		in = append(in, q[field]...)
	}
	var body map[string]json.RawMessage
	if c.body != "" && json.Unmarshal([]byte(c.body), &body) == nil {
		if v, ok := body[field]; ok {
			in = append(in, string(v))
		}
	}
	for _, v := range in {
		for _, m := range isoPlaceholder.FindAllStringSubmatch(v, -1) {
			if !strings.HasPrefix(m[1], "a_") {
				return m[1]
			}
		}
	}
	return ""
}

// isoSameAsNone: any answer but a 5xx, the same as for a value that names nothing.
const isoSameAsNone isoWant = -1

func isoCopy(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// check sends the case with A's key, and its twin (the same request with values that name
// nothing in place of B's), and checks the answer.
func (w *isoWorld) check(t *testing.T, what string, op isoOp, c isoCase, vals map[string]string, want isoWant) {
	t.Helper()
	req, err := isoBuild(op, c, vals)
	if err != nil {
		t.Errorf("%s: %v", what, err)
		return
	}
	r := w.send(t, w.keyA, req)
	fail := func(format string, args ...any) {
		t.Helper()
		t.Errorf("%s: %s\n  answered %s\n  %s", what, req, r, fmt.Sprintf(format, args...))
	}
	var allow []string
	for _, k := range c.allow {
		allow = append(allow, vals[k])
	}
	if leaks := w.leaks(req, r, allow); len(leaks) > 0 {
		fail("the answer holds B's %q", leaks)
	}
	ok2xx, ok4xx := r.status >= 200 && r.status < 300, r.status >= 400 && r.status < 500
	var problem struct {
		Code   string `json:"code"`
		Result struct {
			Status string `json:"status"`
			Code   string `json:"code"`
		} `json:"result"`
	}
	_ = json.Unmarshal(r.body, &problem)
	switch {
	case r.status >= 500:
		fail("a 5xx: the server failed on another workspace's value")
		return
	case want == isoNotFound && (r.status != http.StatusNotFound || problem.Code != server.CodeNotFound):
		fail("want 404 not_found")
	case want == isoRefused && !ok4xx:
		fail("want a 4xx")
	case want == isoListed && !ok2xx, want == isoCreated && !ok2xx:
		fail("want a 2xx")
	case want == isoListedOrRefused && !ok2xx && !ok4xx:
		fail("want a 2xx or a 4xx")
	case want == isoUnknownTool && (r.status != http.StatusOK || problem.Result.Status != "error" || problem.Result.Code != "unknown_tool"):
		fail("want 200 with an unknown_tool result")
	}
	if want == isoCreated {
		return // its twin would make another record; the answer names A's new one
	}
	// The twin: B's values replaced by values that name nothing, each once for the whole case.
	subst := map[string]string{} // twin value → B's value
	twinVals := isoCopy(vals)
	for _, kind := range isoKinds(c) {
		if strings.HasPrefix(kind, "a_") {
			continue
		}
		if isoNoTwin[kind] {
			return // a cursor has no twin: the checks above are all there is
		}
		tw := isoTwin(vals[kind])
		twinVals[kind] = tw
		subst[tw] = vals[kind]
	}
	twinReq, err := isoBuild(op, c, twinVals)
	if err != nil {
		t.Errorf("%s: %v", what, err)
		return
	}
	tr := w.send(t, w.keyA, twinReq)
	if diff := isoSame(r, tr, subst); diff != "" {
		fail("the answer differs from the one values that name nothing get (%s), which tells that B's exist: %s\n  that answer: %s", twinReq, diff, tr)
	}
}

// isoSame compares an answer to the twin's, with the twin's values put back to B's: the
// same status and, for an error, the same problem; for a call, the same result status and code.
func isoSame(r, twin isoResp, subst map[string]string) string {
	if r.status != twin.status {
		return fmt.Sprintf("status %d, not %d", r.status, twin.status)
	}
	if r.status >= 200 && r.status < 300 {
		var a, b struct {
			Result *struct {
				Status string `json:"status"`
				Code   string `json:"code"`
			} `json:"result"`
		}
		_ = json.Unmarshal(r.body, &a)
		_ = json.Unmarshal(twin.body, &b)
		if (a.Result == nil) != (b.Result == nil) || a.Result != nil && *a.Result != *b.Result {
			return "another result"
		}
		return ""
	}
	body := twin.body
	keys := make([]string, 0, len(subst))
	for k := range subst {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return len(keys[i]) > len(keys[j]) })
	for _, k := range keys {
		body = bytes.ReplaceAll(body, []byte(k), []byte(subst[k]))
		body = bytes.ReplaceAll(body, []byte(url.PathEscape(k)), []byte(url.PathEscape(subst[k])))
	}
	if !bytes.Equal(bytes.TrimSpace(r.body), bytes.TrimSpace(body)) {
		return "another body"
	}
	return ""
}

// leaks returns the values of B's that the answer holds and the request did not send (nor
// allow names): in the body or the headers, as they are or escaped in JSON. A request that
// sent no "zulu" must get an answer without it.
func (w *isoWorld) leaks(req isoReq, r isoResp, allow []string) []string {
	sent := req.sent()
	got := string(r.body) + "\n" + string(r.header)
	var out []string
	for _, m := range w.markers {
		if strings.Contains(sent, m) || slices.Contains(allow, m) {
			continue
		}
		esc, _ := json.Marshal(m)
		if strings.Contains(got, m) || strings.Contains(got, string(esc[1:len(esc)-1])) {
			out = append(out, m)
		}
	}
	if !strings.Contains(strings.ToLower(sent), "zulu") && strings.Contains(strings.ToLower(got), "zulu") && len(allow) == 0 && !slices.Contains(out, "zulu") {
		out = append(out, "zulu")
	}
	return out
}

// ---- MCP

type isoBearer struct{ key string }

func (b isoBearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return http.DefaultTransport.RoundTrip(r)
}

// mcpSessionless connects an MCP client of the sessionless protocol (2026-07-28) with the key,
// closed when the test ends.
func (w *isoWorld) mcpSessionless(t *testing.T, key string) *sdk.ClientSession {
	t.Helper()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "isolation-test", Version: "1"}, nil).Connect(context.Background(),
		&sdk.StreamableClientTransport{Endpoint: w.url + "/mcp", MaxRetries: -1, HTTPClient: &http.Client{Transport: isoBearer{key}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// mcpSession opens an MCP session (2025-11-25) with the key, closed when the test ends.
func (w *isoWorld) mcpSession(t *testing.T, key string) *sdk.ClientSession {
	t.Helper()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "isolation-test", Version: "1"}, nil).Connect(context.Background(),
		&sdk.StreamableClientTransport{Endpoint: w.url + "/mcp", MaxRetries: -1, HTTPClient: &http.Client{Transport: isoBearer{key}}}, &sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func isoToolNames(t *testing.T, cs *sdk.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	return names
}

// isoText is the text of a tool result.
func isoText(r *sdk.CallToolResult) string {
	var parts []string
	for _, c := range r.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// mcp checks MCP with A's key: A's session lists none of B's tools, and a call of one of B's
// tools by name is the error result of a tool that does not exist; B's session does not
// answer A's key, whatever the method, and still answers B's afterwards.
func (w *isoWorld) mcp(t *testing.T) int {
	t.Helper()
	n := 0
	for _, cs := range []*sdk.ClientSession{w.mcpSession(t, w.keyA), w.mcpSessionless(t, w.keyA)} {
		n += w.mcpTools(t, cs)
	}
	n += w.mcpThreads(t)

	// B's session, with A's key: refused whatever the method; without a key: 401.
	sid := w.bSession.ID()
	hdr := map[string]string{"Mcp-Session-Id": sid, "Accept": "application/json, text/event-stream", "Mcp-Protocol-Version": "2025-06-18"}
	for _, tt := range []struct {
		key  string
		req  isoReq
		want func(int) bool
	}{
		{w.keyA, isoReq{method: "POST", path: "/mcp", body: `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`, header: hdr}, isoClientError},
		{w.keyA, isoReq{method: "POST", path: "/mcp", body: `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"zulu_server","arguments":{"x":1}}}`, header: hdr}, isoClientError},
		{w.keyA, isoReq{method: "POST", path: "/mcp", body: `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`, header: hdr}, isoClientError},
		{w.keyA, isoReq{method: "GET", path: "/mcp", header: hdr}, isoClientError},
		{w.keyA, isoReq{method: "DELETE", path: "/mcp", header: hdr}, isoClientError},
		{"", isoReq{method: "POST", path: "/mcp", body: `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`, header: hdr}, func(s int) bool { return s == http.StatusUnauthorized }},
		{"", isoReq{method: "DELETE", path: "/mcp", header: hdr}, func(s int) bool { return s == http.StatusUnauthorized }},
		// Without a session (2026-07-28), without a key: 401 as well.
		{"", isoReq{method: "POST", path: "/mcp", body: `{"jsonrpc":"2.0","id":10,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`,
			header: map[string]string{"Accept": "application/json, text/event-stream", "Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"}},
			func(s int) bool { return s == http.StatusUnauthorized }},
	} {
		n++
		r := w.send(t, tt.key, tt.req)
		who := "A's key"
		if tt.key == "" {
			who = "no key"
		}
		if !tt.want(r.status) {
			t.Errorf("%s with B's MCP session id and %s: %s, want it refused", tt.req, who, r)
		}
		if leaks := w.leaks(tt.req, r, nil); len(leaks) > 0 {
			t.Errorf("%s with B's MCP session id and %s: the answer holds B's %q", tt.req, who, leaks)
		}
	}
	if names := isoToolNames(t, w.bSession); !slices.Contains(names, "zulu_server") {
		t.Errorf("B's MCP session after A's attempts lists %v, want B's tools still", names)
	}
	return n
}

// mcpTools checks what an MCP client with A's key (cs: of a session, or of the sessionless
// protocol) is served: a tools/list with none of B's tools, and a call of one of B's tools by
// name is the error result of a tool that does not exist.
func (w *isoWorld) mcpTools(t *testing.T, cs *sdk.ClientSession) int {
	t.Helper()
	ctx := context.Background()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := 1
	listed, _ := json.Marshal(res)
	if leaks := w.leaks(isoReq{method: "MCP", path: "tools/list"}, isoResp{body: listed}, nil); len(leaks) > 0 {
		t.Errorf("MCP tools/list with A's key holds B's %q", leaks)
	}
	for _, kind := range []string{"tool_name", "client_tool_name", "confirm_tool_name", "deleted_tool_name"} {
		name := w.vals[kind]
		call := func(name string) *sdk.CallToolResult {
			r, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: map[string]any{"x": 1, "path": "/etc/motd"}})
			if err != nil {
				t.Fatalf("MCP tools/call %s with A's key: %v", name, err)
			}
			return r
		}
		r, twinName := call(name), isoTwin(name)
		twin := call(twinName)
		n += 2
		got, _ := json.Marshal(r)
		if leaks := w.leaks(isoReq{method: "MCP", path: "tools/call", body: name}, isoResp{body: got}, nil); len(leaks) > 0 {
			t.Errorf("MCP tools/call %s with A's key: the result holds B's %q: %s", name, leaks, got)
		}
		if !r.IsError || isoText(r) != strings.ReplaceAll(isoText(twin), twinName, name) {
			t.Errorf("MCP tools/call %s with A's key: %s (error %v), want the result of a tool that does not exist: %s", name, isoText(r), r.IsError, isoText(twin))
		}
	}
	return n
}

// mcpThreads checks that a tools/call of the sessionless protocol with A's key that names one of
// B's threads is refused, and leaves nothing on it.
func (w *isoWorld) mcpThreads(t *testing.T) int {
	t.Helper()
	ctx := context.Background()
	cs := w.mcpSessionless(t, w.keyA)
	n := 0
	for _, kind := range []string{"thread", "run_thread", "confirm_thread", "mcp_thread"} {
		before, err := w.st.Messages(ctx, w.b, w.vals[kind], store.Page{Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		params := &sdk.CallToolParams{Name: w.vals["a_echo"], Arguments: map[string]any{"text": "from A"}, Meta: sdk.Meta{"io.quiver/threadId": w.vals[kind]}}
		res, err := cs.CallTool(ctx, params)
		n++
		if err == nil || !strings.Contains(err.Error(), "is not one of this workspace's") {
			t.Errorf("MCP tools/call with A's key naming B's %s: %+v, %v; want it refused", kind, res, err)
		}
		after, err := w.st.Messages(ctx, w.b, w.vals[kind], store.Page{Limit: 1000})
		if err != nil || len(after) != len(before) {
			t.Errorf("B's %s held %d messages, %d after A's call naming it (%v)", kind, len(before), len(after), err)
		}
	}
	return n
}

func isoClientError(s int) bool { return s >= 400 && s < 500 }

// ---- variables

// variables checks that B's values never resolve in A: a tool of A's that reads variables of
// the names B set (on Sam's user, its instance, its agent, its thread), called by Sam (a member
// of both) on a thread of A's for the same agent, finds only A's own value.
func (w *isoWorld) variables(t *testing.T) int {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	samID := w.shared[0]
	// A's own values, on the same layers: that they resolve shows that B's would have been
	// looked for.
	ctx := context.Background()
	must(w.resolver.Set(ctx, w.a, quiver.LayerInstance, "", vars.Value{Name: "ZULU_REGION", Value: "acme region"}))
	must(w.resolver.Set(ctx, w.a, quiver.LayerUser, samID, vars.Value{Name: "ACME_SAM", Value: "acme sam"}))
	must(w.resolver.Set(ctx, w.a, quiver.LayerAgent, "iso_client", vars.Value{Name: "ACME_AGENT", Value: "acme agent"}))
	var key struct {
		Secret string `json:"secret"`
	}
	w.expect(t, w.keyA, "POST", "/v1/keys", `{"user_id":"`+samID+`","role":"member","name":"sam in acme"}`, 201, &key)
	var th, fn struct {
		ID string `json:"id"`
	}
	w.expect(t, key.Secret, "POST", "/v1/threads", `{"agent":"iso_client"}`, 201, &th)
	w.expect(t, w.keyA, "POST", "/v1/functions", `{"name":"acme_vars"}`, 201, &fn)
	names := []string{"ZULU_SAM_TOKEN", "ZULU_REGION", "ZULU_AGENT", "ZULU_PLAIN", "ZULU_SECRET", "ACME_SAM", "ACME_AGENT"}
	code := `export default function (args, state) {
		const names = ` + isoJSON(names) + `;
		const seen = {};
		names.forEach((n, i) => { seen["v" + i] = state.env(n) ? "set" : "unset"; });
		return seen;
	}`
	var decls []map[string]any
	for i, n := range names {
		decls = append(decls, map[string]any{"name": n, "type": []string{"secret", "text", "text", "text", "secret", "text", "text"}[i]})
	}
	input := map[string]any{"type": "object", "description": "Says which variables it sees.", "variables": decls}
	w.expect(t, w.keyA, "POST", "/v1/functions/"+fn.ID+"/versions", isoJSON(map[string]any{"code": code, "input_schema": input}), 201, nil)
	w.expect(t, w.keyA, "POST", "/v1/tools", isoJSON(map[string]any{"name": "acme_vars", "target": "server", "function_id": fn.ID,
		"runtime_user_id": samID, "input_schema": input}), 201, nil)
	req := isoReq{method: "POST", path: "/v1/tools/acme_vars/call", body: `{"args":{},"thread_id":"` + th.ID + `"}`}
	r := w.send(t, key.Secret, req)
	var out struct {
		Result quiver.Result `json:"result"`
	}
	if err := json.Unmarshal(r.body, &out); err != nil || r.status != http.StatusOK || out.Result.IsError() {
		t.Fatalf("%s with Sam's key in A: %s", req, r)
	}
	if got, want := string(out.Result.Value), `{"v0":"unset","v1":"set","v2":"unset","v3":"unset","v4":"unset","v5":"set","v6":"set"}`; got != want {
		t.Errorf("A's tool reading variables of the names B set sees %s (in the order %v), want only A's own values: %s", got, names, want)
	}
	if leaks := w.leaks(req, r, nil); len(leaks) > 0 {
		t.Errorf("%s with Sam's key in A: the answer holds B's %q", req, leaks)
	}
	return 1
}

// ---- B's state

// isoSnap is B's state, read from the store: what no request of A's may change.
type isoSnap struct {
	Workspace *store.Workspace                    `json:"workspace"`
	Members   []isoSnapMember                     `json:"members"`
	Keys      []isoSnapKey                        `json:"keys"`
	Tools     []*store.Tool                       `json:"tools"`
	Schemas   map[string]*store.Schema            `json:"schemas"`
	Functions []*store.Function                   `json:"functions"`
	Versions  map[string][]*store.FunctionVersion `json:"versions"`
	Variables map[string][]*store.Variable        `json:"variables"`
	Threads   []*isoSnapThread                    `json:"threads"`
	OpenAPI   []*store.OpenAPISource              `json:"openapi_sources"`
}

type isoSnapMember struct {
	Membership *store.Membership `json:"membership"`
	User       *store.User       `json:"user"`
}

type isoSnapKey struct {
	Key  *store.APIKey `json:"key"`
	Hash []byte        `json:"hash"`
}

type isoSnapThread struct {
	Thread    *store.Thread     `json:"thread"`
	Messages  []*store.Message  `json:"messages"`
	Pending   []store.ToolCall  `json:"pending"`
	Decisions []*store.Decision `json:"decisions"`
	Children  []*store.Thread   `json:"children"`
	Variables []*store.Variable `json:"variables"`
	Files     []isoSnapFile     `json:"files"`
}

type isoSnapFile struct {
	Info *store.FileInfo `json:"info"`
	Data string          `json:"data"`
}

// snapshot reads B's state from the store (its keys' last use left out: B's own requests set
// it), as indented JSON.
func (w *isoWorld) snapshot(t *testing.T) []byte {
	t.Helper()
	ctx := context.Background()
	if err := w.p.Flush(ctx); err != nil { // the calls recorded so far reach the store
		t.Fatal(err)
	}
	st, ws := w.st, w.b
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	s := &isoSnap{Schemas: map[string]*store.Schema{}, Versions: map[string][]*store.FunctionVersion{}, Variables: map[string][]*store.Variable{}}
	var err error
	s.Workspace, err = st.Workspace(ctx, ws)
	must(err)
	ms, err := st.Members(ctx, ws)
	must(err)
	owners := []string{"instance:", "agent:iso_client", "agent:iso_confirm", "prompt:iso_client", "prompt:iso_confirm"}
	for _, m := range ms {
		u, err := st.User(ctx, m.UserID)
		must(err)
		s.Members = append(s.Members, isoSnapMember{m, u})
		owners = append(owners, "user:"+m.UserID)
	}
	ks, err := st.APIKeys(ctx, ws)
	must(err)
	for _, k := range ks {
		k.LastUsedAt = nil // B's own requests touch it
		s.Keys = append(s.Keys, isoSnapKey{k, k.Hash})
	}
	schema := func(id string) {
		if id == "" || s.Schemas[id] != nil {
			return
		}
		sc, err := st.Schema(ctx, ws, id)
		must(err)
		s.Schemas[id] = sc
	}
	f := store.ToolFilter{WorkspaceID: ws, Deleted: store.DeletedInclude, Limit: store.MaxListLimit}
	for {
		page, err := st.ListTools(ctx, f)
		must(err)
		for _, tl := range page.Tools {
			s.Tools = append(s.Tools, tl)
			schema(tl.InputSchemaID)
			schema(tl.OutputSchemaID)
		}
		if page.NextCursor == "" {
			break
		}
		f.Cursor = page.NextCursor
	}
	s.Functions, err = st.Functions(ctx, ws)
	must(err)
	for _, fn := range s.Functions {
		vs, err := st.FunctionVersions(ctx, ws, fn.ID)
		must(err)
		s.Versions[fn.ID] = vs
		for _, v := range vs {
			schema(v.InputSchemaID)
			schema(v.OutputSchemaID)
		}
	}
	s.OpenAPI, err = st.OpenAPISources(ctx, ws)
	must(err)
	for _, o := range owners {
		layer, owner, _ := strings.Cut(o, ":")
		vs, err := st.Variables(ctx, ws, store.VariableLayer(layer), owner)
		must(err)
		s.Variables[o] = vs
	}
	var threads []*store.Thread
	tf := store.ThreadFilter{Limit: 100}
	for {
		page, next, err := st.Threads(ctx, ws, tf)
		must(err)
		threads = append(threads, page...)
		if next == "" {
			break
		}
		tf.Cursor = next
	}
	for _, item := range threads {
		th := &isoSnapThread{}
		th.Thread, err = st.Thread(ctx, ws, item.ID)
		must(err)
		th.Messages, err = st.Messages(ctx, ws, item.ID, store.Page{Limit: 1000})
		must(err)
		th.Pending, err = st.PendingCalls(ctx, ws, item.ID)
		must(err)
		th.Decisions, err = st.Decisions(ctx, ws, item.ID)
		must(err)
		th.Children, err = st.Children(ctx, ws, item.ID)
		must(err)
		th.Variables, err = st.Variables(ctx, ws, store.LayerThread, item.ID)
		must(err)
		th.Files = isoFiles(t, st, ws, item.ID, "/")
		s.Threads = append(s.Threads, th)
	}
	sort.Slice(s.Threads, func(i, j int) bool { return s.Threads[i].Thread.ID < s.Threads[j].Thread.ID })
	out, err := json.MarshalIndent(s, "", "  ")
	must(err)
	return out
}

// isoFiles reads every file of a thread's file system under dir.
func isoFiles(t *testing.T, st isoStore, ws, thread, dir string) []isoSnapFile {
	t.Helper()
	ctx := context.Background()
	entries, err := st.ReadDir(ctx, ws, thread, dir)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []isoSnapFile
	for _, e := range entries {
		if e.IsDir {
			out = append(out, isoSnapFile{Info: e})
			out = append(out, isoFiles(t, st, ws, thread, e.Path)...)
			continue
		}
		data, info, err := st.ReadFile(ctx, ws, thread, e.Path)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, isoSnapFile{Info: info, Data: string(data)})
	}
	return out
}

// markers are B's values no answer to A may hold: every id in B's snapshot and every string
// holding "zulu", and the secrets; never the values of Sam, who is a member of both.
func (w *isoWorld) setMarkers(t *testing.T, snap []byte) {
	t.Helper()
	var v any
	if err := json.Unmarshal(snap, &v); err != nil {
		t.Fatal(err)
	}
	set := map[string]bool{}
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				walk(k)
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		case string:
			for _, id := range isoIDRE.FindAllString(x, -1) {
				set[id] = true
			}
			if strings.Contains(strings.ToLower(x), "zulu") {
				set[x] = true
			}
		}
	}
	walk(v)
	// What the store keeps of secrets: sealed values and key hashes.
	var snapshot isoSnap
	if err := json.Unmarshal(snap, &snapshot); err != nil {
		t.Fatal(err)
	}
	vs := slices.Concat(slices.Collect(maps.Values(snapshot.Variables))...)
	for _, th := range snapshot.Threads {
		vs = append(vs, th.Variables...)
	}
	for _, v := range vs {
		if v.Secret {
			set[v.Value] = true
		}
	}
	for _, th := range snapshot.Threads {
		for _, f := range th.Files {
			if !f.Info.IsDir {
				set[f.Info.Path] = true // an attachment's path holds no "zulu"
			}
		}
	}
	for _, k := range snapshot.Keys {
		set[base64.StdEncoding.EncodeToString(k.Hash)] = true
		set[hex.EncodeToString(k.Hash)] = true
	}
	for _, s := range w.secrets {
		if s != "" {
			set[s] = true
		}
	}
	for _, s := range w.shared {
		delete(set, s)
	}
	w.markers = w.markers[:0]
	for m := range set {
		if len(m) >= 6 { // shorter ones would be found by chance; "zulu" itself is looked for anyway
			w.markers = append(w.markers, m)
		}
	}
	sort.Strings(w.markers)
	for _, m := range []string{w.vals["thread"], w.vals["tool"], w.vals["key"], w.keyB, w.vals["function"], w.vals["version"]} {
		if !set[m] {
			t.Fatalf("B's value %s is not among the markers", m)
		}
	}
}

// isoDiff shows where two snapshots differ.
func isoDiff(before, after []byte) string {
	a, b := strings.Split(string(before), "\n"), strings.Split(string(after), "\n")
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	lo := max(0, i-8)
	hiA, hiB := min(len(a), i+8), min(len(b), i+8)
	return fmt.Sprintf("first difference at line %d\nbefore:\n%s\nafter:\n%s", i+1,
		strings.Join(a[lo:hiA], "\n"), strings.Join(b[lo:hiB], "\n"))
}

// controls sends the GET cases that must be 404 for A with B's key: B reaches each of them,
// so the 404s were not for values that name nothing.
func (w *isoWorld) controls(t *testing.T, ops []isoOp, table map[string][]isoCase) int {
	t.Helper()
	n := 0
	for _, op := range ops {
		if op.method != http.MethodGet {
			continue
		}
		for i, c := range table[op.key] {
			if c.want != isoNotFound || slices.ContainsFunc(isoKinds(c), func(k string) bool { return strings.HasPrefix(k, "a_") }) {
				continue
			}
			req, err := isoBuild(op, c, w.vals)
			if err != nil {
				t.Errorf("%s case %d: %v", op.key, i, err)
				continue
			}
			n++
			if r := w.send(t, w.keyB, req); r.status != http.StatusOK {
				t.Errorf("%s case %d with B's own key: %s, want 200 (the case's values must be B's records)", op.key, i, r)
			}
		}
	}
	return n
}

// ---- the test

// TestIsolation is the isolation suite of issue 13, on SQLite and PostgreSQL.
func TestIsolation(t *testing.T) {
	isoEach(t, func(t *testing.T, be isoBackend) {
		w := newIsoWorld(t, be)
		doc := w.send(t, w.keyA, isoReq{method: "GET", path: "/v1/openapi.json"})
		if doc.status != http.StatusOK {
			t.Fatalf("GET /v1/openapi.json: %s", doc)
		}
		ops := isoOps(t, doc.body)
		table := isoTable()
		isoCoverage(t, ops, table)

		before := w.snapshot(t)
		w.setMarkers(t, before)
		if leaks := w.leaks(isoReq{method: "GET", path: "/v1/openapi.json"}, doc, nil); len(leaks) > 0 {
			t.Errorf("the OpenAPI document holds B's %q", leaks)
		}
		reads := w.run(t, ops, table, 0)
		records := w.run(t, ops, table, 1)
		variants := w.variants(t, ops, table)
		mcp := w.mcp(t)
		creates := w.run(t, ops, table, 2)
		creates += w.variables(t)

		if after := w.snapshot(t); !bytes.Equal(before, after) {
			t.Errorf("B's state changed during A's requests: %s", isoDiff(before, after))
		}
		controls := w.controls(t, ops, table)
		t.Logf("%d operations; with A's admin key: %d listings, %d requests naming B's records, %d with B's other values in their path parameters and id-like fields, %d MCP requests, %d creations (each but the creations and cursors also sent with values that name nothing); %d reads with B's own key; %d markers of B's",
			len(ops), reads, records, variants, mcp, creates, controls, len(w.markers))
	})
}
