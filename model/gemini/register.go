package gemini

import "github.com/quiverhq/quiver/model"

func init() { model.Register("gemini", open) }

func open(name string, cfg model.Config) (model.Model, error) {
	key, keyVar := cfg.APIKey, ""
	for _, v := range []string{"GEMINI_API_KEY", "GOOGLE_API_KEY"} {
		if key == "" {
			key, keyVar = cfg.Env(v), v
		}
	}
	if key == "" {
		return nil, model.NotConfigured("gemini:"+name, "GEMINI_API_KEY", "AIza...")
	}
	base := cfg.BaseURL
	for _, v := range []string{"GEMINI_BASE_URL", "GOOGLE_GEMINI_BASE_URL"} {
		if base == "" {
			base = cfg.Env(v)
		}
	}
	return New(name, Options{APIKey: key, BaseURL: base, HTTPClient: cfg.HTTPClient, Retries: cfg.Retries, KeyVar: keyVar})
}
