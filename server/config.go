package server

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/quiverhq/quiver/mcp"
)

// ConfigFileName is the configuration file looked for in the data directory.
const ConfigFileName = "quiver.yaml"

// File is the configuration file (YAML, or JSON, which YAML reads too):
//
//	mcp:
//	  servers:
//	    - name: everything            # tools are imported as everything.<tool>
//	      command: npx                # a server speaking MCP over stdio...
//	      args: ["-y", "@modelcontextprotocol/server-everything"]
//	      env: {DEBUG: "0"}
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
//
//	openapi:                        # each operation of an OpenAPI document becomes a tool
//	  - name: petstore              # tools are petstore.<operationId>
//	    document: petstore.yaml     # a file (relative to this one) or an http(s) URL
//	    servers: [https://petstore.example.com/api] # default: the document's
//	    operations: [findPets, "tag:pets", "DELETE /pets/{id}"] # default: all
//	    credentials: {api_key: PETSTORE_KEY} # scheme: secret variable (default PETSTORE_API_KEY)
//	    timeout: 30s                # per call; default 30s
//	    max_response_bytes: 1048576 # default 1 MiB
//
//	a2a:                            # agents of other platforms, over A2A, as tools
//	  agents:
//	    - name: weather             # the tool's name
//	      url: https://agents.example.com/weather   # the agent (its card under it) or its card
//	      headers: {X-API-Key: "${WEATHER_AGENT_KEY}"}
//	      timeout: 5m               # per call; default 5m
//	      requires_confirmation: true
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
// ${VAR} in env, header and oauth values (and an A2A agent's headers) is replaced by the environment variable VAR, so
// secrets need not be written in the file.
type File struct {
	MCP struct {
		Servers []RemoteConfig `yaml:"servers" json:"servers"`
	} `yaml:"mcp" json:"mcp"`
	OpenAPI []OpenAPIConfig `yaml:"openapi,omitempty" json:"openapi,omitempty"`
	A2A     struct {
		Agents []A2AConfig `yaml:"agents" json:"agents"`
	} `yaml:"a2a" json:"a2a"`
	OIDC *OIDCConfig `yaml:"oidc,omitempty" json:"oidc,omitempty"`

	// dir is the directory of the file, which relative document paths are read from.
	dir string
}

// A2AConfig is one agent of another platform in the configuration file (see [a2a.Remote]).
type A2AConfig struct {
	Name                 string            `yaml:"name"`
	URL                  string            `yaml:"url"`
	Headers              map[string]string `yaml:"headers,omitempty"`
	Timeout              string            `yaml:"timeout,omitempty"`
	RequiresConfirmation bool              `yaml:"requires_confirmation,omitempty"`
}

// OpenAPIConfig is one OpenAPI document in the configuration file (see [openapi.Source]).
type OpenAPIConfig struct {
	Name             string            `yaml:"name"`
	Document         string            `yaml:"document"`
	Servers          []string          `yaml:"servers,omitempty"`
	Operations       []string          `yaml:"operations,omitempty"`
	Credentials      map[string]string `yaml:"credentials,omitempty"`
	Timeout          string            `yaml:"timeout,omitempty"`
	MaxResponseBytes int64             `yaml:"max_response_bytes,omitempty"`
}

// OIDCConfig is the oidc block: what [TokenAuth] takes, as quiver serve's --oidc-* flags give it.
type OIDCConfig struct {
	Issuer          string            `yaml:"issuer"`
	Audiences       []string          `yaml:"audiences,omitempty"`
	RequireATJWT    bool              `yaml:"require_at_jwt,omitempty"`
	ConsoleClientID string            `yaml:"console_client_id,omitempty"`
	ConsoleScopes   []string          `yaml:"console_scopes,omitempty"`
	ConsoleParams   map[string]string `yaml:"console_params,omitempty"`
	Rules           []ClaimRule       `yaml:"rules"`
}

// RemoteConfig is one remote MCP server in the configuration file.
type RemoteConfig struct {
	Name    string            `yaml:"name"`
	Command string            `yaml:"command,omitempty"`
	Args    []string          `yaml:"args,omitempty"`
	Env     map[string]string `yaml:"env,omitempty"`
	Dir     string            `yaml:"dir,omitempty"`
	URL     string            `yaml:"url,omitempty"`
	Headers map[string]string `yaml:"headers,omitempty"`
	Timeout string            `yaml:"timeout,omitempty"`
	OAuth   *OAuthConfig      `yaml:"oauth,omitempty"`
}

// OAuthConfig is the oauth block of a remote MCP server (see [mcp.OAuth]).
type OAuthConfig struct {
	ClientID          string   `yaml:"client_id,omitempty"`
	ClientSecret      string   `yaml:"client_secret,omitempty"`
	ClientMetadataURL string   `yaml:"client_metadata_url,omitempty"`
	RedirectURL       string   `yaml:"redirect_url,omitempty"`
	Scopes            []string `yaml:"scopes,omitempty"`
}

// ParseConfig reads a configuration file; where names the file in errors. Unknown fields are
// errors, so a misspelt key is not silently ignored.
func ParseConfig(r io.Reader, where string) (*File, error) {
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
	return &f, nil
}

// LoadConfig reads the configuration file at path. When optional is true a missing file is an
// empty configuration.
func LoadConfig(path string, optional bool) (*File, error) {
	fh, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) && optional {
		return &File{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("opening the configuration: %w", err)
	}
	defer fh.Close()
	f, err := ParseConfig(fh, path)
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
		r := mcp.Remote{Name: rc.Name, Command: rc.Command, Args: rc.Args, Dir: rc.Dir, URL: rc.URL}
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
