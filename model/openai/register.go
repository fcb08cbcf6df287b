package openai

import (
	"net/url"
	"strings"

	"github.com/quiverhq/quiver/model"
)

func init() {
	model.Register("openai", openOpenAI)
	model.Register("ollama", openOllama)
	model.Register("openai-compatible", openCompatible)
}

func first(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

func openOpenAI(name string, cfg model.Config) (model.Model, error) {
	base := first(cfg.BaseURL, cfg.Env("OPENAI_BASE_URL"), DefaultBaseURL)
	key := first(cfg.APIKey, cfg.Env("OPENAI_API_KEY"))
	if key == "" && strings.HasPrefix(base, DefaultBaseURL) {
		return nil, model.NotConfigured("openai:"+name, "OPENAI_API_KEY", "sk-...")
	}
	return New(name, Options{Provider: "openai", APIKey: key, BaseURL: base, HTTPClient: cfg.HTTPClient,
		Retries: cfg.Retries, KeyVar: "OPENAI_API_KEY"})
}

// DefaultOllamaURL is where a local Ollama serves its OpenAI-compatible API.
const DefaultOllamaURL = "http://127.0.0.1:11434/v1"

func openOllama(name string, cfg model.Config) (model.Model, error) {
	base := cfg.BaseURL
	if base == "" {
		base = OllamaURL(cfg.Env("OLLAMA_HOST"))
	}
	// OPENAI_API_KEY is deliberately not read: it belongs to another server.
	return New(name, Options{Provider: "ollama", APIKey: first(cfg.APIKey, cfg.Env("OLLAMA_API_KEY")), BaseURL: base,
		HTTPClient: cfg.HTTPClient, Retries: cfg.Retries, KeyVar: "OLLAMA_API_KEY"})
}

// OllamaURL turns OLLAMA_HOST, as Ollama itself reads it ("127.0.0.1", "0.0.0.0:11434",
// "http://gpu-box:11434"), into the base URL of its OpenAI-compatible API.
func OllamaURL(host string) string {
	host = strings.TrimSpace(host)
	if host == "" {
		return DefaultOllamaURL
	}
	if !strings.Contains(host, "://") {
		host = "http://" + host
	}
	u, err := url.Parse(host)
	if err != nil || u.Host == "" {
		return DefaultOllamaURL
	}
	if u.Port() == "" {
		u.Host += ":11434"
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1"
	}
	return u.String()
}

func openCompatible(name string, cfg model.Config) (model.Model, error) {
	base := first(cfg.BaseURL, cfg.Env("OPENAI_BASE_URL"))
	if base == "" {
		return nil, model.NotConfigured("openai-compatible:"+name, "OPENAI_BASE_URL", "http://127.0.0.1:8000/v1")
	}
	return New(name, Options{Provider: "openai-compatible", APIKey: first(cfg.APIKey, cfg.Env("OPENAI_API_KEY")),
		BaseURL: base, HTTPClient: cfg.HTTPClient, Retries: cfg.Retries, KeyVar: "OPENAI_API_KEY"})
}
