-- 0009: a thread's state (SPEC M2, M3), the JSON object calls write their outputs into with
-- _outputPath, and its named instances, each an object of its own.
--
-- thread_states has a row per object: instance '' is the thread's own, created at its first
-- write; a named instance's row is created by AddInstances, and a write to an instance
-- without one is refused. size is the bytes of the paths and values written, which
-- store.MaxStateBytes caps.
--
-- thread_state_values has a row per path written, its value as written: paths are written
-- once, so a write is a few index lookups (is the path, a path above it or one below it
-- written?) and an insert, whatever the size of the state, where one JSON document per object
-- would be read, decoded, changed and written back whole. No row's path is a prefix of
-- another's: a write below a written path goes into that path's value, which is then
-- decoded and written back (that value only). Reading the state
-- assembles the object from the rows.

CREATE TABLE thread_states (
    thread_id  TEXT    NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
    instance   TEXT    NOT NULL DEFAULT '',
    size       INTEGER NOT NULL DEFAULT 0,
    updated_at INTEGER NOT NULL,                -- the last write, for whoever looks at the table
    PRIMARY KEY (thread_id, instance)
) STRICT, WITHOUT ROWID;

CREATE TABLE thread_state_values (
    thread_id TEXT NOT NULL,
    instance  TEXT NOT NULL,
    path      TEXT NOT NULL,    -- a JSON Pointer, escaped (RFC 6901); compared bytewise
    value     TEXT NOT NULL,    -- JSON, as written
    PRIMARY KEY (thread_id, instance, path),
    FOREIGN KEY (thread_id, instance) REFERENCES thread_states (thread_id, instance) ON DELETE CASCADE
) STRICT, WITHOUT ROWID;
