// Package config is the configuration file of a Quiver server or fleet (quiver.yaml): the remote
// MCP servers, OpenAPI documents and A2A agents whose tools every workspace shares, the
// operator's governance rules over every tool, the identity provider tokens come from, and
// who may see and call which tool of the server's own workspace (its entitlements). It
// parses and checks the file, naming the entry and field of every mistake, and turns its
// entries into what the packages that make the tools take, the rules (Rules) and the part a
// fleet keeps in its database (Shared).
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/quiverhq/quiver/openapi"

	"go.yaml.in/yaml/v3"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/mcp"
	"github.com/quiverhq/quiver/platform/connect"
	"github.com/quiverhq/quiver/platform/entitle"
	"github.com/quiverhq/quiver/platform/limits"
	"github.com/quiverhq/quiver/store"
)

// FileName is the configuration file looked for in the data directory.
const FileName = "quiver.yaml"

// File is the configuration file (YAML, or JSON, which YAML reads too):
//
//	mcp:
//	  servers:
//	    - name: everything            # tools are imported as everything.<tool>
//	      command: npx                # a server speaking MCP over stdio...
//	      args: ["-y", "@modelcontextprotocol/server-everything"]
//	      env: {DEBUG: "0"}
//	      dir: /srv/tools             # the command's working directory
//	      timeout: 30s                # per call; default 60s
//	    - name: search
//	      url: https://mcp.example.com/mcp   # ...or over streamable HTTP
//	      headers: {Authorization: "Bearer ${SEARCH_TOKEN}"}
//	    - name: tracker
//	      url: https://tracker.example.com/mcp
//	      oauth:                      # OAuth 2.1: a user authorizes Quiver once
//	        client_id: quiver         # a client registered beforehand (optional: without
//	        client_secret: ${TRACKER_SECRET} # one Quiver registers itself)
//	        client_metadata_url: https://quiver.example.com/client.json # optional (CIMD)
//	        redirect_url: https://quiver.example.com/oauth/callback     # default: this server's
//	        scopes: [read, write]     # default: what the server asks for
//	      requires_confirmation: true # every call of its tools waits for a person's decision
//	    - name: github
//	      url: https://api.githubcopilot.com/mcp/
//	      headers: {Authorization: "Bearer ${GITHUB_LIST_TOKEN}"} # lists the tools...
//	      connection: {provider: github, scopes: [repo]} # ...each call carries its person's token
//
//	openapi:                        # each operation of an OpenAPI document becomes a tool
//	  - name: petstore              # tools are petstore.<operationId>
//	    document: petstore.yaml     # a file (relative to this one) or an http(s) URL
//	    servers: [https://petstore.example.com/api] # default: the document's
//	    operations: [findPets, "tag:pets", "DELETE /pets/{id}"] # default: all
//	    credentials: {api_key: PETSTORE_KEY} # scheme: secret variable (default PETSTORE_API_KEY)
//	    connections: {oauth: {provider: petstore-id, scopes: [read]}} # scheme: the caller's own token
//	    timeout: 30s                # per call; default 30s
//	    max_response_bytes: 1048576 # default 1 MiB
//	    max_operations: 2000        # the cap of tools it makes; default 1000, at most 10000
//	    strict: true                # an answer unlike the document's schema is a failed call
//	    requires_confirmation: true # every operation waits for a person's decision...
//	    governance:                 # ...or rules for some of them (source: openapi:petstore)
//	      - when: {readOnlyHint: false}     # every operation that is not a GET
//	        requires_confirmation: true
//	      - tools: [petstore.deletePet]
//	        access: deny
//
//	a2a:                            # agents of other platforms, over A2A, as tools
//	  agents:
//	    - name: weather             # the tool's name
//	      url: https://agents.example.com/weather   # the agent (its card under it) or its card
//	      headers: {X-API-Key: "${WEATHER_AGENT_KEY}"}
//	      timeout: 5m               # per call; default 5m
//	      requires_confirmation: true
//	      connection: {provider: acme-id, scopes: [agents]} # the caller's own token as bearer
//
//	governance:                     # rules over every tool of every workspace, whatever its
//	  - source: "mcp:*"             # source: a Go function, a stored tool, an OpenAPI
//	    when: {destructiveHint: true} # operation, a remote MCP tool, an A2A agent, a prompt
//	    requires_confirmation: true # (see quiver.Rule; mcp servers and a2a agents take a
//	  - tools: ["*"]                # governance list of their own too)
//	    timeout: 2m
//	  - when: {idempotentHint: true, openWorldHint: false}
//	    annotations: {title: Safe to retry, readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false}
//	  - tools: [petstore.findPets]  # one tool, by its exact name
//	    provider_name: find_pets    # the name model providers are offered it under
//
//	oidc:                           # access tokens of an identity provider (quiver serve's
//	  issuer: https://id.example.com/ # --oidc-* flags, which take precedence)
//	  audiences: [https://quiver.example.com/mcp]
//	  require_at_jwt: true          # the provider types its access tokens at+jwt (RFC 9068)
//	  console_client_id: quiver-console
//	  console_scopes: [openid, profile, email]   # the default
//	  console_params: {audience: https://quiver.example.com/mcp}  # resource: "" leaves it out
//	  rules:
//	    - {claim: groups, value: engineering, workspace: wsp_..., role: member}
//
//	entitlements:                   # who may see and call which tool in the server's own
//	  default: allow                # workspace (deny wins; see docs/guides/entitlements.md)
//	  toolsets:                     # named sets of tools
//	    - name: support             # served at /mcp/support; a key may be bound to it
//	      description: What the support team works with # shown where toolsets are listed
//	      include:                  # its tools: those any of these selects
//	        - tools: [lookup_order, refund_payment]
//	        - source: "openapi:tickets"
//	          when: {readOnlyHint: true}
//	  rules:
//	    - who: {role: viewer}       # the callers it applies to (none set: every caller)
//	      when: {readOnlyHint: true}
//	      access: allow             # an allow list: viewers may call the read-only tools alone
//	    - who:
//	        claim: groups
//	        value: contractors      # a token whose groups claim holds contractors
//	      tools: [refund_payment]
//	      access: deny              # deny wins over every allow
//	      description: Contractors never refund
//	    - who: {agent: "triage*"}
//	      toolset: support          # the tools of a toolset
//	      access: allow
//	    - who: {key: key_..., user: usr_..., toolset: support}
//	      source: "mcp:*"
//	      access: deny
//	connections:                    # where the server's own workspace's people connect their own
//	  providers:                    # accounts (see docs/guides/connections.md)
//	    - name: github              # tools name it; its redirect URI: PUBLIC_URL/connections/callback
//	      description: Your GitHub account
//	      authorization_url: https://github.com/login/oauth/authorize
//	      token_url: https://github.com/login/oauth/access_token
//	      revocation_url: https://auth.example.com/oauth2/revoke # tokens revoked on disconnect
//	      client_id: Iv1.0123456789abcdef
//	      client_secret_variable: GITHUB_CLIENT_SECRET # a workspace secret variable
//	      scopes: [repo, read:user]  # the scopes on offer
//	    - name: acme
//	      issuer: https://auth.acme.example # the endpoints left out: from its metadata
//	      client_id: quiver
//
//	limits:                         # how often callers may call in the server's own workspace
//	  limits:                       # (see docs/guides/limits.md)
//	    - name: each-key            # refusals name it
//	      description: Every key's share
//	      per: [key]                # counted per key, user, agent, toolset or tool
//	      calls: {per_second: 10, per_minute: 100, per_hour: 2000, per_day: 10000}
//	    - name: refunds
//	      who: {role: member}       # the callers it applies to, as entitlement rules name them
//	      tools: ["refund_*"]       # the tools it applies to
//	      source: "openapi:payments"
//	      when: {destructiveHint: true}
//	      per: [user]
//	      calls: {per_day: 20}
//	      concurrent: 2             # calls at once
//	    - name: each-user-budget    # model tokens and cost of agent runs (who alone selects)
//	      per: [user]
//	      tokens: {input_per_minute: 200000, input_per_day: 5000000, output_per_minute: 20000, output_per_day: 500000}
//	      cost: {per_day: 20, per_month: 300}  # by the prices below; a run over it pauses
//	  prices:                       # what model requests cost, for usage (docs/guides/usage.md)
//	    - model: "openai:gpt-4o*"   # a pattern over provider:model; the first that matches
//	      input_per_million: 2.5    # the price of a million input tokens, in your unit
//	      output_per_million: 10
//
// ${VAR} in env, header and oauth values (and an A2A agent's headers) is replaced by the environment variable VAR, so
// secrets need not be written in the file.
type File struct {
	// MCP holds the remote MCP servers whose tools every workspace shares.
	MCP MCP `yaml:"mcp" json:"mcp"`
	// OpenAPI are OpenAPI documents: each operation of one becomes a tool every workspace
	// shares.
	OpenAPI []OpenAPI `yaml:"openapi,omitempty" json:"openapi,omitempty"`
	// A2A holds the agents of other platforms, reached over A2A, that become tools every
	// workspace shares.
	A2A A2A `yaml:"a2a" json:"a2a"`
	// Governance are the operator's rules over every workspace's tools, before those of each
	// source's own governance list (see Rules).
	Governance []quiver.Rule `yaml:"governance,omitempty" json:"governance,omitempty"`
	// OIDC is the identity provider whose access tokens are accepted beside API keys, and the
	// rules that give a token a workspace and a role. quiver serve's --oidc-* flags take
	// precedence over it. Each node reads its own: quiver apply does not share it.
	OIDC *OIDC `yaml:"oidc,omitempty" json:"oidc,omitempty"`
	// Entitlements are the server's own workspace's entitlements (the workspace quiver serve
	// serves by default): applied to the database like the rest of the fleet's configuration,
	// they replace the workspace's stored document when they differ from it. Left out, the
	// stored document stays, for admins to set through the API or the console.
	Entitlements *entitle.Document `yaml:"entitlements,omitempty" json:"entitlements,omitempty"`
	// Limits are the server's own workspace's limits on how often its callers may call,
	// applied to the database as Entitlements are. Left out, the stored document stays, for
	// admins to set through the API.
	Limits *limits.Document `yaml:"limits,omitempty" json:"limits,omitempty"`
	// Connections are the providers the server's own workspace's people connect their own
	// accounts at (see docs/guides/connections.md), applied to the database as Entitlements
	// are. Left out, the stored document stays, for admins to set through the API or the
	// console.
	Connections *connect.Document `yaml:"connections,omitempty" json:"connections,omitempty"`

	// dir is the directory of the file, which relative document paths are read from.
	dir string
}

