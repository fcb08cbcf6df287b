package mcp

import (
	"encoding/base64"
	"encoding/json"
	"net/url"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/quiverhq/quiver"
)

// ToResult converts a Quiver result into an MCP tools/call result: an error result becomes
// isError with its message as text; text, image, audio and resource content map to MCP
// content; a structured value that is a JSON object becomes structuredContent (with its JSON
// as text too, for clients that read only content); attachments with data become image, audio
// or embedded resource content, and references to stored files resource links; the result's
// metadata is the answer's _meta, on success and on error, where an error's code is too
// (CodeMetaKey), for a client to act on without reading the text.
func ToResult(r *quiver.Result) *sdk.CallToolResult {
	out := &sdk.CallToolResult{Content: []sdk.Content{}, Meta: resultMeta(r.Meta)}
	if r.IsError() {
		out.IsError = true
		out.Content = append(out.Content, &sdk.TextContent{Text: r.Error})
		if r.Code != "" {
			if out.Meta == nil {
				out.Meta = sdk.Meta{}
			}
			out.Meta[CodeMetaKey] = string(r.Code)
		}
		return out
	}
	if r.Text != "" {
		out.Content = append(out.Content, &sdk.TextContent{Text: r.Text})
	}
	for _, c := range r.Content {
		if mc := toContent(c); mc != nil {
			out.Content = append(out.Content, mc)
		}
	}
	for _, a := range r.Attachments {
		out.Content = append(out.Content, attachmentContent(a))
	}
	if len(r.Value) > 0 {
		addValue(out, r)
	}
	return out
}

// CodeMetaKey is the key of an error result's code (quiver.Code: "not_entitled",
// "invalid_arguments", ...) in its answer's _meta.
const CodeMetaKey = "io.quiver/code"

// resultMeta is a result's metadata as the answer's _meta. The dispatcher let only a JSON
// object through; one that fails here is left out rather than failing the answer it only
// describes.
func resultMeta(raw json.RawMessage) map[string]any {
	if len(raw) == 0 {
		return nil
	}
	var meta map[string]any
	if json.Unmarshal(raw, &meta) != nil {
		return nil
	}
	return meta
}

// addValue adds a result's structured value: as structuredContent when it is an object, and
// as text when the result has no other content.
func addValue(out *sdk.CallToolResult, r *quiver.Result) {
	v := json.RawMessage(r.Value)
	if isObject(v) {
		out.StructuredContent = v
	}
	if r.Text == "" && len(r.Content) == 0 {
		out.Content = append(out.Content, &sdk.TextContent{Text: string(r.Value)})
	}
}

func isObject(b []byte) bool {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return c == '{'
	}
	return false
}

func toContent(c quiver.Content) sdk.Content {
	switch c.Type {
	case quiver.ContentText:
		return &sdk.TextContent{Text: c.Text}
	case quiver.ContentImage:
		data, _ := base64.StdEncoding.DecodeString(c.Data)
		return &sdk.ImageContent{Data: data, MIMEType: c.MimeType}
	case quiver.ContentAudio:
		data, _ := base64.StdEncoding.DecodeString(c.Data)
		return &sdk.AudioContent{Data: data, MIMEType: c.MimeType}
	case quiver.ContentResource:
		rc := &sdk.ResourceContents{URI: c.URI, MIMEType: c.MimeType, Text: c.Text}
		if c.Data != "" {
			rc.Blob, _ = base64.StdEncoding.DecodeString(c.Data)
		}
		return &sdk.EmbeddedResource{Resource: rc}
	}
	return nil
}

func attachmentContent(a quiver.Attachment) sdk.Content {
	if a.IsRef() {
		link := &sdk.ResourceLink{URI: "quiver://files" + a.Path, Name: a.Name, MIMEType: a.MimeType, Description: a.Description}
		if a.Size > 0 {
			link.Size = ptr(a.Size)
		}
		return link
	}
	data, _ := base64.StdEncoding.DecodeString(a.Data)
	switch {
	case strings.HasPrefix(a.MimeType, "image/"):
		return &sdk.ImageContent{Data: data, MIMEType: a.MimeType}
	case strings.HasPrefix(a.MimeType, "audio/"):
		return &sdk.AudioContent{Data: data, MIMEType: a.MimeType}
	}
	return &sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "quiver://attachments/" + url.PathEscape(a.Name), MIMEType: a.MimeType, Blob: data}}
}
