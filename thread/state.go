package thread

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/store"
)

// State returns the thread's state object, or with a non-empty instance that
// instance's (store.ErrNotFound for one the thread does not have): what calls wrote with
// _outputPath.
func (t *Thread) State(ctx context.Context, instance string) (json.RawMessage, error) {
	return t.st.State(ctx, t.ws, t.id, instance)
}

// Instances returns the names of the thread's instances, sorted.
func (t *Thread) Instances(ctx context.Context) ([]string, error) {
	return t.st.Instances(ctx, t.ws, t.id)
}

// AddInstances gives the thread instances, each with an empty state object, that calls
// naming _instance read and write; instances it has already are kept as they are.
func (t *Thread) AddInstances(ctx context.Context, names ...string) error {
	return t.st.AddInstances(ctx, t.ws, t.id, names...)
}

// CallState returns the state the call running in ctx reads: that of the instance its
// _instance names, else its thread's own. A handler outside a thread gets an error.
func CallState(ctx context.Context) (json.RawMessage, error) {
	th, ok := FromContext(ctx)
	if !ok {
		return nil, errors.New("thread: the call runs on no thread, so it has no state")
	}
	var instance string
	if c := quiver.CallFrom(ctx); c != nil {
		instance = c.Instance()
	}
	return th.State(ctx, instance)
}

// RecordOutput implements quiver.StateRecorder: the result and the write of out at the call's
// _outputPath are stored in one transaction (see RecordWithOutput).
func (t *Thread) RecordOutput(ctx context.Context, call *quiver.Call, r *quiver.Result, out json.RawMessage) (*quiver.Result, error) {
	_, got, err := t.RecordWithOutput(ctx, call, r, out)
	return got, err
}

// RecordWithOutput is Record for a call that names _outputPath: the tool message and the
// write of out into the state of the call's instance are stored in one transaction, so a
// crash leaves both or neither, and a call that has its result (a resumed run skips it)
// never writes twice. When the state refuses the write (a path already written, a path
// through a value that is not an object, a state over store.MaxStateBytes), nothing of it
// is stored and an error result saying which path and why (CodeStateConflict, with the
// output for the model to use) is recorded instead. It returns the stored message and the
// result as stored.
func (t *Thread) RecordWithOutput(ctx context.Context, call *quiver.Call, r *quiver.Result, out json.RawMessage) (*store.Message, *quiver.Result, error) {
	op := call.OutputPath()
	if op == nil {
		m, err := t.Record(ctx, call, r)
		return m, r, err
	}
	if call.ID == "" {
		return nil, nil, fmt.Errorf("thread %s: recording a result of %s: the call has no id: %w", t.id, call.Name, store.ErrInvalid)
	}
	if err := t.storeAttachments(ctx, r); err != nil {
		return nil, nil, err
	}
	tr, err := ToolResult(r)
	if err != nil {
		return nil, nil, fmt.Errorf("thread %s: result of call %s: %w", t.id, call.ID, err)
	}
	m := &store.Message{Role: store.RoleTool, ToolCallID: call.ID, ToolName: call.Name, Result: tr, Content: r.ModelText()}
	w := &store.StateWrite{Instance: call.Instance(), Paths: op.Paths, Any: op.Any, Value: out}
	err = t.st.AppendState(ctx, t.ws, t.id, w, m)
	var se *store.StateError
	if !errors.As(err, &se) {
		if err != nil {
			return nil, nil, err
		}
		return m, r, nil
	}
	refused := StateRefused(call, se, out)
	m, err = t.Record(ctx, call, refused)
	return m, refused, err
}

// maxEchoedOutput caps how much of a refused output the error result repeats.
const maxEchoedOutput = 4 << 10

// StateRefused is the error result of a call whose output its thread's state refused: it
// names the path and why, and repeats the output (cut at 4 KiB), which the model would lose
// otherwise.
func StateRefused(call *quiver.Call, se *store.StateError, out json.RawMessage) *quiver.Result {
	shown, more := string(out), ""
	if len(shown) > maxEchoedOutput {
		shown, more = strings.ToValidUTF8(shown[:maxEchoedOutput], ""), fmt.Sprintf(" (cut: %d bytes in all)", len(out))
	}
	return quiver.Errorf(quiver.CodeStateConflict, "%s ran, but its output was not kept: %v. Nothing was written to the state. The output was%s: %s",
		call.Name, se, more, shown)
}

var _ quiver.StateRecorder = (*Thread)(nil)