// MCP is the file's mcp block.
type MCP struct {
	// Servers are the remote MCP servers, each reached over stdio or streamable HTTP.
	Servers []MCPServer `yaml:"servers" json:"servers"`
}

// A2A is the file's a2a block.
type A2A struct {
	// Agents are the agents of other platforms: each one becomes a tool.
	Agents []A2AAgent `yaml:"agents" json:"agents"`
}

// A2AAgent is one agent of another platform in the configuration file (see [a2a.Remote]).
type A2AAgent struct {
	// Name is the tool's name, which calls and rules name it by.
	Name string `yaml:"name"`
	// URL is the agent's URL (its card is looked for under it) or its card's.
	URL string `yaml:"url"`
	// Headers: HTTP headers sent with every request to the agent; ${VAR} is replaced by the
	// environment variable VAR.
	Headers map[string]string `yaml:"headers,omitempty"`
	// Timeout is how long a call may take, as a Go duration (default 5m).
	Timeout string `yaml:"timeout,omitempty"`
	// RequiresConfirmation: every call waits for a person's decision.
	RequiresConfirmation bool `yaml:"requires_confirmation,omitempty"`
	// Connection: each call carries the calling person's token at a provider of the
	// workspace's connections as its bearer token (see docs/guides/connections.md).
	Connection *quiver.ConnectionNeed `yaml:"connection,omitempty"`
	// Governance are rules over this agent's tool (their source is a2a:NAME).
	Governance []quiver.Rule `yaml:"governance,omitempty"`
}

