package mcp

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// StdioTransport serves one session over newline-delimited JSON-RPC on in and out (a
// process's standard input and output). The SDK's IOTransport ends the session at the first
// line that is not a JSON-RPC message, dropping the answers still in flight; here such a line
// is answered with a JSON-RPC error and skipped, as over HTTP: -32700 when it is not JSON,
// -32600 when it is JSON but not a message, is longer than maxLine bytes (0: the SDK's
// default), or is a batch the negotiated protocol does not allow.
func StdioTransport(in io.Reader, out io.Writer, maxLine int) sdk.Transport {
	if maxLine <= 0 {
		maxLine = sdk.DefaultMaxLineLength
	}
	w := &lineWriter{w: out}
	pr, pw := io.Pipe()
	f := &lineFilter{in: bufio.NewReaderSize(in, 64<<10), out: pw, errs: w, maxLine: maxLine}
	go f.run()
	return &sdk.IOTransport{Reader: pr, Writer: w, MaxLineLength: maxLine + 1}
}

// lineWriter serialises writes: the SDK writes each message in one call, and the filter's
// error answers must not land in the middle of one.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

func (l *lineWriter) Close() error { return nil }

// lineFilter passes the SDK only lines it can decode.
type lineFilter struct {
	in      *bufio.Reader
	out     *io.PipeWriter
	errs    io.Writer
	maxLine int
	line    int
	// batches says whether JSON-RPC batches are allowed: only 2024-11-05 and 2025-03-26
	// define them, and the SDK ends the session on a batch under any later version.
	batches bool
}

func (f *lineFilter) run() {
	for {
		line, tooLong, err := f.next()
		if len(line) > 0 || tooLong {
			f.line++
			if !f.pass(line, tooLong) {
				return
			}
		}
		if err != nil {
			f.out.CloseWithError(err)
			return
		}
	}
}

// next reads one line without its end, or reports that it was longer than maxLine (the rest
// of it is read and dropped). err is io.EOF at the end of the input.
func (f *lineFilter) next() (line []byte, tooLong bool, err error) {
	for {
		chunk, err := f.in.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(chunk) > f.maxLine+2 { // +2: the line's own \r\n
				tooLong, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return bytes.TrimSpace(line), tooLong, err
	}
}

// pass hands a decodable line to the SDK or answers it with an error; false once the SDK's
// side is closed.
func (f *lineFilter) pass(line []byte, tooLong bool) bool {
	if tooLong {
		return f.refuse(nil, jsonrpc.CodeInvalidRequest, fmt.Sprintf("line %d is longer than %d bytes, the most a message may take", f.line, f.maxLine))
	}
	if code, msg, id := f.check(line); code != 0 {
		return f.refuse(id, code, msg)
	}
	_, err := f.out.Write(append(line, '\n'))
	return err == nil
}

// check returns the error code and message for a line the SDK cannot take, and the request's
// id when it has a usable one; code 0 when the line is a message (or an allowed batch).
func (f *lineFilter) check(line []byte) (code int64, msg string, id json.RawMessage) {
	if !json.Valid(line) {
		var v any
		err := json.Unmarshal(line, &v)
		return jsonrpc.CodeParseError, fmt.Sprintf("parse error: line %d is not JSON: %v", f.line, err), nil
	}
	if line[0] == '[' {
		if msg := f.checkBatch(line); msg != "" {
			return jsonrpc.CodeInvalidRequest, msg, nil
		}
		return 0, "", nil
	}
	m, err := jsonrpc.DecodeMessage(line)
	if err != nil {
		return jsonrpc.CodeInvalidRequest, fmt.Sprintf("line %d is not a JSON-RPC 2.0 message: %v", f.line, err), probeID(line)
	}
	if req, ok := m.(*jsonrpc.Request); ok && req.Method == "initialize" {
		f.batches = allowsBatches(req.Params)
	}
	return 0, "", nil
}

// checkBatch says what is wrong with a batch of messages; "" when nothing is.
func (f *lineFilter) checkBatch(line []byte) string {
	var batch []json.RawMessage
	if err := json.Unmarshal(line, &batch); err != nil || len(batch) == 0 {
		return fmt.Sprintf("line %d is an empty batch", f.line)
	}
	if !f.batches {
		return fmt.Sprintf("line %d is a batch: batches exist only in protocol versions 2024-11-05 and 2025-03-26", f.line)
	}
	for i, raw := range batch {
		if _, err := jsonrpc.DecodeMessage(raw); err != nil {
			return fmt.Sprintf("line %d, message %d of the batch: %v", f.line, i+1, err)
		}
	}
	return ""
}

// probeID is the id of a line that is no message, when it has a usable one.
func probeID(line []byte) json.RawMessage {
	var probe struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(line, &probe) == nil && validID(probe.ID) {
		return probe.ID
	}
	return nil
}

// allowsBatches reports whether an initialize's parameters name a protocol version that has
// batches.
func allowsBatches(params json.RawMessage) bool {
	var p struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	_ = json.Unmarshal(params, &p)
	return p.ProtocolVersion == "2024-11-05" || p.ProtocolVersion == "2025-03-26"
}

// refuse writes a JSON-RPC error answer; false once the output is gone.
func (f *lineFilter) refuse(id json.RawMessage, code int64, msg string) bool {
	_, err := f.errs.Write(append(rpcErrorBody(id, code, msg), '\n'))
	return err == nil
}

// validID says whether raw is a JSON-RPC request id MCP allows (a string or a number).
func validID(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return false
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return false
	}
	switch v.(type) {
	case string, float64:
		return true
	}
	return false
}

// rpcErrorBody is a JSON-RPC error answer. The id is left out when the request's is unknown:
// MCP's schema (2025-11-25 on) makes it optional for that case and refuses null, which
// JSON-RPC 2.0 itself would send.
func rpcErrorBody(id json.RawMessage, code int64, msg string) []byte {
	if !validID(id) {
		id = nil
	}
	out, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id,omitempty"`
		Error   jsonrpc.Error   `json:"error"`
	}{"2.0", id, jsonrpc.Error{Code: code, Message: msg}})
	return out
}
