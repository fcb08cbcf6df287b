// Package postgres is the store backend for deployments where several Quiver nodes share one
// PostgreSQL database. It implements store.Store on pgx (a pgxpool.Pool) and passes the
// conformance suite in store/storetest. Threads and their history are its own SQL, on pgx;
// entities, files, variables and part of the thread state are the SQL it shares with
// store/sqlite (store/sqlstore), run through database/sql on the same pool (see dialect.go).
//
// # Opening
//
// Open takes a pgx connection string (a URL or key=value DSN; pool settings such as
// pool_max_conns go there too) and brings the schema up to date before returning:
//
//	s, err := postgres.Open(ctx, "postgres://quiver@db:5432/quiver?sslmode=require")
//
// WithSchema keeps every table in a schema of its own (created when missing), for instance one
// per test or one per tenant of a shared server.
//
// # Migrations
//
// The schema is versioned: numbered migrations are embedded in the binary and recorded in a
// schema_migrations table. Open applies the missing ones in a single transaction while holding
// a PostgreSQL advisory lock, so nodes that start together migrate once, one after the other;
// a database migrated by a newer build is refused with ErrSchemaTooNew.
//
// # Ordering and exactly-once results
//
// Append is one SQL statement, hence one transaction and one round trip. It first bumps the
// thread's last_seq counter with an UPDATE, which locks the thread row: appends to a thread
// are serialised across connections and nodes, and each batch takes the next seqs without a
// gap (a failed batch rolls the counter back). Every tool call is a row of tool_calls, unique
// per (thread, call id); a tool message must reference one (a foreign key), and a unique index
// on (thread, call id) over the tool messages makes a second result impossible in the database
// itself, whichever node writes it. That violation is reported as store.ErrResultExists.
//
// Times come from the database clock, in UTC, to the microsecond.
package postgres

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/quiverhq/quiver/internal/stamp"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/sqlstore"
)

// Store is a store.Store on a PostgreSQL database. It is safe for concurrent use, also by
// several processes sharing the database.
//
// It also implements store.Entities, store.Files and store.Variables, and WithFileLimits
// (store.Files under other caps; every node sharing a database should use the same caps):
// those methods are sqlstore.Store's, which Store embeds (see dialect.go), so this package's
// documentation does not list them.
type Store struct {
	pool *pgxpool.Pool
	// db is database/sql over the same pool (pgx/v5/stdlib), for the SQL both backends share.
	db *sql.DB

	// The entities, files, variables and part of the thread state, on db (see dialect.go).
	*shared
}

var (
	_ store.Store         = (*Store)(nil)
	_ store.BatchAppender = (*Store)(nil)
)

// An Option adjusts how Open connects.
type Option func(*options)

type options struct {
	schema string
	tracer pgx.QueryTracer
}

// WithSchema keeps the store's tables in the named schema, creating it when it does not
// exist: every connection of the store uses it as its search_path. Without it the store uses
// the search_path of the connection string (by default the "public" schema).
func WithSchema(name string) Option {
	return func(o *options) { o.schema = name }
}

// WithTracer hands every statement of the store's connections to t (pgx's QueryTracer; when t
// is also a pgx.BatchTracer, batches too), so that what the store asks of the database can be
// counted or timed from outside it, as the benchmark of a run's write transactions does.
func WithTracer(t pgx.QueryTracer) Option {
	return func(o *options) { o.tracer = t }
}

// Open connects to the database named by dsn (a pgx connection string), applies the schema
// migrations it lacks, and returns the store. It fails with ErrSchemaTooNew when the database
// was migrated by a newer build. Close releases the connections.
func Open(ctx context.Context, dsn string, opts ...Option) (*Store, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres: open: %w", err)
	}
	lockName := cfg.ConnConfig.RuntimeParams["search_path"]
	if o.schema != "" {
		cfg.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{o.schema}.Sanitize()
		lockName = o.schema
	}
	if o.tracer != nil {
		cfg.ConnConfig.Tracer = o.tracer
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: open: %w", err)
	}
	if err := migrate(ctx, pool, lockName, o.schema); err != nil {
		pool.Close()
		return nil, err
	}
	db := stdlib.OpenDBFromPool(pool)
	return &Store{pool: pool, db: db, shared: newShared(db)}, nil
}

