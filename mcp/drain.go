package mcp

import (
	"context"
	"errors"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// drainingTransport answers every request read before the client's input ended. The SDK
// closes a session as soon as a read says the input has ended, and a response written after
// that is dropped: `echo '{...initialize...}' | quiver mcp stdio` printed nothing. So a read
// that finds the end waits until the requests already read have been answered (or the session
// is closed, or ctx ends), and only then reports it.
type drainingTransport struct{ sdk.Transport }

func (t drainingTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &drainingConn{Connection: c, pending: map[jsonrpc.ID]bool{}, changed: make(chan struct{}, 1), closed: make(chan struct{})}, nil
}

type drainingConn struct {
	sdk.Connection
	mu        sync.Mutex
	pending   map[jsonrpc.ID]bool // requests read and not yet answered
	changed   chan struct{}       // signalled when a request is answered
	closed    chan struct{}
	closeOnce sync.Once
}

func (c *drainingConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if err == nil {
		if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
			c.mu.Lock()
			c.pending[req.ID] = true
			c.mu.Unlock()
		}
		return msg, nil
	}
	if !errors.Is(err, io.EOF) {
		return nil, err
	}
	for {
		c.mu.Lock()
		n := len(c.pending)
		c.mu.Unlock()
		if n == 0 {
			return nil, err
		}
		select {
		case <-c.changed:
		case <-c.closed:
			return nil, err
		case <-ctx.Done():
			return nil, err
		}
	}
}

func (c *drainingConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	err := c.Connection.Write(ctx, msg)
	if resp, ok := msg.(*jsonrpc.Response); ok {
		c.mu.Lock()
		delete(c.pending, resp.ID)
		c.mu.Unlock()
		select {
		case c.changed <- struct{}{}:
		default:
		}
	}
	return err
}

func (c *drainingConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Connection.Close()
}
