package model

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/quiverhq/quiver/internal/tracehttp"
)

// Config is what Open passes a provider beside the model name. Its zero value reads everything
// from the environment; a field that is set wins over the provider's variable.
type Config struct {
	// APIKey overrides the provider's key variable (OPENAI_API_KEY, ANTHROPIC_API_KEY, ...).
	APIKey string
	// BaseURL overrides the provider's base URL variable (OPENAI_BASE_URL, ...).
	BaseURL string
	// HTTPClient sends the requests; nil means one that passes the request's trace context on
	// to the provider (W3C traceparent, through the global propagator), so that the provider's
	// side joins the run's trace. A client given here is used as it is.
	HTTPClient *http.Client
	// Retries is how often a failed request (429, 5xx, a dropped connection) is tried again:
	// 0 means DefaultRetries, a negative number means never.
	Retries int
	// Getenv reads the environment; nil means os.Getenv. Tests pass a map lookup.
	Getenv func(key string) string
}

// DefaultRetries is how often a provider retries a failed request unless Config says
// otherwise: enough to ride out a brief rate limit, few enough that a run never hangs.
const DefaultRetries = 2

// Env returns the environment variable key through c.Getenv, trimmed of spaces.
func (c Config) Env(key string) string {
	get := c.Getenv
	if get == nil {
		get = os.Getenv
	}
	return strings.TrimSpace(get(key))
}

// MaxRetries is the retry count Retries stands for.
func (c Config) MaxRetries() int {
	switch {
	case c.Retries < 0:
		return 0
	case c.Retries == 0:
		return DefaultRetries
	}
	return c.Retries
}

// Opener makes a Model for a model name (the part of a spec after "provider:").
type Opener func(name string, cfg Config) (Model, error)

var (
	openersMu sync.RWMutex
	openers   = map[string]Opener{}
)

// Register makes a provider available to Open under the given name. Provider packages call it
// from init, so importing a provider (or model/all) is what makes it usable. Register panics
// when the name is empty, contains a colon, or is registered twice, as database/sql does.
func Register(provider string, open Opener) {
	openersMu.Lock()
	defer openersMu.Unlock()
	if provider == "" || strings.Contains(provider, ":") || open == nil {
		panic(fmt.Sprintf("model: Register(%q): the name must be non-empty without a colon, and the opener non-nil", provider))
	}
	if _, dup := openers[provider]; dup {
		panic(fmt.Sprintf("model: Register called twice for provider %q", provider))
	}
	openers[provider] = open
}

// Providers lists the registered provider names, sorted.
func Providers() []string {
	openersMu.RLock()
	defer openersMu.RUnlock()
	names := make([]string, 0, len(openers))
	for n := range openers {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// SpecHelp explains the model spec and the variables each provider reads, for a CLI's help text
// and for errors about a model that is missing or not configured.
const SpecHelp = `A model is named provider:model. The providers:
  openai:gpt-4.1-mini            needs OPENAI_API_KEY (OPENAI_BASE_URL optional)
  anthropic:claude-sonnet-4-5    needs ANTHROPIC_API_KEY (ANTHROPIC_BASE_URL optional)
  gemini:gemini-2.5-flash        needs GEMINI_API_KEY or GOOGLE_API_KEY (GEMINI_BASE_URL optional)
  ollama:llama3.2                a local Ollama at OLLAMA_HOST, default http://127.0.0.1:11434
  openai-compatible:MODEL        any OpenAI-compatible server (vLLM, llama.cpp) at OPENAI_BASE_URL,
                                 with OPENAI_API_KEY if it asks for one
  scripted:FILE                  a deterministic script of turns (YAML or JSON), for tests and demos
For example:
  export OPENAI_API_KEY=sk-...
  quiver run --model openai:gpt-4.1-mini ...`

// Open opens the model named by spec ("provider:model"), configured from the environment.
func Open(spec string) (Model, error) { return OpenConfig(spec, Config{}) }

// OpenConfig is Open with explicit configuration, which wins over the environment.
func OpenConfig(spec string, cfg Config) (Model, error) {
	provider, name, ok := strings.Cut(strings.TrimSpace(spec), ":")
	if !ok || provider == "" {
		return nil, fmt.Errorf("model: %q is not a model spec: write provider:model, for example openai:gpt-4.1-mini or ollama:llama3.2 (providers: %s)",
			spec, knownProviders())
	}
	openersMu.RLock()
	open := openers[provider]
	openersMu.RUnlock()
	if open == nil {
		return nil, fmt.Errorf("model: unknown provider %q in %q (providers: %s)", provider, spec, knownProviders())
	}
	if name == "" {
		return nil, fmt.Errorf("model: %q names no model: write %s:MODEL", spec, provider)
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = tracingClient
	}
	return open(name, cfg)
}

// tracingClient is the HTTP client of providers opened without one (see Config.HTTPClient).
var tracingClient = &http.Client{Transport: tracehttp.Transport(nil)}

func knownProviders() string {
	names := Providers()
	if len(names) == 0 {
		return "none registered; import github.com/quiverhq/quiver/model/all"
	}
	return strings.Join(names, ", ")
}

// NotConfigured returns an error wrapping ErrNotConfigured for a provider that misses the
// environment variable key, with an example command that sets it. It never contains a value.
func NotConfigured(spec, key, example string) error {
	return fmt.Errorf("%w: %s needs %s; set it, for example:\n  export %s=%s\n  quiver run --model %s \"your message\"",
		ErrNotConfigured, spec, key, key, example, spec)
}

// APIError is an error response from a provider's API, the same for every provider so the
// loop can tell a rate limit from a bad key without knowing the SDKs.
type APIError struct {
	// Provider is the provider's name ("openai", "anthropic", "gemini").
	Provider string
	// StatusCode is the HTTP status of the reply.
	StatusCode int
	// Type is the provider's error type or code when it gave one ("rate_limit_error").
	Type string
	// Message is the provider's own explanation, shortened.
	Message string
	// Hint says what to do about it, when there is something to say.
	Hint string
	// Err is the SDK's error.
	Err error
}

func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: HTTP %d", e.Provider, e.StatusCode)
	if t := http.StatusText(e.StatusCode); t != "" {
		b.WriteString(" " + t)
	}
	if e.Type != "" {
		b.WriteString(" (" + e.Type + ")")
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	if e.Hint != "" {
		b.WriteString("; " + e.Hint)
	}
	return b.String()
}

// Unwrap returns the SDK's error.
func (e *APIError) Unwrap() error { return e.Err }

// Temporary reports whether the same request may succeed later: a rate limit, an overloaded or
// failing server.
func (e *APIError) Temporary() bool {
	return e.StatusCode == http.StatusTooManyRequests || e.StatusCode == http.StatusRequestTimeout ||
		e.StatusCode >= 500 || e.StatusCode == 529
}

// IsTemporary reports whether err is an APIError that may succeed when retried later.
func IsTemporary(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Temporary()
}