// Close closes the store's connections, waiting for those in use to be released.
func (s *Store) Close() error {
	err := s.db.Close() // returns its connections to the pool, which it does not close
	s.pool.Close()
	return err
}

// threadColumns are read by scanThread, in this order.
const threadColumns = `id, workspace_id, agent_id, user_id, COALESCE(parent_id, ''), tags, step_count, current_side, stopped, status, blocking, resumable, state, created_at, updated_at`

// threadColumnsT are threadColumns of the table aliased t, for a statement that joins it.
const threadColumnsT = `t.id, t.workspace_id, t.agent_id, t.user_id, COALESCE(t.parent_id, ''), t.tags, t.step_count, t.current_side, t.stopped, t.status, t.blocking, t.resumable, t.state, t.created_at, t.updated_at`

func scanThread(row pgx.Row) (*store.Thread, error) {
	var (
		t     store.Thread
		state []byte
	)
	if err := row.Scan(&t.ID, &t.WorkspaceID, &t.AgentID, &t.UserID, &t.ParentID, &t.Tags, &t.StepCount,
		&t.CurrentSide, &t.Stopped, &t.Status, &t.Blocking, &t.Resumable, &state, &t.CreatedAt, &t.UpdatedAt); err != nil {
		return nil, err
	}
	if len(state) > 0 {
		t.State = json.RawMessage(slices.Clone(state))
	}
	if len(t.Tags) == 0 {
		t.Tags = nil
	}
	t.CreatedAt, t.UpdatedAt = t.CreatedAt.UTC(), t.UpdatedAt.UTC()
	return &t, nil
}

// tagsArg is never nil: pgx sends a nil slice as NULL, and tags are NOT NULL.
func tagsArg(tags []string) []string {
	if tags == nil {
		return []string{}
	}
	return tags
}

// CreateThread stores a new thread, setting its ID (when empty), CreatedAt and UpdatedAt. It
// fails with store.ErrInvalid without a workspace or when the id is taken, and with
// store.ErrNotFound when ParentID names no thread of the workspace.
func (s *Store) CreateThread(ctx context.Context, t *store.Thread) error {
	id, status, err := store.PrepareThread(ctx, t)
	if err != nil {
		return fmt.Errorf("postgres: create thread: %w", err)
	}
	op := "create thread " + id
	var at time.Time
	// One statement writes the thread and its rows of thread_tags (the index of the list by
	// tag), so that neither is ever without the other.
	err = s.pool.QueryRow(ctx, `WITH t AS (
	INSERT INTO threads
		(id, workspace_id, agent_id, user_id, parent_id, tags, step_count, current_side, stopped, status, blocking, resumable, state,
		created_at, updated_at)
	VALUES ($1, $2, $3, $4, NULLIF($5, ''), $6, $7, $8, $9, $10, $11, $12, NULLIF($13, '')::json, now(), now())
	RETURNING created_at
), g AS (
	INSERT INTO thread_tags (thread_id, tag, workspace_id, created_at)
	SELECT DISTINCT $1, u.tag, $2, t.created_at FROM t, unnest($6::text[]) AS u(tag)
)
SELECT created_at FROM t`,
		id, t.WorkspaceID, t.AgentID, t.UserID, t.ParentID, tagsArg(t.Tags), t.StepCount, t.CurrentSide, t.Stopped,
		string(status), t.Blocking, t.Resumable, string(t.State)).Scan(&at)
	if err != nil {
		return dialect.Err(op, err)
	}
	t.ID, t.Status, t.CreatedAt, t.UpdatedAt = id, status, at.UTC(), at.UTC()
	return nil
}

// Thread returns the thread, or store.ErrNotFound.
func (s *Store) Thread(ctx context.Context, workspaceID, threadID string) (*store.Thread, error) {
	t, err := scanThread(s.pool.QueryRow(ctx, `SELECT `+threadColumns+` FROM threads WHERE id = $1 AND workspace_id = $2`,
		threadID, workspaceID))
	if err != nil {
		return nil, dialect.Err("read thread "+threadID, err)
	}
	return t, nil
}

