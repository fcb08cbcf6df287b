// Package conformance holds what the official MCP conformance suite
// (@modelcontextprotocol/conformance) needs from Quiver: the fixture tools, resources and
// prompts its server scenarios call (served by "quiver serve --conformance"), and the client
// its client scenarios drive ("quiver mcp conformance-client URL").
//
// The fixture tools are ordinary Quiver tools: the suite's calls go through the dispatcher
// like any other, so the suite tests Quiver's pipeline, not a side door.
package conformance

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/mcp"
)

// A 1x1 PNG and a tiny WAV file: the suite checks the content types, not the media.
const (
	pngBase64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
	wavBase64 = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="
)

func decode(s string) []byte {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

type none struct{}

type promptArgs struct {
	Prompt string `json:"prompt" description:"the prompt to send to the client's model" minLength:"1"`
}

type messageArgs struct {
	Message string `json:"message" description:"the message to show the user" minLength:"1"`
}

// Tools returns the fixture tools the suite's server scenarios call.
func Tools() []*quiver.Tool {
	return []*quiver.Tool{
		quiver.Func("test_simple_text", "Returns a simple text result.", func(context.Context, none) (string, error) {
			return "This is a simple text response for testing.", nil
		}),
		quiver.Func("test_image_content", "Returns an image.", func(context.Context, none) (quiver.Content, error) {
			return quiver.Content{Type: quiver.ContentImage, Data: pngBase64, MimeType: "image/png"}, nil
		}),
		quiver.Func("test_audio_content", "Returns audio.", func(context.Context, none) (quiver.Content, error) {
			return quiver.Content{Type: quiver.ContentAudio, Data: wavBase64, MimeType: "audio/wav"}, nil
		}),
		quiver.Func("test_embedded_resource", "Returns an embedded resource.", func(context.Context, none) (quiver.Content, error) {
			return quiver.Content{Type: quiver.ContentResource, URI: "test://embedded-resource", MimeType: "text/plain", Text: "This is an embedded resource"}, nil
		}),
		quiver.Func("test_multiple_content_types", "Returns text, an image and an embedded resource.", func(context.Context, none) ([]quiver.Content, error) {
			return []quiver.Content{
				quiver.TextContent("This is text content"),
				{Type: quiver.ContentImage, Data: pngBase64, MimeType: "image/png"},
				{Type: quiver.ContentResource, URI: "test://embedded-in-multiple", MimeType: "text/plain", Text: "This is an embedded resource"},
			}, nil
		}),
		quiver.Func("test_tool_with_logging", "Logs three messages while it runs.", func(ctx context.Context, _ none) (string, error) {
			for _, m := range []string{"Tool execution started", "Tool processing data", "Tool execution completed"} {
				quiver.Log(ctx, quiver.LogInfo, m)
			}
			return "Tool with logging executed successfully", nil
		}),
		quiver.Func("test_tool_with_progress", "Reports progress 0, 50 and 100 out of 100; returns the progress token.", func(ctx context.Context, _ none) (string, error) {
			for _, p := range []float64{0, 50, 100} {
				quiver.ReportProgress(ctx, p, 100, fmt.Sprintf("Completed step %.0f of 100", p))
			}
			if req := mcp.Request(ctx); req != nil {
				return fmt.Sprint(req.Params.GetProgressToken()), nil
			}
			return "no progress token", nil
		}),
		quiver.Func("test_error_handling", "Always fails.", func(context.Context, none) (string, error) {
			//lint:ignore ST1005 the conformance suite expects this text exactly
			return "", errors.New("This tool intentionally returns an error for testing")
		}),
		quiver.Func("test_sampling", "Asks the client's model to complete a prompt.", sampling),
		quiver.Func("test_elicitation", "Asks the user for a username and an email.", elicitation),
		quiver.Func("test_elicitation_sep1034_defaults", "Asks the user for values that have defaults (SEP-1034).", elicitationDefaults),
		quiver.Func("test_elicitation_sep1330_enums", "Asks the user to pick from every kind of enum (SEP-1330).", elicitationEnums),
	}
}

// elicitation asks the user for a username and an email.
func elicitation(ctx context.Context, a messageArgs) (string, error) {
	res, err := elicit(ctx, a.Message, map[string]any{
		"type": "object",
		"properties": map[string]any{
			"username": map[string]any{"type": "string", "description": "User's response"},
			"email":    map[string]any{"type": "string", "description": "User's email address"},
		},
		"required": []string{"username", "email"},
	})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("User response: action=%s, content=%v", res.Action, res.Content), nil
}

// elicitationDefaults asks the user for values of every kind that have defaults.
func elicitationDefaults(ctx context.Context, _ none) (string, error) {
	res, err := elicit(ctx, "Please confirm or change these values", map[string]any{
		"type": "object",
		"properties": map[string]any{
			"name":     map[string]any{"type": "string", "description": "User name", "default": "John Doe"},
			"age":      map[string]any{"type": "integer", "description": "User age", "default": 30},
			"score":    map[string]any{"type": "number", "description": "User score", "default": 95.5},
			"status":   map[string]any{"type": "string", "description": "User status", "enum": []string{"active", "inactive", "pending"}, "default": "active"},
			"verified": map[string]any{"type": "boolean", "description": "Verification status", "default": true},
		},
	})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("Elicitation completed: action=%s, content=%v", res.Action, res.Content), nil
}

// elicitationEnums asks the user to pick from every kind of enum: titled or not, single or
// multiple, and the legacy enumNames.
func elicitationEnums(ctx context.Context, _ none) (string, error) {
	titled := []map[string]any{{"const": "value1", "title": "First Option"}, {"const": "value2", "title": "Second Option"}, {"const": "value3", "title": "Third Option"}}
	res, err := elicit(ctx, "Please choose", map[string]any{
		"type": "object",
		"properties": map[string]any{
			"untitledSingle": map[string]any{"type": "string", "enum": []string{"option1", "option2", "option3"}},
			"titledSingle":   map[string]any{"type": "string", "oneOf": titled},
			"legacyEnum":     map[string]any{"type": "string", "enum": []string{"opt1", "opt2", "opt3"}, "enumNames": []string{"Option One", "Option Two", "Option Three"}},
			"untitledMulti":  map[string]any{"type": "array", "minItems": 1, "maxItems": 3, "items": map[string]any{"type": "string", "enum": []string{"option1", "option2", "option3"}}},
			"titledMulti":    map[string]any{"type": "array", "minItems": 1, "maxItems": 3, "items": map[string]any{"anyOf": titled}},
		},
	})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("Elicitation completed: action=%s, content=%v", res.Action, res.Content), nil
}

// session is the MCP session of the call running in ctx.
func session(ctx context.Context) (*sdk.ServerSession, error) {
	req := mcp.Request(ctx)
	if req == nil {
		return nil, errors.New("this tool needs an MCP client: call it over MCP")
	}
	return req.Session, nil
}

func sampling(ctx context.Context, a promptArgs) (string, error) {
	ss, err := session(ctx)
	if err != nil {
		return "", err
	}
	//lint:ignore SA1019 sampling is what this protocol version's clients offer.
	res, err := ss.CreateMessage(ctx, &sdk.CreateMessageParams{
		//lint:ignore SA1019 as above
		Messages:  []*sdk.SamplingMessage{{Role: "user", Content: &sdk.TextContent{Text: a.Prompt}}},
		MaxTokens: 100,
	})
	if err != nil {
		return "", fmt.Errorf("sampling failed: %w", err)
	}
	text := "(not text)"
	if tc, ok := res.Content.(*sdk.TextContent); ok {
		text = tc.Text
	}
	return "LLM response: " + text, nil
}

func elicit(ctx context.Context, msg string, schema map[string]any) (*sdk.ElicitResult, error) {
	ss, err := session(ctx)
	if err != nil {
		return nil, err
	}
	res, err := ss.Elicit(ctx, &sdk.ElicitParams{Message: msg, RequestedSchema: schema})
	if err != nil {
		return nil, fmt.Errorf("elicitation failed: %w", err)
	}
	return res, nil
}

// ServerOptions are the MCP server options the fixture needs: completion and resource
// subscription handlers, and the capabilities for resources and prompts.
func ServerOptions() *mcp.ServerOptions {
	return &mcp.ServerOptions{
		Name:    "quiver-conformance",
		Version: "1.0.0",
		Capabilities: &sdk.ServerCapabilities{
			//lint:ignore SA1019 the suite's scenarios still test logging
			Logging:     &sdk.LoggingCapabilities{},
			Completions: &sdk.CompletionCapabilities{},
			Prompts:     &sdk.PromptCapabilities{ListChanged: true},
			Resources:   &sdk.ResourceCapabilities{ListChanged: true, Subscribe: true},
		},
		CompletionHandler: func(context.Context, *sdk.CompleteRequest) (*sdk.CompleteResult, error) {
			return &sdk.CompleteResult{Completion: sdk.CompletionResultDetails{Values: []string{}}}, nil
		},
		SubscribeHandler:   func(context.Context, *sdk.SubscribeRequest) error { return nil },
		UnsubscribeHandler: func(context.Context, *sdk.UnsubscribeRequest) error { return nil },
	}
}

// Setup adds the fixture resources and prompts to the server.
func Setup(s *mcp.Server) {
	srv := s.SDK()
	text := func(uri, mime, body string) *sdk.ReadResourceResult {
		return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: uri, MIMEType: mime, Text: body}}}
	}
	srv.AddResource(&sdk.Resource{Name: "static-text", Description: "A static text resource", MIMEType: "text/plain", URI: "test://static-text"},
		func(_ context.Context, r *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
			return text(r.Params.URI, "text/plain", "This is the content of the static text resource."), nil
		})
	srv.AddResource(&sdk.Resource{Name: "static-binary", Description: "A static binary resource (a PNG image)", MIMEType: "image/png", URI: "test://static-binary"},
		func(_ context.Context, r *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
			return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: r.Params.URI, MIMEType: "image/png", Blob: decode(pngBase64)}}}, nil
		})
	srv.AddResource(&sdk.Resource{Name: "watched-resource", Description: "A resource clients may subscribe to", MIMEType: "text/plain", URI: "test://watched-resource"},
		func(_ context.Context, r *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
			return text(r.Params.URI, "text/plain", "Watched resource content"), nil
		})
	srv.AddResourceTemplate(&sdk.ResourceTemplate{Name: "template", Description: "A resource template with an id parameter", MIMEType: "application/json", URITemplate: "test://template/{id}/data"},
		func(_ context.Context, r *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
			id := strings.TrimSuffix(strings.TrimPrefix(r.Params.URI, "test://template/"), "/data")
			id, _ = url.PathUnescape(id)
			return text(r.Params.URI, "application/json", fmt.Sprintf(`{"id":%q,"templateTest":true,"data":"Data for ID: %s"}`, id, id)), nil
		})

	user := func(c sdk.Content) *sdk.PromptMessage { return &sdk.PromptMessage{Role: "user", Content: c} }
	srv.AddPrompt(&sdk.Prompt{Name: "test_simple_prompt", Title: "Simple Test Prompt", Description: "A prompt without arguments"},
		func(context.Context, *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
			return &sdk.GetPromptResult{Messages: []*sdk.PromptMessage{user(&sdk.TextContent{Text: "This is a simple prompt for testing."})}}, nil
		})
	srv.AddPrompt(&sdk.Prompt{Name: "test_prompt_with_arguments", Title: "Prompt With Arguments", Description: "A prompt with two required arguments",
		Arguments: []*sdk.PromptArgument{{Name: "arg1", Description: "First argument", Required: true}, {Name: "arg2", Description: "Second argument", Required: true}}},
		func(_ context.Context, r *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
			msg := fmt.Sprintf("Prompt with arguments: arg1='%s', arg2='%s'", r.Params.Arguments["arg1"], r.Params.Arguments["arg2"])
			return &sdk.GetPromptResult{Messages: []*sdk.PromptMessage{user(&sdk.TextContent{Text: msg})}}, nil
		})
	srv.AddPrompt(&sdk.Prompt{Name: "test_prompt_with_embedded_resource", Title: "Prompt With Embedded Resource", Description: "A prompt embedding a resource",
		Arguments: []*sdk.PromptArgument{{Name: "resourceUri", Description: "URI of the resource to embed", Required: true}}},
		func(_ context.Context, r *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
			res := &sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: r.Params.Arguments["resourceUri"], MIMEType: "text/plain", Text: "Embedded resource content for testing."}}
			return &sdk.GetPromptResult{Messages: []*sdk.PromptMessage{user(res), user(&sdk.TextContent{Text: "Please process the embedded resource above."})}}, nil
		})
	srv.AddPrompt(&sdk.Prompt{Name: "test_prompt_with_image", Title: "Prompt With Image", Description: "A prompt with an image"},
		func(context.Context, *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
			img := &sdk.ImageContent{Data: decode(pngBase64), MIMEType: "image/png"}
			return &sdk.GetPromptResult{Messages: []*sdk.PromptMessage{user(img), user(&sdk.TextContent{Text: "Please analyze the image above."})}}, nil
		})
}
