package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// A tool message's Content is the text its result shows the model (quiver.Result.ModelText):
// "Error: " and the error, the result text, the structured value, or the text content items
// joined by newlines. That text is also in the result, so stored as given a result would
// be stored twice, and a large one would cost twice the cap on every call. The backends store
// it once, in the message's content, and the result names the field it was taken from; reading
// puts it back, so what a caller appends and what it reads are the same.

// storedResult is a ToolResult as the backends store it.
type storedResult struct {
	ToolResult
	// InContent names the field left out because the message's content holds it: "error",
	// "result", "value" or "content" (the text of the text content items).
	InContent string `json:"in_content,omitempty"`
	// TextLens are the byte lengths of the text content items, for InContent "content".
	TextLens []int `json:"text_lens,omitempty"`
}

// The fields a stored result may leave to the message's content.
const (
	inError   = "error"
	inResult  = "result"
	inValue   = "value"
	inContent = "content"
)

const errorPrefix = "Error: "

// EncodeResult returns the JSON a backend stores for the result r of a tool message whose
// content is content (see storedResult), without HTML escaping; DecodeResult reads it back.
func EncodeResult(content string, r *ToolResult) ([]byte, error) {
	s := storedResult{ToolResult: *r}
	switch {
	case r.Error != "" && len(content) == len(errorPrefix)+len(r.Error) &&
		strings.HasPrefix(content, errorPrefix) && content[len(errorPrefix):] == r.Error:
		s.Error, s.InContent = "", inError
	case r.Text != "" && content == r.Text:
		s.Text, s.InContent = "", inResult
	case len(r.Value) > 0 && content == string(r.Value) && json.Valid(r.Value):
		s.Value, s.InContent = nil, inValue
	case len(r.Content) > 0 && content != "":
		if items, lens, ok := omitTexts(r.Content, content); ok {
			s.Content, s.TextLens, s.InContent = items, lens, inContent
		}
	}
	return marshal(&s)
}

// DecodeResult reads a result EncodeResult stored with a message whose content is content.
func DecodeResult(content string, stored []byte) (*ToolResult, error) {
	var s storedResult
	if err := json.Unmarshal(stored, &s); err != nil {
		return nil, err
	}
	r := &s.ToolResult
	switch s.InContent {
	case "":
	case inError:
		r.Error = strings.TrimPrefix(content, errorPrefix)
	case inResult:
		r.Text = content
	case inValue:
		r.Value = json.RawMessage(content)
	case inContent:
		items, err := restoreTexts(r.Content, s.TextLens, content)
		if err != nil {
			return nil, fmt.Errorf("content: %w", err)
		}
		r.Content = items
	default:
		return nil, fmt.Errorf("unknown in_content %q", s.InContent)
	}
	return r, nil
}

// EncodeToolCalls returns the JSON a backend stores for an assistant message's calls, without
// HTML escaping; DecodeStoredMessage reads it back.
func EncodeToolCalls(calls []ToolCall) ([]byte, error) { return marshal(calls) }

// DecodeStoredMessage sets m's ToolCalls and Result from the JSON a backend stored for them
// (EncodeToolCalls, EncodeResult; empty for none). m.Content must be set already: a result
// may have left its text to it.
func DecodeStoredMessage(m *Message, toolCalls, result []byte) error {
	if len(toolCalls) > 0 {
		if err := json.Unmarshal(toolCalls, &m.ToolCalls); err != nil {
			return fmt.Errorf("message %s: tool calls: %w", m.ID, err)
		}
	}
	if len(result) > 0 {
		r, err := DecodeResult(m.Content, result)
		if err != nil {
			return fmt.Errorf("message %s: result: %w", m.ID, err)
		}
		m.Result = r
	}
	return nil
}

// EncodeUsage returns the JSON a backend stores for a message's usage, nil for none;
// DecodeUsage reads it back.
func EncodeUsage(u *ModelUsage) ([]byte, error) {
	if u == nil {
		return nil, nil
	}
	return marshal(u)
}

// DecodeUsage sets m's Usage from the JSON a backend stored for it (EncodeUsage; empty for
// none).
func DecodeUsage(m *Message, usage []byte) error {
	if len(usage) == 0 {
		return nil
	}
	var u ModelUsage
	if err := json.Unmarshal(usage, &u); err != nil {
		return fmt.Errorf("message %s: usage: %w", m.ID, err)
	}
	m.Usage = &u
	return nil
}

// omitTexts returns the content items without the text of their text items, and the lengths
// of those texts, when joined by newlines they are content.
func omitTexts(raw json.RawMessage, content string) (json.RawMessage, []int, bool) {
	var items []map[string]json.RawMessage
	if json.Unmarshal(raw, &items) != nil {
		return nil, nil, false
	}
	var lens []int
	rest := content
	for _, it := range items {
		if !isText(it) {
			continue
		}
		var text string
		if t, ok := it["text"]; ok && json.Unmarshal(t, &text) != nil {
			return nil, nil, false
		}
		if lens != nil {
			if !strings.HasPrefix(rest, "\n") {
				return nil, nil, false
			}
			rest = rest[1:]
		}
		if !strings.HasPrefix(rest, text) {
			return nil, nil, false
		}
		rest = rest[len(text):]
		lens = append(lens, len(text))
		delete(it, "text")
	}
	if lens == nil || rest != "" {
		return nil, nil, false
	}
	b, err := marshal(items)
	if err != nil {
		return nil, nil, false
	}
	return b, lens, true
}

// restoreTexts puts back the texts omitTexts left out.
func restoreTexts(raw json.RawMessage, lens []int, content string) (json.RawMessage, error) {
	var items []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, err
	}
	rest := content
	n := 0
	for _, it := range items {
		if !isText(it) {
			continue
		}
		if n == len(lens) || lens[n] > len(rest) {
			return nil, errors.New("the text lengths do not match the message's content")
		}
		if lens[n] > 0 {
			b, err := marshal(rest[:lens[n]])
			if err != nil {
				return nil, err
			}
			it["text"] = b
		}
		rest = rest[lens[n]:]
		n++
		if n < len(lens) {
			rest = strings.TrimPrefix(rest, "\n")
		}
	}
	if n != len(lens) || rest != "" {
		return nil, errors.New("the text lengths do not match the message's content")
	}
	return marshal(items)
}

func isText(item map[string]json.RawMessage) bool {
	return string(bytes.TrimSpace(item["type"])) == `"text"`
}

// marshal encodes v as compact JSON without HTML escaping: a result's text is stored as the
// tool wrote it, not with every < and > six bytes long.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
