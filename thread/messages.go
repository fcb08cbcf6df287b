package thread

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/schema"
	"github.com/quiverhq/quiver/store"
)

// Messages returns a page of the thread's messages, oldest first (see store.Page).
func (t *Thread) Messages(ctx context.Context, page store.Page) ([]*store.Message, error) {
	return t.st.Messages(ctx, t.ws, t.id, page)
}

// History returns every message of the thread, oldest first.
func (t *Thread) History(ctx context.Context) ([]*store.Message, error) {
	var out []*store.Message
	var before int64
	for {
		page, err := t.st.Messages(ctx, t.ws, t.id, store.Page{Before: before, Limit: 1000})
		if err != nil {
			return nil, err
		}
		out = append(page, out...)
		if len(page) < 1000 {
			return out, nil
		}
		before = page[0].Seq
	}
}

// Inject appends messages to the thread now, in one transaction. When the store is a
// store.QueuePeeker, that transaction also looks at the thread's queue, for QueueSeen.
func (t *Thread) Inject(ctx context.Context, msgs ...*store.Message) error {
	p, ok := t.st.(store.QueuePeeker)
	if !ok || len(msgs) == 0 {
		t.queueSeen.Store(nil)
		return t.st.Append(ctx, t.ws, t.id, msgs...)
	}
	writes := queueWrites.Load()
	queued, err := p.AppendPeek(ctx, t.ws, t.id, msgs...)
	if err != nil {
		t.queueSeen.Store(nil)
		return err
	}
	t.queueSeen.Store(&queueLook{queued: queued, writes: writes})
	return nil
}

// InjectFinal appends a run's last messages and, when the thread has no queued messages once
// they are stored, applies fn to the thread (its end: status, outcome), in one transaction
// where the store is a store.FinalAppender. ended says whether fn was applied; when it was
// not, messages wait in the queue (QueueSeen reports them) and the run goes on. With another
// store it appends, looks at the queue and updates, one after the other.
func (t *Thread) InjectFinal(ctx context.Context, fn func(*store.Thread) error, msgs ...*store.Message) (ended bool, err error) {
	f, ok := t.st.(store.FinalAppender)
	if !ok {
		return t.injectThenUpdate(ctx, fn, msgs)
	}
	writes := queueWrites.Load()
	info, queued, err := f.AppendFinal(ctx, t.ws, t.id, fn, msgs...)
	if err != nil {
		t.queueSeen.Store(nil)
		return false, err
	}
	t.queueSeen.Store(&queueLook{queued: queued, writes: writes})
	if queued {
		return false, nil
	}
	t.keep(info)
	return true, nil
}

// injectThenUpdate is InjectFinal in three steps, for a store that cannot do it in one.
func (t *Thread) injectThenUpdate(ctx context.Context, fn func(*store.Thread) error, msgs []*store.Message) (bool, error) {
	if err := t.Inject(ctx, msgs...); err != nil {
		return false, err
	}
	queued, known := t.QueueSeen()
	if !known {
		q, err := t.Queued(ctx)
		if err != nil {
			return false, err
		}
		queued = len(q) > 0
	}
	if queued {
		t.queueSeen.Store(&queueLook{queued: true, writes: queueWrites.Load()})
		return false, nil
	}
	_, err := t.Update(ctx, fn)
	return err == nil, err
}

// QueueSeen reports whether the thread had queued messages when the latest append through
// this handle (Inject, Record, AppendUser...) committed, and forgets it. known is false when
// no such append can tell: none since the last call, a store that is no store.QueuePeeker,
// or a queue written by this process since (through any handle: a sub-agent's answer). The
// answer is as fresh as a Queued read made at that commit, without the read: a runtime that
// looks for queued messages after each append uses it, and finds a message another process
// queued since at its next look.
func (t *Thread) QueueSeen() (queued, known bool) {
	look := t.queueSeen.Swap(nil)
	if look == nil || look.writes != queueWrites.Load() {
		return false, false
	}
	return look.queued, true
}

// Queue queues messages for the thread's next step: they join the history when the runtime
// calls TakeQueued at the start of that step.
func (t *Thread) Queue(ctx context.Context, msgs ...*store.Message) error {
	// Counted once the queue is written (or failed to be): an append that looked at the queue
	// before this write cannot have seen it, and its look is not used from here on.
	defer queueWrites.Add(1)
	return t.st.Enqueue(ctx, t.ws, t.id, msgs...)
}