// UpdateThread locks the thread, applies fn to it and stores the result, in one transaction.
// Only Tags, StepCount, CurrentSide, Stopped, Status and State may change, and a terminated
// thread stays terminated (store.ErrInvalid otherwise; the store sets UpdatedAt). An error from fn is returned, wrapped, and nothing is stored.
func (s *Store) UpdateThread(ctx context.Context, workspaceID, threadID string, fn func(*store.Thread) error) (*store.Thread, error) {
	var out *store.Thread
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		out, err = updateThread(ctx, tx, workspaceID, threadID, fn)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// UpdateThreadTx is UpdateThread inside tx, a transaction of the caller's on the store's
// database: package jobs marks a thread running in the transaction that queues its run.
func (s *Store) UpdateThreadTx(ctx context.Context, tx pgx.Tx, workspaceID, threadID string, fn func(*store.Thread) error) (*store.Thread, error) {
	return updateThread(ctx, tx, workspaceID, threadID, fn)
}

// updateThread is UpdateThread inside its transaction.
func updateThread(ctx context.Context, tx pgx.Tx, workspaceID, threadID string, fn func(*store.Thread) error) (*store.Thread, error) {
	op := "update thread " + threadID
	old, err := scanThread(tx.QueryRow(ctx, `SELECT `+threadColumns+` FROM threads WHERE id = $1 AND workspace_id = $2 FOR NO KEY UPDATE`,
		threadID, workspaceID))
	if err != nil {
		return nil, dialect.Err(op, err)
	}
	t := *old
	t.Tags = slices.Clone(old.Tags)
	if err := fn(&t); err != nil {
		return nil, fmt.Errorf("postgres: %s: %w", op, err)
	}
	if err := store.CheckThreadUpdate(old, &t); err != nil {
		return nil, fmt.Errorf("postgres: %s: %w", op, err)
	}
	if t.Status == "" {
		t.Status = store.StatusIdle
	}
	err = tx.QueryRow(ctx, `UPDATE threads
SET tags = $3, step_count = $4, current_side = $5, stopped = $6, status = $7, state = NULLIF($8, '')::json,
	updated_at = GREATEST(updated_at, clock_timestamp())
WHERE id = $1 AND workspace_id = $2
RETURNING updated_at`, threadID, workspaceID, tagsArg(t.Tags), t.StepCount, t.CurrentSide, t.Stopped,
		string(t.Status), string(t.State)).Scan(&t.UpdatedAt)
	if err != nil {
		return nil, dialect.Err(op, err)
	}
	t.UpdatedAt = t.UpdatedAt.UTC()
	if !slices.Equal(old.Tags, t.Tags) { // the tags' index follows the tags, rarely changed
		if err := replaceTags(ctx, tx, workspaceID, threadID, old.CreatedAt, t.Tags); err != nil {
			return nil, dialect.Err(op, err)
		}
	}
	if len(t.Tags) == 0 {
		t.Tags = nil
	}
	return &t, nil
}

// replaceTags makes the rows of the thread's tags those of tags.
func replaceTags(ctx context.Context, tx pgx.Tx, workspaceID, threadID string, created time.Time, tags []string) error {
	if _, err := tx.Exec(ctx, `DELETE FROM thread_tags WHERE thread_id = $1 AND NOT tag = ANY($2::text[])`,
		threadID, tagsArg(tags)); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `INSERT INTO thread_tags (thread_id, tag, workspace_id, created_at)
SELECT DISTINCT $1, u.tag, $2, $3::timestamptz FROM unnest($4::text[]) AS u(tag) ON CONFLICT DO NOTHING`,
		threadID, workspaceID, created, tagsArg(tags))
	return err
}

// Children lists the threads of the workspace whose parent is threadID, oldest first (none
// when there is no such thread).
func (s *Store) Children(ctx context.Context, workspaceID, threadID string) ([]*store.Thread, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+threadColumns+` FROM threads
WHERE workspace_id = $1 AND parent_id = $2 ORDER BY created_at, id`, workspaceID, threadID)
	if err != nil {
		return nil, dialect.Err("list children of "+threadID, err)
	}
	kids, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.Thread, error) { return scanThread(row) })
	if err != nil {
		return nil, dialect.Err("list children of "+threadID, err)
	}
	return kids, nil
}

