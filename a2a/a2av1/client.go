package a2av1

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"mime"
	"net/http"
	"strings"
	"sync/atomic"
)

// maxEvent bounds one event of a stream.
const maxEvent = 8 << 20

// Client calls an agent's JSON-RPC interface of A2A 1.0.
type Client struct {
	// Endpoint is the interface's URL.
	Endpoint string
	// HTTP sends the requests (http.DefaultClient when nil).
	HTTP *http.Client
	ids  atomic.Int64
}

// SendMessage sends a message, and returns the task it made or the agent's message.
func (c *Client) SendMessage(ctx context.Context, req *SendMessageRequest) (*SendMessageResponse, error) {
	var out SendMessageResponse
	if err := c.call(ctx, MethodSendMessage, req, &out); err != nil {
		return nil, err
	}
	if out.Task == nil && out.Message == nil {
		return nil, Errorf(CodeInvalidAgentResponse, "the agent answered SendMessage with neither a task nor a message")
	}
	return &out, nil
}

// GetTask reads a task.
func (c *Client) GetTask(ctx context.Context, req *GetTaskRequest) (*Task, error) {
	var out Task
	if err := c.call(ctx, MethodGetTask, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CancelTask asks the agent to cancel a task.
func (c *Client) CancelTask(ctx context.Context, req *CancelTaskRequest) (*Task, error) {
	var out Task
	if err := c.call(ctx, MethodCancelTask, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// SendStreamingMessage sends a message and yields the events of its task as they come.
func (c *Client) SendStreamingMessage(ctx context.Context, req *SendMessageRequest) iter.Seq2[*StreamResponse, error] {
	return func(yield func(*StreamResponse, error) bool) {
		resp, id, err := c.post(ctx, MethodSendStreamingMessage, req, "text/event-stream")
		if err != nil {
			yield(nil, err)
			return
		}
		defer resp.Body.Close()
		if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
			// An error before the stream started is a plain JSON-RPC answer.
			var out StreamResponse
			yield(nil, decode(resp.Body, id, &out))
			return
		}
		for data, err := range events(resp.Body) {
			if err != nil {
				yield(nil, err)
				return
			}
			var ev StreamResponse
			if err := decode(bytes.NewReader(data), id, &ev); err != nil {
				yield(nil, err)
				return
			}
			if !yield(&ev, nil) {
				return
			}
		}
	}
}

// events yields the data of each server-sent event of r.
func events(r io.Reader) iter.Seq2[[]byte, error] {
	return func(yield func([]byte, error) bool) {
		lines := bufio.NewScanner(r)
		lines.Buffer(make([]byte, 64<<10), maxEvent)
		var data []byte
		for lines.Scan() {
			line := lines.Text()
			switch {
			case line == "" && len(data) > 0:
				if !yield(data, nil) {
					return
				}
				data = nil
			case strings.HasPrefix(line, "data:"):
				if len(data) > 0 {
					data = append(data, '\n')
				}
				data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " ")...)
			}
		}
		if err := lines.Err(); err != nil {
			yield(nil, fmt.Errorf("reading the event stream: %w", err))
			return
		}
		if len(data) > 0 {
			yield(data, nil)
		}
	}
}

func (c *Client) call(ctx context.Context, method string, params, out any) error {
	resp, id, err := c.post(ctx, method, params, "application/json")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return decode(resp.Body, id, out)
}

// post sends a request and returns the answer, whatever its status when its body is JSON.
func (c *Client) post(ctx context.Context, method string, params any, accept string) (*http.Response, json.RawMessage, error) {
	p, err := json.Marshal(params)
	if err != nil {
		return nil, nil, err
	}
	id := json.RawMessage(fmt.Sprint(c.ids.Add(1)))
	body, err := json.Marshal(&Request{JSONRPC: "2.0", ID: id, Method: method, Params: p})
	if err != nil {
		return nil, nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.Endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", accept)
	req.Header.Set(VersionHeader, Version)
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, nil, err
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if resp.StatusCode/100 != 2 && mt != "application/json" {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		return nil, nil, fmt.Errorf("%s: HTTP %d: %s", method, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return resp, id, nil
}

// decode reads a JSON-RPC response to the request id into out, or its error.
func decode(r io.Reader, id json.RawMessage, out any) error {
	var resp Response
	if err := json.NewDecoder(r).Decode(&resp); err != nil {
		return fmt.Errorf("the agent's answer is not a JSON-RPC response: %w", err)
	}
	switch {
	case resp.Error != nil:
		return resp.Error
	case resp.JSONRPC != "2.0":
		return errors.New(`the agent's answer is not a JSON-RPC 2.0 response (jsonrpc is not "2.0")`)
	case !bytes.Equal(bytes.TrimSpace(resp.ID), id):
		return fmt.Errorf("the agent answered the request %s with the id %s", id, resp.ID)
	case len(resp.Result) == 0:
		return errors.New("the agent's answer has neither a result nor an error")
	}
	if err := json.Unmarshal(resp.Result, out); err != nil {
		return fmt.Errorf("the agent's result: %w", err)
	}
	return nil
}