// Queued returns the messages waiting for the next step.
func (t *Thread) Queued(ctx context.Context) ([]*store.Message, error) {
	return t.st.Queued(ctx, t.ws, t.id)
}

// TakeQueued moves the queued messages into the history, once each, and returns them.
func (t *Thread) TakeQueued(ctx context.Context) ([]*store.Message, error) {
	t.queueSeen.Store(nil)
	return t.st.AppendQueued(ctx, t.ws, t.id)
}

// UpdateMessage replaces the content of a system, user or assistant message.
func (t *Thread) UpdateMessage(ctx context.Context, messageID, content string) (*store.Message, error) {
	return t.st.UpdateMessage(ctx, t.ws, t.id, messageID, func(m *store.Message) error {
		m.Content = content
		return nil
	})
}

// AppendUser appends a user message.
func (t *Thread) AppendUser(ctx context.Context, text string) (*store.Message, error) {
	m := &store.Message{Role: store.RoleUser, Content: text}
	if err := t.Inject(ctx, m); err != nil {
		return nil, err
	}
	return m, nil
}

// AppendAssistant appends the model's turn: its text and the calls it asks for, in order.
// Each call needs a unique ID within the thread. Arguments that are not a JSON object (the
// model wrote broken JSON) are stored as a JSON string holding the text as written, so that
// a resumed run dispatches exactly what the model sent and gets the same error; use
// HistoryArgs to send them back to a provider.
func (t *Thread) AppendAssistant(ctx context.Context, text string, calls []quiver.Call) (*store.Message, error) {
	m := &store.Message{Role: store.RoleAssistant, Content: text}
	for _, c := range calls {
		m.ToolCalls = append(m.ToolCalls, StoredCall(c))
	}
	if err := t.Inject(ctx, m); err != nil {
		return nil, err
	}
	return m, nil
}

// Pending returns the calls of the thread that have no result yet, in the order they were
// asked for: what a step (or a resumed run) still has to execute.
func (t *Thread) Pending(ctx context.Context) ([]quiver.Call, error) {
	pending, err := t.st.PendingCalls(ctx, t.ws, t.id)
	if err != nil {
		return nil, err
	}
	out := make([]quiver.Call, len(pending))
	for i, c := range pending {
		out[i] = quiver.Call{ID: c.ID, Name: c.Name, Args: CallArgs(c.Args), Reasoning: c.Reasoning}
	}
	return out, nil
}

// StoredCall is the stored form of a call, its arguments kept as AppendAssistant keeps them.
// Meta-fields a parser already took out of the arguments (a composed answer's _output,
// _outputPath, ...) go back in: the dispatcher takes them out again, and a call run again
// from its stored form after a crash must carry them as the first try did.
func StoredCall(c quiver.Call) store.ToolCall {
	return store.ToolCall{ID: c.ID, Name: c.Name, Args: storedArgs(withMeta(c)), Reasoning: c.Reasoning}
}

// withMeta returns the call's arguments with its Output and Meta in them as the model wrote
// them; arguments that are not a JSON object are left as they are.
func withMeta(c quiver.Call) json.RawMessage {
	if len(c.Meta) == 0 && len(c.Output) == 0 {
		return c.Args
	}
	obj := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(c.Args)) > 0 {
		if err := json.Unmarshal(c.Args, &obj); err != nil || obj == nil {
			return c.Args
		}
	}
	for k, v := range c.Meta {
		obj[k] = v
	}
	if len(c.Output) > 0 {
		obj[schema.OutputField] = c.Output
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return c.Args
	}
	return b
}

// storedArgs keeps arguments that are not a JSON object as a JSON string of their text.
func storedArgs(args json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(args)) == 0 {
		return nil
	}
	if string(quiver.ArgsForHistory(args)) == string(args) {
		return args
	}
	b, _ := json.Marshal(string(args)) // a string always encodes (invalid UTF-8 becomes U+FFFD)
	return b
}