// Threads lists the workspace's threads that f keeps, newest first, a page at a time (see
// store.Store; the statement is sqlstore.ThreadList's).
func (s *Store) Threads(ctx context.Context, workspaceID string, f store.ThreadFilter) ([]*store.Thread, string, error) {
	q, err := store.PrepareThreadList(workspaceID, f)
	if err != nil {
		return nil, "", fmt.Errorf("postgres: list threads: %w", err)
	}
	query, args := sqlstore.ThreadList(dialect, threadColumnsT, q)
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, "", dialect.Err("list threads", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.Thread, error) { return scanThread(row) })
	if err != nil {
		return nil, "", dialect.Err("list threads", err)
	}
	page, next := q.Page(out)
	return page, next, nil
}

// appendSQL appends a batch in one statement. The UPDATE of the thread row comes first: it
// finds the thread in the workspace (no row: not found), locks it until the statement
// commits (appends to one thread take turns), and reserves the batch's seqs. The clock is read
// after the lock, so created_at grows with seq. The messages and their calls are inserted from
// arrays, one element per row; the constraints (unique result per call, known call) are
// checked by the database, at the end of the statement for the foreign keys, so a result may
// answer a call of the same batch. It also says whether the thread has queued messages (for
// AppendPeek), as the statement's snapshot saw them: a queue written or taken meanwhile is
// seen by the runtime's next look, which is all QueuePeeker promises.
const appendSQL = `WITH t AS (
	UPDATE threads SET last_seq = last_seq + $3
	WHERE id = $1 AND workspace_id = $2
	RETURNING last_seq - $3 AS base, COALESCE($17::timestamptz, clock_timestamp()) AS at
), m AS (
	INSERT INTO messages (id, thread_id, seq, role, content, tool_calls, tool_call_id, tool_name, result, created_at, side, usage)
	SELECT u.id, $1, t.base + u.n, u.role, u.content, NULLIF(u.calls, '')::json, NULLIF(u.call_id, ''), u.tool_name,
		NULLIF(u.result, '')::json, t.at, u.side, NULLIF(u.usage, '')::json
	FROM t, unnest($4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[], $18::text[], $19::text[])
		WITH ORDINALITY AS u(id, role, content, calls, call_id, tool_name, result, side, usage, n)
), c AS (
	INSERT INTO tool_calls (thread_id, call_id, message_seq, idx, name, args, reasoning)
	SELECT $1, u.call_id, t.base + u.pos, u.idx, u.name, NULLIF(u.args, '')::json, u.reasoning
	FROM t, unnest($11::text[], $12::int8[], $13::int4[], $14::text[], $15::text[], $16::text[])
		AS u(call_id, pos, idx, name, args, reasoning)
)
SELECT base, at, EXISTS (SELECT FROM queued_messages WHERE thread_id = $1) FROM t`

// batch holds an Append's rows as columns, the shape appendSQL takes.
type batch struct {
	ids, roles, contents, calls, callIDs, toolNames, results, sides, usages []string
	// The tool calls: pos is the 1-based position of their message in the batch.
	callCallIDs, callNames, callArgs, callReasoning []string
	callPos                                         []int64
	callIdx                                         []int32
}

// newBatch checks msgs and lays them out as columns. Each message's own rules are
// store.CheckMessage's; what needs the batch (a call or result repeated inside it, a result
// before its call) it checks here, since the one statement of Append cannot say which row
// failed; what needs the stored history (a call or result from an earlier batch) the database
// checks.
func newBatch(ctx context.Context, threadID string, msgs []*store.Message) (*batch, error) {
	n := len(msgs)
	b := &batch{
		ids: make([]string, n), roles: make([]string, n), contents: make([]string, n), calls: make([]string, n),
		callIDs: make([]string, n), toolNames: make([]string, n), results: make([]string, n), sides: make([]string, n),
		usages: make([]string, n),
	}
	seen := batchCalls{declared: map[string]bool{}, answered: map[string]bool{}}
	for i, m := range msgs {
		if err := store.CheckMessage(threadID, m); err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
		b.ids[i] = m.ID
		if b.ids[i] == "" {
			b.ids[i] = stamp.ID(ctx, store.PrefixMessage)
		}
		b.roles[i], b.contents[i], b.toolNames[i], b.sides[i] = string(m.Role), m.Content, m.ToolName, m.Side
		if m.Usage != nil {
			js, err := store.EncodeUsage(m.Usage)
			if err != nil {
				return nil, fmt.Errorf("message %d: usage: %v: %w", i, err, store.ErrInvalid)
			}
			b.usages[i] = string(js)
		}
		if err := b.addCalls(i, m.ToolCalls, seen); err != nil {
			return nil, err
		}
		if m.Role == store.RoleTool {
			if err := b.addResult(i, m, seen); err != nil {
				return nil, err
			}
		}
	}
	return b, nil
}

