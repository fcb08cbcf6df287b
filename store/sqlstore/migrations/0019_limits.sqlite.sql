-- 0019: how often the callers of a workspace may call.
--
-- workspace_limits: a workspace's limits document (store.Limits), as the platform encodes it
-- (a JSON object), with the version of the workspace's latest change. One row per workspace
-- that ever stored one. Times are Unix nanoseconds (UTC).
--
-- The counts of the limits are not kept here: one process serves a SQLite database, and
-- counts them in memory (see platform/limits).

CREATE TABLE workspace_limits (
    workspace_id TEXT    NOT NULL PRIMARY KEY REFERENCES workspaces (id),
    document     TEXT    NOT NULL,
    version      INTEGER NOT NULL CHECK (version > 0),
    updated_by   TEXT    NOT NULL DEFAULT '',
    updated_at   INTEGER NOT NULL
) STRICT;
