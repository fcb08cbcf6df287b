-- 0001: threads, messages and tool calls.
--
-- Times are Unix nanoseconds (UTC). JSON columns hold compact JSON written by the store.

CREATE TABLE threads (
    id           TEXT    NOT NULL PRIMARY KEY,
    workspace_id TEXT    NOT NULL CHECK (workspace_id <> ''),
    agent_id     TEXT    NOT NULL DEFAULT '',
    user_id      TEXT    NOT NULL DEFAULT '',
    parent_id    TEXT,                              -- NULL for a root thread
    tags         TEXT    NOT NULL DEFAULT '[]',     -- JSON array of strings
    step_count   INTEGER NOT NULL DEFAULT 0 CHECK (step_count >= 0),
    current_side TEXT    NOT NULL DEFAULT '',
    stopped      INTEGER NOT NULL DEFAULT 0 CHECK (stopped IN (0, 1)),
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    UNIQUE (workspace_id, id),
    -- A parent is a thread of the same workspace.
    FOREIGN KEY (workspace_id, parent_id) REFERENCES threads (workspace_id, id)
) STRICT;

CREATE INDEX threads_children ON threads (parent_id, created_at) WHERE parent_id IS NOT NULL;

CREATE TABLE messages (
    id           TEXT    NOT NULL PRIMARY KEY,
    thread_id    TEXT    NOT NULL REFERENCES threads (id),
    seq          INTEGER NOT NULL CHECK (seq > 0),  -- 1, 2, 3... per thread, no gaps
    role         TEXT    NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
    content      TEXT    NOT NULL DEFAULT '',
    tool_calls   TEXT,                              -- JSON array of calls (assistant)
    tool_call_id TEXT,                              -- the call a tool message answers
    tool_name    TEXT,
    result       TEXT,                              -- JSON result (tool)
    created_at   INTEGER NOT NULL,
    UNIQUE (thread_id, seq),
    -- A result answers a call of its own thread...
    FOREIGN KEY (thread_id, tool_call_id) REFERENCES tool_calls (thread_id, call_id),
    -- ...and only tool messages answer calls.
    CHECK ((role = 'tool') = (tool_call_id IS NOT NULL))
) STRICT;

-- Exactly once: a call has at most one result, whichever process writes it.
CREATE UNIQUE INDEX messages_one_result ON messages (thread_id, tool_call_id)
    WHERE tool_call_id IS NOT NULL;

CREATE TABLE tool_calls (
    thread_id TEXT    NOT NULL,
    call_id   TEXT    NOT NULL CHECK (call_id <> ''),
    seq       INTEGER NOT NULL,                     -- the assistant message asking for it
    idx       INTEGER NOT NULL,                     -- its place among that message's calls
    name      TEXT    NOT NULL,
    args      TEXT,                                 -- JSON
    reasoning TEXT    NOT NULL DEFAULT '',
    -- A call id is unique within a thread.
    PRIMARY KEY (thread_id, call_id),
    FOREIGN KEY (thread_id, seq) REFERENCES messages (thread_id, seq)
) STRICT, WITHOUT ROWID;