// batchCalls are the call ids asked for and answered in a batch so far.
type batchCalls struct {
	declared, answered map[string]bool
}

// addCalls lays out the calls message i makes.
func (b *batch) addCalls(i int, calls []store.ToolCall, seen batchCalls) error {
	if len(calls) == 0 {
		return nil
	}
	for j, c := range calls {
		switch {
		case seen.declared[c.ID]:
			return fmt.Errorf("message %d: call id %q is asked for twice: %w", i, c.ID, store.ErrInvalid)
		case seen.answered[c.ID]:
			return fmt.Errorf("message %d: call %q comes after its result: %w", i, c.ID, store.ErrInvalid)
		}
		seen.declared[c.ID] = true
		b.callCallIDs = append(b.callCallIDs, c.ID)
		b.callPos = append(b.callPos, int64(i+1))
		b.callIdx = append(b.callIdx, int32(j))
		b.callNames = append(b.callNames, c.Name)
		b.callArgs = append(b.callArgs, string(c.Args))
		b.callReasoning = append(b.callReasoning, c.Reasoning)
	}
	js, err := store.EncodeToolCalls(calls)
	if err != nil {
		return fmt.Errorf("message %d: tool calls: %v: %w", i, err, store.ErrInvalid)
	}
	b.calls[i] = string(js)
	return nil
}

// addResult lays out the result message i, a tool message, gives.
func (b *batch) addResult(i int, m *store.Message, seen batchCalls) error {
	if seen.answered[m.ToolCallID] {
		return fmt.Errorf("message %d: call %q is answered twice in one batch: %w", i, m.ToolCallID, store.ErrResultExists)
	}
	seen.answered[m.ToolCallID] = true
	b.callIDs[i] = m.ToolCallID
	if m.Result == nil {
		return nil
	}
	js, err := store.EncodeResult(m.Content, m.Result)
	if err != nil {
		return fmt.Errorf("message %d: result: %v: %w", i, err, store.ErrInvalid)
	}
	b.results[i] = string(js)
	return nil
}

// Append adds msgs to the end of the thread in one transaction (one statement), and on success
// sets their ID (when empty), ThreadID, Seq and CreatedAt. A tool message must answer a call of
// an earlier message of the thread (store.ErrInvalid otherwise); a call already answered fails
// with store.ErrResultExists. On any error nothing of the batch is stored.
func (s *Store) Append(ctx context.Context, workspaceID, threadID string, msgs ...*store.Message) error {
	if len(msgs) == 0 {
		_, err := s.Thread(ctx, workspaceID, threadID)
		return err
	}
	_, err := s.AppendPeek(ctx, workspaceID, threadID, msgs...)
	return err
}

// AppendPeek is Append that also reports whether the thread has queued messages once msgs are
// stored, as the append's statement saw them (see store.QueuePeeker).
func (s *Store) AppendPeek(ctx context.Context, workspaceID, threadID string, msgs ...*store.Message) (bool, error) {
	op := "append to thread " + threadID
	if len(msgs) == 0 {
		q, err := s.Queued(ctx, workspaceID, threadID) // reports a thread of no such workspace
		return len(q) > 0, err
	}
	b, err := newBatch(ctx, threadID, msgs)
	if err != nil {
		return false, fmt.Errorf("postgres: %s: %w", op, err)
	}
	wctx, cancel, err := writeContext(ctx)
	if err != nil {
		return false, fmt.Errorf("postgres: %s: %w", op, err)
	}
	defer cancel()
	var base int64
	var at time.Time
	var queued bool
	err = s.pool.QueryRow(wctx, appendSQL, b.args(threadID, workspaceID, nil)...).Scan(&base, &at, &queued)
	if err != nil {
		return false, dialect.Err(op, err)
	}
	b.fill(msgs, threadID, base, at)
	return queued, nil
}

