package a2av1

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// AgentCard is an agent's card as A2A 1.0 has it.
type AgentCard struct {
	Name                 string                    `json:"name"`
	Description          string                    `json:"description"`
	SupportedInterfaces  []AgentInterface          `json:"supportedInterfaces"`
	Provider             *AgentProvider            `json:"provider,omitempty"`
	Version              string                    `json:"version"`
	DocumentationURL     string                    `json:"documentationUrl,omitempty"`
	Capabilities         AgentCapabilities         `json:"capabilities"`
	SecuritySchemes      map[string]SecurityScheme `json:"securitySchemes,omitempty"`
	SecurityRequirements []SecurityRequirement     `json:"securityRequirements,omitempty"`
	DefaultInputModes    []string                  `json:"defaultInputModes"`
	DefaultOutputModes   []string                  `json:"defaultOutputModes"`
	Skills               []AgentSkill              `json:"skills"`
	IconURL              string                    `json:"iconUrl,omitempty"`
}

// AgentInterface is where and how the agent is reached: a URL, a protocol binding (JSONRPC,
// GRPC, HTTP+JSON) and the protocol version spoken there.
type AgentInterface struct {
	URL             string `json:"url"`
	ProtocolBinding string `json:"protocolBinding"`
	Tenant          string `json:"tenant,omitempty"`
	ProtocolVersion string `json:"protocolVersion"`
}

// AgentProvider is who serves the agent.
type AgentProvider struct {
	URL          string `json:"url"`
	Organization string `json:"organization"`
}

// AgentCapabilities are the optional features the agent has.
type AgentCapabilities struct {
	Streaming         *bool `json:"streaming,omitempty"`
	PushNotifications *bool `json:"pushNotifications,omitempty"`
	ExtendedAgentCard *bool `json:"extendedAgentCard,omitempty"`
}

// AgentSkill is something the agent does.
type AgentSkill struct {
	ID          string   `json:"id"`
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Tags        []string `json:"tags"`
	Examples    []string `json:"examples,omitempty"`
	InputModes  []string `json:"inputModes,omitempty"`
	OutputModes []string `json:"outputModes,omitempty"`
}

// SecurityScheme is one way to authenticate: exactly one of its fields.
type SecurityScheme struct {
	APIKey *APIKeySecurityScheme   `json:"apiKeySecurityScheme,omitempty"`
	HTTP   *HTTPAuthSecurityScheme `json:"httpAuthSecurityScheme,omitempty"`
	// The other kinds (OAuth 2.0, OpenID Connect, mutual TLS) are kept as they came.
	OAuth2        json.RawMessage `json:"oauth2SecurityScheme,omitempty"`
	OpenIDConnect json.RawMessage `json:"openIdConnectSecurityScheme,omitempty"`
	MutualTLS     json.RawMessage `json:"mtlsSecurityScheme,omitempty"`
}

// APIKeySecurityScheme is a key in a header, the query or a cookie.
type APIKeySecurityScheme struct {
	Description string `json:"description,omitempty"`
	Location    string `json:"location"`
	Name        string `json:"name"`
}

// HTTPAuthSecurityScheme is an Authorization scheme (Bearer, Basic).
type HTTPAuthSecurityScheme struct {
	Description  string `json:"description,omitempty"`
	Scheme       string `json:"scheme"`
	BearerFormat string `json:"bearerFormat,omitempty"`
}

// SecurityRequirement names the schemes (and their scopes) that together authenticate.
type SecurityRequirement struct {
	Schemes map[string]StringList `json:"schemes"`
}

// StringList is a list of strings (the scopes of a scheme).
type StringList struct {
	List []string `json:"list"`
}

// Major is the major version of a protocolVersion such as "1.0" or "0.3.0" ("1", "0.3" for
// the versions before 1.0, where a minor version broke compatibility), or "" when v is no
// version.
func Major(v string) string {
	parts := strings.Split(strings.TrimSpace(v), ".")
	for _, p := range parts {
		if _, err := strconv.Atoi(p); err != nil {
			return ""
		}
	}
	switch {
	case len(parts) >= 2 && parts[0] == "0":
		return "0." + parts[1]
	case len(parts) >= 1 && parts[0] != "0":
		return parts[0]
	}
	return ""
}

// WithLegacyCard is card merged into a card of A2A 0.3 (legacy, marshalled to a JSON object):
// one card that a client of either version reads. 0.3's fields stay as they are; 1.0's are
// added; the security schemes, which both versions name securitySchemes in shapes of their
// own (0.3's "type", 1.0's one field per kind), carry both shapes in each entry.
func WithLegacyCard(legacy json.RawMessage, card *AgentCard) (json.RawMessage, error) {
	var out map[string]json.RawMessage
	if err := json.Unmarshal(legacy, &out); err != nil {
		return nil, fmt.Errorf("a2av1: the 0.3 card is not a JSON object: %w", err)
	}
	b, err := json.Marshal(card)
	if err != nil {
		return nil, err
	}
	var v1 map[string]json.RawMessage
	if err := json.Unmarshal(b, &v1); err != nil {
		return nil, err
	}
	for k, v := range v1 {
		if _, both := out[k]; both && k == "securitySchemes" {
			if v, err = mergeObjects(out[k], v); err != nil {
				return nil, err
			}
		}
		out[k] = v
	}
	return json.Marshal(out)
}

// mergeObjects merges, key by key, the objects of two maps of objects.
func mergeObjects(a, b json.RawMessage) (json.RawMessage, error) {
	var am, bm map[string]map[string]json.RawMessage
	if err := json.Unmarshal(a, &am); err != nil {
		return nil, fmt.Errorf("a2av1: merging security schemes: %w", err)
	}
	if err := json.Unmarshal(b, &bm); err != nil {
		return nil, fmt.Errorf("a2av1: merging security schemes: %w", err)
	}
	for name, fields := range bm {
		if am[name] == nil {
			am[name] = map[string]json.RawMessage{}
		}
		for k, v := range fields {
			am[name][k] = v
		}
	}
	return json.Marshal(am)
}