// OpenAPI is one OpenAPI document in the configuration file (see [openapi.Source]).
type OpenAPI struct {
	// Name is the tools' prefix: an operation listPets becomes NAME.listPets.
	Name string `yaml:"name"`
	// Document is the OpenAPI document: a file (relative to this one) or an http(s) URL.
	Document string `yaml:"document"`
	// Servers are the base URLs the tools call; only these are reached (default: the document's
	// servers).
	Servers []string `yaml:"servers,omitempty"`
	// Operations are the operations to make tools of: operationId, tag:NAME or "METHOD /path"
	// (default: all).
	Operations []string `yaml:"operations,omitempty"`
	// Credentials name a security scheme's secret variable, by scheme (default: NAME_SCHEME in
	// capitals).
	Credentials map[string]string `yaml:"credentials,omitempty"`
	// Connections send the calling person's token at a provider of the workspace's
	// connections, by security scheme (bearer, OAuth 2 or OpenID Connect), in place of a
	// variable: a person who has not connected it is asked to (see docs/guides/connections.md).
	Connections map[string]openapi.Connection `yaml:"connections,omitempty"`
	// Timeout is how long a call may take, as a Go duration (default 30s).
	Timeout string `yaml:"timeout,omitempty"`
	// MaxResponseBytes is the largest answer a call reads, in bytes (default 1 MiB).
	MaxResponseBytes int64 `yaml:"max_response_bytes,omitempty"`
	// MaxOperations raises the cap of operations the document's selection may have (see
	// openapi.Source.MaxOperations; default 1000, at most 10000).
	MaxOperations int `yaml:"max_operations,omitempty"`
	// Strict makes an answer that does not match the document's schema of it a failed call
	// (see openapi.Source.Strict).
	Strict bool `yaml:"strict,omitempty"`
	// RequiresConfirmation makes every operation's calls wait for a person's decision.
	RequiresConfirmation bool `yaml:"requires_confirmation,omitempty"`
	// Governance are rules over the document's tools (their source is openapi:NAME).
	Governance []quiver.Rule `yaml:"governance,omitempty"`
}

