package model_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/schema"
)

type fake struct{ name string }

func (f fake) Name() string          { return "fake:" + f.name }
func (fake) Dialect() schema.Dialect { return schema.OpenAI }
func (fake) Generate(context.Context, *model.Request, func(model.Delta)) (*model.Response, error) {
	return &model.Response{}, nil
}

func TestRegister(t *testing.T) {
	model.Register("fake", func(name string, cfg model.Config) (model.Model, error) { return fake{name}, nil })
	m, err := model.Open("fake:x:y")
	if err != nil || m.Name() != "fake:x:y" {
		t.Fatalf("%v %v", m, err)
	}
	tests := []struct {
		name string
		reg  string
	}{{"twice", "fake"}, {"empty", ""}, {"colon", "a:b"}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			model.Register(tc.reg, func(string, model.Config) (model.Model, error) { return nil, nil })
		})
	}
}

func TestConfig(t *testing.T) {
	tests := []struct{ retries, want int }{{0, model.DefaultRetries}, {-1, 0}, {5, 5}}
	for _, tc := range tests {
		if got := (model.Config{Retries: tc.retries}).MaxRetries(); got != tc.want {
			t.Errorf("Retries %d: MaxRetries() = %d, want %d", tc.retries, got, tc.want)
		}
	}
	c := model.Config{Getenv: func(k string) string { return " v-" + k + " " }}
	if got := c.Env("K"); got != "v-K" {
		t.Errorf("Env = %q", got)
	}
}

func TestAPIError(t *testing.T) {
	inner := errors.New("sdk")
	tests := []struct {
		err       *model.APIError
		want      string
		temporary bool
	}{
		{&model.APIError{Provider: "openai", StatusCode: 429, Type: "rate_limit", Message: "slow down", Hint: "try later", Err: inner},
			"openai: HTTP 429 Too Many Requests (rate_limit): slow down; try later", true},
		{&model.APIError{Provider: "anthropic", StatusCode: 529, Message: "Overloaded"}, "anthropic: HTTP 529: Overloaded", true},
		{&model.APIError{Provider: "gemini", StatusCode: 400}, "gemini: HTTP 400 Bad Request", false},
	}
	for _, tc := range tests {
		err := fmt.Errorf("run: %w", tc.err)
		if tc.err.Error() != tc.want || model.IsTemporary(err) != tc.temporary {
			t.Errorf("%q temporary %v", tc.err.Error(), model.IsTemporary(err))
		}
		if tc.err.Err != nil && !errors.Is(err, inner) {
			t.Error("Unwrap does not reach the SDK's error")
		}
	}
	if model.IsTemporary(errors.New("plain")) {
		t.Error("a plain error is not temporary")
	}
}

func TestSpecHelpNamesEveryVariable(t *testing.T) {
	for _, v := range []string{"OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "OLLAMA_HOST", "scripted:FILE"} {
		if !strings.Contains(model.SpecHelp, v) {
			t.Errorf("SpecHelp does not mention %s", v)
		}
	}
}
