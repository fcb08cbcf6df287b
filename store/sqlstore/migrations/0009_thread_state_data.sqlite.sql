-- 0009: a thread's state (SPEC M2, M3), the JSON object calls write their outputs into with
-- _outputPath, and its named instances, each an object of its own. One row per object:
-- instance '' is the thread's own, created at its first write; a named instance's row is
-- created empty by AddInstances, and a write to an instance without a row is refused. A row of
-- its own rather than a column of threads, because a run updates its thread at every step and
-- need not read or rewrite a state of up to a megabyte each time (store.MaxStateBytes).

CREATE TABLE thread_states (
    thread_id  TEXT    NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
    instance   TEXT    NOT NULL DEFAULT '',
    data       TEXT    NOT NULL DEFAULT '{}',   -- a JSON object, as the store encoded it
    updated_at INTEGER NOT NULL,                -- the last write, for whoever looks at the table
    PRIMARY KEY (thread_id, instance)
) STRICT, WITHOUT ROWID;