// OIDC is the oidc block: what [TokenAuth] takes, as quiver serve's --oidc-* flags give it.
type OIDC struct {
	// Issuer is the OpenID Connect issuer whose access tokens are accepted beside API keys.
	Issuer string `yaml:"issuer"`
	// Audiences are what a token's aud must hold one of (default: the server's resource
	// identifier, its public URL followed by /mcp).
	Audiences []string `yaml:"audiences,omitempty"`
	// RequireATJWT: refuse every token not typed at+jwt (RFC 9068).
	RequireATJWT bool `yaml:"require_at_jwt,omitempty"`
	// ConsoleClientID is a public client registered with the provider, for people's sign-in to the
	// console.
	ConsoleClientID string `yaml:"console_client_id,omitempty"`
	// ConsoleScopes are the scopes the console asks for (default: openid profile email).
	ConsoleScopes []string `yaml:"console_scopes,omitempty"`
	// ConsoleParams: more parameters of the console's authorization request (audience for Auth0;
	// resource: "" leaves the resource parameter out).
	ConsoleParams map[string]string `yaml:"console_params,omitempty"`
	// Rules: the rules that turn a token's claims into a workspace and a role.
	Rules []ClaimRule `yaml:"rules"`
}

// MCPServer is one remote MCP server in the configuration file.
type MCPServer struct {
	// Name is the server's name: its tools are NAME.TOOL.
	Name string `yaml:"name"`
	// Command is the command that starts a server speaking MCP over stdio (or url).
	Command string `yaml:"command,omitempty"`
	// Args are the command's arguments.
	Args []string `yaml:"args,omitempty"`
	// Env: environment variables added to the command's; ${VAR} is replaced by the environment
	// variable VAR.
	Env map[string]string `yaml:"env,omitempty"`
	// Dir is the command's working directory.
	Dir string `yaml:"dir,omitempty"`
	// URL is the URL of a server speaking MCP over streamable HTTP (or command).
	URL string `yaml:"url,omitempty"`
	// Headers: HTTP headers sent with every request to the server; ${VAR} is replaced by the
	// environment variable VAR.
	Headers map[string]string `yaml:"headers,omitempty"`
	// Timeout is how long a call may take, as a Go duration (default 60s).
	Timeout string `yaml:"timeout,omitempty"`
	// OAuth: OAuth 2.1 authorization for the server: a user authorizes Quiver once.
	OAuth *OAuth `yaml:"oauth,omitempty"`
	// Connection: each call carries the calling person's token at a provider of the
	// workspace's connections as its bearer token, in a session of their own (url servers
	// only; headers or oauth still list the tools; see docs/guides/connections.md).
	Connection *quiver.ConnectionNeed `yaml:"connection,omitempty"`
	// RequiresConfirmation makes every call of the server's tools wait for a person's decision.
	RequiresConfirmation bool `yaml:"requires_confirmation,omitempty"`
	// Governance are rules over the server's tools (their source is mcp:NAME).
	Governance []quiver.Rule `yaml:"governance,omitempty"`
}

// OAuth is the oauth block of a remote MCP server (see [mcp.OAuth]).
type OAuth struct {
	// ClientID is a client registered with the server's authorization server beforehand (default:
	// Quiver registers itself).
	ClientID string `yaml:"client_id,omitempty"`
	// ClientSecret is the registered client's secret, if it has one.
	ClientSecret string `yaml:"client_secret,omitempty"`
	// ClientMetadataURL is the URL of Quiver's client metadata document (CIMD), instead of
	// registration.
	ClientMetadataURL string `yaml:"client_metadata_url,omitempty"`
	// RedirectURL is where the authorization server sends the user back (default: this server's
	// callback, under its public URL).
	RedirectURL string `yaml:"redirect_url,omitempty"`
	// Scopes are the scopes asked for (default: what the server asks for).
	Scopes []string `yaml:"scopes,omitempty"`
}

