package all_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/quiverhq/quiver/model"
	_ "github.com/quiverhq/quiver/model/all"
	"github.com/quiverhq/quiver/model/internal/wiretest"
	"github.com/quiverhq/quiver/schema"
)

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestOpen(t *testing.T) {
	const secret = "sk-secret-value"
	tests := []struct {
		spec        string
		vars        map[string]string
		wantName    string
		wantDialect schema.Dialect
		wantErr     string // part of the error
		notConfig   bool   // the error wraps model.ErrNotConfigured
	}{
		{spec: "openai:gpt-4.1-mini", vars: map[string]string{"OPENAI_API_KEY": secret}, wantName: "openai:gpt-4.1-mini", wantDialect: schema.OpenAIStrict},
		{spec: "openai:gpt-4.1-mini", wantErr: "export OPENAI_API_KEY=sk-...", notConfig: true},
		{spec: "openai:local", vars: map[string]string{"OPENAI_BASE_URL": "http://127.0.0.1:8000/v1"}, wantName: "openai:local", wantDialect: schema.OpenAIStrict},
		{spec: "anthropic:claude-sonnet-4-5", vars: map[string]string{"ANTHROPIC_API_KEY": secret}, wantName: "anthropic:claude-sonnet-4-5", wantDialect: schema.Anthropic},
		{spec: "anthropic:claude-sonnet-4-5", wantErr: "export ANTHROPIC_API_KEY=", notConfig: true},
		{spec: "gemini:gemini-2.5-flash", vars: map[string]string{"GOOGLE_API_KEY": secret}, wantName: "gemini:gemini-2.5-flash", wantDialect: schema.Gemini},
		{spec: "gemini:gemini-2.5-flash", wantErr: "export GEMINI_API_KEY=", notConfig: true},
		{spec: "ollama:llama3.2:3b", wantName: "ollama:llama3.2:3b", wantDialect: schema.OpenAI},
		{spec: "openai-compatible:qwen", vars: map[string]string{"OPENAI_BASE_URL": "http://127.0.0.1:8000/v1"}, wantName: "openai-compatible:qwen", wantDialect: schema.OpenAI},
		{spec: "openai-compatible:qwen", wantErr: "export OPENAI_BASE_URL=", notConfig: true},
		{spec: "scripted:testdata/echo.yaml", wantName: "scripted:testdata/echo.yaml", wantDialect: schema.OpenAI},
		{spec: "scripted:testdata/nope.yaml", wantErr: "nope.yaml"},
		{spec: "mystery:model", wantErr: "unknown provider \"mystery\" in \"mystery:model\" (providers: anthropic, gemini, ollama, openai, openai-compatible, scripted)"},
		{spec: "gpt-4.1-mini", wantErr: "write provider:model"},
		{spec: "openai:", wantErr: "names no model"},
	}
	for _, tc := range tests {
		t.Run(tc.spec+tc.wantErr, func(t *testing.T) {
			m, err := model.OpenConfig(tc.spec, model.Config{Getenv: env(tc.vars)})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				if errors.Is(err, model.ErrNotConfigured) != tc.notConfig {
					t.Errorf("errors.Is(ErrNotConfigured) = %v", !tc.notConfig)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if m.Name() != tc.wantName || m.Dialect() != tc.wantDialect {
				t.Errorf("%s %s", m.Name(), m.Dialect())
			}
		})
	}
}

// TestOllama drives the ollama provider against a server speaking Ollama's OpenAI-compatible
// dialect: no key is sent (not even OPENAI_API_KEY), and max_tokens is what it reads.
func TestOllama(t *testing.T) {
	srv := wiretest.New(t, wiretest.Reply{Body: `{"id":"chatcmpl-42","object":"chat.completion","created":1741569952,"model":"llama3.2",` +
		`"system_fingerprint":"fp_ollama","choices":[{"index":0,"message":{"role":"assistant","content":"Hi."},"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":26,"completion_tokens":3,"total_tokens":29}}`})
	host := strings.TrimPrefix(srv.URL, "http://")
	m, err := model.OpenConfig("ollama:llama3.2", model.Config{Retries: -1,
		Getenv: env(map[string]string{"OLLAMA_HOST": host, "OPENAI_API_KEY": "sk-not-for-ollama"})})
	if err != nil {
		t.Fatal(err)
	}
	r, err := m.Generate(context.Background(), &model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}, MaxTokens: 50}, nil)
	if err != nil || r.Text != "Hi." || r.Usage.OutputTokens != 3 {
		t.Fatalf("%+v %v", r, err)
	}
	req := srv.Last(t)
	body := req.JSON(t)
	if req.Path != "/v1/chat/completions" || req.Header.Get("Authorization") != "" || body["max_tokens"] != 50.0 {
		t.Errorf("path %s auth %q body %v", req.Path, req.Header.Get("Authorization"), body)
	}
}

func TestNotConfiguredNamesNoSecret(t *testing.T) {
	// A key for another provider is set; the error about the missing one must not show it.
	_, err := model.OpenConfig("anthropic:claude", model.Config{Getenv: env(map[string]string{"OPENAI_API_KEY": "sk-other"})})
	if err == nil || strings.Contains(err.Error(), "sk-other") || !strings.Contains(err.Error(), "quiver run --model anthropic:claude") {
		t.Errorf("err = %v", err)
	}
}
