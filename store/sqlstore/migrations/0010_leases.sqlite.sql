-- 0010: leases, the capped places every node of a fleet shares (see the PostgreSQL migration).
-- Times are Unix nanoseconds (UTC).

CREATE TABLE leases (
    id           TEXT    NOT NULL PRIMARY KEY,
    workspace_id TEXT    NOT NULL,
    kind         TEXT    NOT NULL,
    owner        TEXT    NOT NULL,
    holder       TEXT    NOT NULL DEFAULT '',
    data         TEXT,
    created_at   INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL
) STRICT;

CREATE INDEX leases_live ON leases (kind, workspace_id, owner, expires_at);