// AppendTx is Append inside tx, a transaction on a connection to the store's database whose
// search path finds the store's tables: what commits with tx is appended, by its rules. Package
// jobs queues a run and appends its message in one transaction this way, where two would each
// wait for the disk.
func (s *Store) AppendTx(ctx context.Context, tx pgx.Tx, workspaceID, threadID string, msgs ...*store.Message) error {
	op := "append to thread " + threadID
	if len(msgs) == 0 {
		return fmt.Errorf("postgres: %s: no messages: %w", op, store.ErrInvalid)
	}
	b, err := newBatch(ctx, threadID, msgs)
	if err != nil {
		return fmt.Errorf("postgres: %s: %w", op, err)
	}
	var base int64
	var at time.Time
	if err := tx.QueryRow(ctx, appendSQL, b.args(threadID, workspaceID, nil)...).Scan(&base, &at, new(bool)); err != nil {
		return dialect.Err(op, err)
	}
	b.fill(msgs, threadID, base, at)
	return nil
}

// args are appendSQL's arguments for the batch; at nil means the time of the statement.
func (b *batch) args(threadID, workspaceID string, at *time.Time) []any {
	return []any{threadID, workspaceID, int64(len(b.ids)),
		b.ids, b.roles, b.contents, b.calls, b.callIDs, b.toolNames, b.results,
		b.callCallIDs, b.callPos, b.callIdx, b.callNames, b.callArgs, b.callReasoning, at, b.sides, b.usages}
}

// fill sets what Append promises on messages stored from the batch.
func (b *batch) fill(msgs []*store.Message, threadID string, base int64, at time.Time) {
	at = at.UTC()
	for i, m := range msgs {
		m.ID, m.ThreadID, m.Seq, m.CreatedAt = b.ids[i], threadID, base+int64(i)+1, at
	}
}

// AppendBatch applies ops in order in one transaction (see store.BatchAppender): all of them,
// or none and a *store.BatchError naming the op that failed. Each op follows Append's rules;
// its messages' CreatedAt is the op's At when set.
func (s *Store) AppendBatch(ctx context.Context, ops []store.AppendOp) error {
	batches := make([]*batch, len(ops))
	for k, op := range ops {
		b, err := newBatch(ctx, op.ThreadID, op.Messages)
		if err != nil {
			return &store.BatchError{Index: k, Err: fmt.Errorf("postgres: append to thread %s: %w", op.ThreadID, err)}
		}
		batches[k] = b
	}
	bases := make([]int64, len(ops))
	ats := make([]time.Time, len(ops))
	ctx, cancel, err := writeContext(ctx)
	if err != nil {
		return fmt.Errorf("postgres: append batch: %w", err)
	}
	defer cancel()
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		for k, op := range ops {
			if err := s.appendOp(ctx, tx, op, batches[k], &bases[k], &ats[k]); err != nil {
				return &store.BatchError{Index: k, Err: err}
			}
		}
		return nil
	})
	if _, ok := err.(*store.BatchError); ok {
		return err
	}
	if err != nil {
		return fmt.Errorf("postgres: append batch: %w", err)
	}
	for k, op := range ops {
		batches[k].fill(op.Messages, op.ThreadID, bases[k], ats[k])
	}
	return nil
}

// appendOp appends one op of a batch inside tx, reading its first seq but one into base and
// its time into at; an op without messages only checks its thread.
func (s *Store) appendOp(ctx context.Context, tx pgx.Tx, op store.AppendOp, b *batch, base *int64, at *time.Time) error {
	if len(op.Messages) == 0 {
		_, err := s.Thread(ctx, op.WorkspaceID, op.ThreadID)
		return err
	}
	var opAt *time.Time
	if !op.At.IsZero() {
		opAt = &op.At
	}
	err := tx.QueryRow(ctx, appendSQL, b.args(op.ThreadID, op.WorkspaceID, opAt)...).Scan(base, at, new(bool))
	if err != nil {
		return dialect.Err("append to thread "+op.ThreadID, err)
	}
	return nil
}