// CallArgs returns a stored call's arguments as the model wrote them (see AppendAssistant).
func CallArgs(stored json.RawMessage) json.RawMessage {
	trimmed := bytes.TrimSpace(stored)
	if len(trimmed) > 0 && trimmed[0] == '"' {
		var s string
		if json.Unmarshal(trimmed, &s) == nil {
			return json.RawMessage(s)
		}
	}
	return stored
}

// HistoryArgs returns a stored call's arguments as a provider accepts them in the assistant
// message that made the call: the object, or {} for arguments that were not one.
func HistoryArgs(stored json.RawMessage) json.RawMessage {
	return quiver.ArgsForHistory(stored)
}

// RecordResult stores a call's result as a tool message answering call.ID; it makes the
// thread a quiver.Recorder, so a Dispatcher persists each result before the caller advances.
// New attachments (with data) are first stored in the thread's file system under
// /attachments/ and replaced, in r itself, by references to the stored files, so the
// caller and the history agree; when one cannot be stored (too large, bad data) r becomes an
// error result saying so. A call that already has a result fails with store.ErrResultExists
// and changes nothing.
func (t *Thread) RecordResult(ctx context.Context, call *quiver.Call, r *quiver.Result) error {
	_, err := t.Record(ctx, call, r)
	return err
}

// Record is RecordResult returning the stored tool message.
func (t *Thread) Record(ctx context.Context, call *quiver.Call, r *quiver.Result) (*store.Message, error) {
	if call.ID == "" {
		return nil, fmt.Errorf("thread %s: recording a result of %s: the call has no id: %w", t.id, call.Name, store.ErrInvalid)
	}
	if err := t.storeAttachments(ctx, r); err != nil {
		return nil, err
	}
	tr, err := ToolResult(r)
	if err != nil {
		return nil, fmt.Errorf("thread %s: result of call %s: %w", t.id, call.ID, err)
	}
	m := &store.Message{Role: store.RoleTool, ToolCallID: call.ID, ToolName: call.Name, Result: tr, Content: r.ModelText()}
	if err := t.Inject(ctx, m); err != nil {
		return nil, err
	}
	return m, nil
}

// storeAttachments replaces the new attachments of r by references to files stored in the
// thread.
func (t *Thread) storeAttachments(ctx context.Context, r *quiver.Result) error {
	return StoreAttachments(ctx, t.st, t.ws, t.id, r)
}

// StoreAttachments stores the new attachments of r (those with data) in the thread's file
// system under /attachments/ and replaces them, in r, by references to the stored files; a
// reference passes through once its path is found to be a file of the thread. Only a storage
// failure is returned as an error; an attachment that is not valid base64 or is too large, or
// a reference to no file of the thread, turns r into an error result saying so, so that what
// is recorded and what the caller holds agree (and every path a result refers to is valid in
// the thread that receives it).
func StoreAttachments(ctx context.Context, files store.Files, workspaceID, threadID string, r *quiver.Result) error {
	// The attachments are replaced in a copy: the slice may be the handler's own (a result it
	// keeps and returns again), which must still hold its data the next time.
	r.Attachments = slices.Clone(r.Attachments)
	at := attacher{files: files, workspaceID: workspaceID, threadID: threadID}
	for i := range r.Attachments {
		refusal, err := at.place(ctx, &r.Attachments[i])
		if err != nil {
			return err
		}
		if refusal != "" {
			*r = quiver.Result{Status: quiver.StatusError, Code: quiver.CodeInvalidOutput, Error: refusal}
			return nil
		}
	}
	return nil
}

// attacher places a result's attachments in a thread's files.
type attacher struct {
	files                 store.Files
	workspaceID, threadID string
}

// place checks a reference, or stores an attachment's data and makes it the reference to the
// stored file. refusal says why the attachment cannot be; err is a failure of the storage.
func (at attacher) place(ctx context.Context, a *quiver.Attachment) (refusal string, err error) {
	if a.IsRef() {
		return at.checkRef(ctx, a)
	}
	fi, refusal, err := at.save(ctx, a)
	if fi != nil {
		*a = AttachmentRef(fi)
	}
	return refusal, err
}