// Parse reads a configuration file; where names the file in errors. Unknown fields are
// errors, so a misspelt key is not silently ignored.
func Parse(r io.Reader, where string) (*File, error) {
	data, err := io.ReadAll(io.LimitReader(r, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", where, err)
	}
	var f File
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if _, err := f.Remotes(); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if err := f.checkOpenAPI(); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if _, err := f.A2ARemotes(); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if _, err := f.Rules(); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if err := f.checkEntitlements(); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if err := f.checkConnections(); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if err := f.checkLimits(); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	return &f, nil
}

// Load reads the configuration file at path. When optional is true a missing file is an
// empty configuration.
func Load(path string, optional bool) (*File, error) {
	fh, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) && optional {
		return &File{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("opening the configuration: %w", err)
	}
	defer fh.Close()
	f, err := Parse(fh, path)
	if err != nil {
		return nil, err
	}
	f.dir = filepath.Dir(path)
	return f, nil
}

// Remotes returns the configured MCP servers, checked, with ${VAR} expanded in env, header
// and oauth values.
func (f *File) Remotes() ([]mcp.Remote, error) {
	var out []mcp.Remote
	seen := map[string]bool{}
	for i, rc := range f.MCP.Servers {
		r := mcp.Remote{Name: rc.Name, Command: rc.Command, Args: rc.Args, Dir: rc.Dir, URL: rc.URL, Connection: rc.Connection}
		if len(rc.Env) > 0 {
			r.Env = map[string]string{}
			for k, v := range rc.Env {
				r.Env[k] = os.ExpandEnv(v)
			}
		}
		if len(rc.Headers) > 0 {
			r.Headers = map[string]string{}
			for k, v := range rc.Headers {
				r.Headers[k] = os.ExpandEnv(v)
			}
		}
		if o := rc.OAuth; o != nil {
			r.OAuth = &mcp.OAuth{
				ClientID:          os.ExpandEnv(o.ClientID),
				ClientSecret:      os.ExpandEnv(o.ClientSecret),
				ClientMetadataURL: os.ExpandEnv(o.ClientMetadataURL),
				RedirectURL:       os.ExpandEnv(o.RedirectURL),
				Scopes:            o.Scopes,
			}
		}
		if rc.Timeout != "" {
			d, err := time.ParseDuration(rc.Timeout)
			if err != nil || d <= 0 {
				return nil, fmt.Errorf("mcp.servers[%d] (%s): timeout %q is not a positive duration like 30s or 2m", i, rc.Name, rc.Timeout)
			}
			r.Timeout = d
		}
		if err := r.Validate(); err != nil {
			return nil, fmt.Errorf("mcp.servers[%d]: %w", i, err)
		}
		if seen[r.Name] {
			return nil, fmt.Errorf("mcp.servers[%d]: the name %q is used twice; names must be unique", i, r.Name)
		}
		seen[r.Name] = true
		out = append(out, r)
	}
	return out, nil
}

// ClaimRule grants a workspace and a role to every token whose claim holds a value: the claim
// (a dotted path for a nested one, as "realm_access.roles") is that string, or an array holding
// it. Rules are evaluated on every request: a person removed from the group loses the access
// when the token that said so expires.
type ClaimRule struct {
	// Claim is the claim, a dotted path for a nested one (realm_access.roles).
	Claim string `json:"claim" yaml:"claim"`
	// Value is the value the claim must be, or an array of it must hold.
	Value string `json:"value" yaml:"value"`
	// Workspace is the workspace the token is granted (its id).
	Workspace string `json:"workspace" yaml:"workspace"`
	// Role is the role granted: admin, member or viewer.
	Role store.KeyRole `json:"role" yaml:"role"`
}

// Check reports a rule that names no claim, value or workspace, or an unknown role.
func (r ClaimRule) Check() error {
	switch {
	case strings.TrimSpace(r.Claim) == "" || r.Value == "" || r.Workspace == "":
		return fmt.Errorf("a rule needs a claim, a value and a workspace, got %+v", r)
	case !r.Role.Valid():
		return fmt.Errorf("rule for %s=%q: role %q is none of admin, member, viewer", r.Claim, r.Value, r.Role)
	}
	return nil
}
