-- 0007: API keys. The key itself is never stored: its SHA-256 (hash) finds the record, and its
-- first characters (prefix) recognise it in a list. Times are Unix nanoseconds (UTC).

CREATE TABLE api_keys (
    id           TEXT    NOT NULL PRIMARY KEY,
    workspace_id TEXT    NOT NULL REFERENCES workspaces (id),
    user_id      TEXT    NOT NULL REFERENCES users (id),
    name         TEXT    NOT NULL,
    role         TEXT    NOT NULL CHECK (role IN ('admin', 'member', 'viewer')),
    prefix       TEXT    NOT NULL,
    hash         BLOB    NOT NULL UNIQUE CHECK (length(hash) = 32),
    created_at   INTEGER NOT NULL,
    expires_at   INTEGER,
    revoked_at   INTEGER,
    last_used_at INTEGER
) STRICT;

CREATE INDEX api_keys_workspace ON api_keys (workspace_id, created_at);