// checkRef checks that a reference names a file of the thread.
func (at attacher) checkRef(ctx context.Context, a *quiver.Attachment) (string, error) {
	fi, err := at.files.Stat(ctx, at.workspaceID, at.threadID, a.Path)
	switch {
	case err == nil && fi.IsDir:
		err = errors.New("it is a directory")
	case errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrInvalid):
		err = errors.New("the thread has no file there")
	case err != nil:
		return "", fmt.Errorf("thread %s: checking attachment %q: %w", at.threadID, a.Path, err)
	}
	if err != nil {
		return fmt.Sprintf("the tool returned attachment %q referring to %s, which it cannot: %v", a.Name, a.Path, err), nil
	}
	return "", nil
}

// save stores an attachment's data under /attachments/.
func (at attacher) save(ctx context.Context, a *quiver.Attachment) (*store.FileInfo, string, error) {
	data, err := decodeAttachment(a.Data)
	var fi *store.FileInfo
	if err == nil {
		fi, err = at.files.AddAttachment(ctx, at.workspaceID, at.threadID, store.NewAttachment{Name: a.Name, MimeType: a.MimeType, Data: data,
			Width: a.Width, Height: a.Height, Description: a.Description})
		if err != nil && !errors.Is(err, store.ErrTooLarge) && !errors.Is(err, store.ErrInvalid) {
			return nil, "", fmt.Errorf("thread %s: storing attachment %q: %w", at.threadID, a.Name, err)
		}
	}
	if err != nil {
		return nil, fmt.Sprintf("the tool returned attachment %q that could not be stored: %v", a.Name, err), nil
	}
	return fi, "", nil
}

// decodeAttachment decodes an attachment's data (base64), at most quiver.MaxAttachmentBytes.
func decodeAttachment(s string) ([]byte, error) {
	data, err := base64.StdEncoding.DecodeString(s)
	if err == nil && len(data) > quiver.MaxAttachmentBytes {
		err = fmt.Errorf("%d bytes, over the %d byte limit", len(data), quiver.MaxAttachmentBytes)
	}
	return data, err
}

// AttachmentRef is the reference to a stored file that a result carries. Its name is the one
// the file came with (an attachment's, as the tool gave it: chart.png) when it has one, else
// the last segment of its path (FileInfo.DisplayName); its path says where the file is.
func AttachmentRef(fi *store.FileInfo) quiver.Attachment {
	return quiver.Attachment{ID: fi.ID, Type: "file", Path: fi.Path, Name: fi.DisplayName(), MimeType: fi.MimeType, Size: fi.Size,
		Width: fi.Width, Height: fi.Height, Description: fi.Description}
}

// ToolResult converts a result to its stored form.
func ToolResult(r *quiver.Result) (*store.ToolResult, error) {
	tr := &store.ToolResult{Status: string(r.Status), Text: r.Text, Value: r.Value, Error: r.Error, Code: string(r.Code),
		Stack: r.Stack, Meta: r.Meta}
	var err error
	if len(r.Attachments) > 0 {
		if tr.Attachments, err = json.Marshal(r.Attachments); err != nil {
			return nil, err
		}
	}
	if len(r.Content) > 0 {
		if tr.Content, err = json.Marshal(r.Content); err != nil {
			return nil, err
		}
	}
	if len(r.Problems) > 0 {
		if tr.Problems, err = json.Marshal(r.Problems); err != nil {
			return nil, err
		}
	}
	return tr, nil
}

// Result converts a stored result back.
func Result(tr *store.ToolResult) (*quiver.Result, error) {
	if tr == nil {
		return nil, fmt.Errorf("no result: %w", store.ErrInvalid)
	}
	r := &quiver.Result{Status: quiver.Status(tr.Status), Text: tr.Text, Value: tr.Value, Error: tr.Error,
		Code: quiver.Code(tr.Code), Stack: tr.Stack, Meta: tr.Meta}
	for _, f := range []struct {
		raw json.RawMessage
		dst any
	}{{tr.Attachments, &r.Attachments}, {tr.Content, &r.Content}, {tr.Problems, &r.Problems}} {
		if len(f.raw) > 0 {
			if err := json.Unmarshal(f.raw, f.dst); err != nil {
				return nil, fmt.Errorf("stored result: %w", err)
			}
		}
	}
	return r, nil
}

var _ quiver.Recorder = (*Thread)(nil)
