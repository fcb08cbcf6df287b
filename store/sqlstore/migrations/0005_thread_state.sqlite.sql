-- 0005: the rest of the thread state: the children registry (status, blocking, resumable), the
-- runtime's run state, messages queued for the next step, decisions on calls that require
-- confirmation, and the thread's log.

ALTER TABLE threads ADD COLUMN status TEXT NOT NULL DEFAULT 'idle'
    CHECK (status IN ('idle', 'running', 'terminated'));
ALTER TABLE threads ADD COLUMN blocking INTEGER NOT NULL DEFAULT 0 CHECK (blocking IN (0, 1));
ALTER TABLE threads ADD COLUMN resumable INTEGER NOT NULL DEFAULT 0 CHECK (resumable IN (0, 1));
ALTER TABLE threads ADD COLUMN state TEXT;    -- JSON kept for the runtime

CREATE TABLE queued_messages (
    id         TEXT    NOT NULL PRIMARY KEY,
    thread_id  TEXT    NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
    role       TEXT    NOT NULL CHECK (role IN ('system', 'user', 'assistant')),
    content    TEXT    NOT NULL DEFAULT '',
    created_at INTEGER NOT NULL
) STRICT;

-- Queue order is insertion order (rowid increases with each insert).
CREATE INDEX queued_messages_thread ON queued_messages (thread_id);

CREATE TABLE call_decisions (
    thread_id  TEXT    NOT NULL,
    call_id    TEXT    NOT NULL,
    action     TEXT    NOT NULL CHECK (action IN ('approve', 'edit', 'deny')),
    args       TEXT,                               -- JSON object (edit)
    message    TEXT    NOT NULL DEFAULT '',
    user_id    TEXT    NOT NULL DEFAULT '',
    decided_at INTEGER NOT NULL,
    -- Decided once, and only a call the thread asked for.
    PRIMARY KEY (thread_id, call_id),
    FOREIGN KEY (thread_id, call_id) REFERENCES tool_calls (thread_id, call_id) ON DELETE CASCADE
) STRICT;

CREATE TABLE thread_logs (
    thread_id  TEXT    NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
    seq        INTEGER NOT NULL CHECK (seq > 0),
    level      TEXT    NOT NULL CHECK (level IN ('debug', 'info', 'warn', 'error')),
    message    TEXT    NOT NULL,
    data       TEXT,                               -- JSON
    time       INTEGER NOT NULL,
    PRIMARY KEY (thread_id, seq)
) STRICT, WITHOUT ROWID;
