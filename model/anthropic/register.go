package anthropic

import "github.com/quiverhq/quiver/model"

func init() { model.Register("anthropic", open) }

func open(name string, cfg model.Config) (model.Model, error) {
	key := cfg.APIKey
	if key == "" {
		key = cfg.Env("ANTHROPIC_API_KEY")
	}
	if key == "" {
		return nil, model.NotConfigured("anthropic:"+name, "ANTHROPIC_API_KEY", "sk-ant-...")
	}
	base := cfg.BaseURL
	if base == "" {
		base = cfg.Env("ANTHROPIC_BASE_URL")
	}
	return New(name, Options{APIKey: key, BaseURL: base, HTTPClient: cfg.HTTPClient, Retries: cfg.Retries, KeyVar: "ANTHROPIC_API_KEY"})
}