// Messages returns up to page.Limit messages of the thread with Seq below page.Before (0: from
// the newest), oldest first. A limit outside 0 to 1000 is store.ErrInvalid; 0 means 100.
func (s *Store) Messages(ctx context.Context, workspaceID, threadID string, page store.Page) ([]*store.Message, error) {
	op := "read messages of thread " + threadID
	limit, before, err := store.PageBounds(page)
	if err != nil {
		return nil, fmt.Errorf("postgres: %s: %w", op, err)
	}
	rows, err := s.pool.Query(ctx, `SELECT id, seq, role, content, tool_calls, COALESCE(tool_call_id, ''), tool_name, result, created_at, side, usage
FROM messages
WHERE thread_id = $1 AND seq < $3 AND EXISTS (SELECT FROM threads WHERE id = $1 AND workspace_id = $2)
ORDER BY seq DESC LIMIT $4`, threadID, workspaceID, before, limit)
	if err != nil {
		return nil, dialect.Err(op, err)
	}
	out, err := scanMessages(rows, threadID)
	if err != nil {
		return nil, fmt.Errorf("postgres: %s: %w", op, err)
	}
	if len(out) == 0 {
		// No message: an empty page, or no such thread in this workspace.
		if _, err := s.Thread(ctx, workspaceID, threadID); err != nil {
			return nil, err
		}
	}
	slices.Reverse(out)
	return out, nil
}

// scanMessages reads the rows of a query selecting id, seq, role, content, tool_calls,
// tool_call_id, tool_name, result, created_at, side, usage, and closes them.
func scanMessages(rows pgx.Rows, threadID string) ([]*store.Message, error) {
	defer rows.Close()
	var out []*store.Message
	var calls, result, usage []byte
	for rows.Next() {
		m := &store.Message{ThreadID: threadID}
		if err := rows.Scan(&m.ID, &m.Seq, &m.Role, &m.Content, &calls, &m.ToolCallID, &m.ToolName, &result, &m.CreatedAt, &m.Side, &usage); err != nil {
			return nil, err
		}
		if err := store.DecodeUsage(m, usage); err != nil {
			return nil, err
		}
		m.CreatedAt = m.CreatedAt.UTC()
		if err := store.DecodeStoredMessage(m, calls, result); err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// PendingCalls returns the calls of the thread that have no result yet, in the order they were
// asked for, or store.ErrNotFound when the workspace has no such thread.
func (s *Store) PendingCalls(ctx context.Context, workspaceID, threadID string) ([]store.ToolCall, error) {
	op := "list pending calls of thread " + threadID
	rows, err := s.pool.Query(ctx, `SELECT c.call_id, c.name, c.args, c.reasoning
FROM threads t
LEFT JOIN tool_calls c ON c.thread_id = t.id
	AND NOT EXISTS (SELECT FROM messages m WHERE m.thread_id = c.thread_id AND m.tool_call_id = c.call_id)
WHERE t.id = $1 AND t.workspace_id = $2
ORDER BY c.message_seq, c.idx`, threadID, workspaceID)
	if err != nil {
		return nil, dialect.Err(op, err)
	}
	var out []store.ToolCall
	found := false
	for rows.Next() {
		found = true
		var id, name, reasoning *string
		var args []byte
		if err := rows.Scan(&id, &name, &args, &reasoning); err != nil {
			rows.Close()
			return nil, dialect.Err(op, err)
		}
		if id == nil {
			continue // the thread's row, with no pending call joined
		}
		c := store.ToolCall{ID: *id, Name: *name, Reasoning: *reasoning}
		if len(args) > 0 {
			c.Args = json.RawMessage(slices.Clone(args))
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, dialect.Err(op, err)
	}
	if !found {
		return nil, fmt.Errorf("postgres: %s: %w", op, store.ErrNotFound)
	}
	return out, nil
}

// dbError maps a database error to the store's errors, with op saying what failed.
// writeTimeout bounds an append once it has started (see writeContext).
const writeTimeout = 30 * time.Second

// writeContext is the context an append runs with: the caller's values without its
// cancellation, bounded by writeTimeout, or ctx's error when it has already ended. A statement
// cancelled while it runs may still commit on the server after the client has given up on it,
// so a caller told "cancelled" could see its messages appear later: a run resumed at once would
// read the calls as not yet made and the history as holding them, and skip them. Once begun, an
// append runs to its end, so that what the caller is told is what the database holds.
func writeContext(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	return wctx, cancel, nil
}
