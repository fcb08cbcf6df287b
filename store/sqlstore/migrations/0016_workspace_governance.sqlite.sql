-- 0016: the governance rules a workspace's admins set on its tools (store.Governances), as the
-- platform encodes them (a JSON array), with the version of the workspace's latest change.
-- One row per workspace that ever set rules. Times are Unix nanoseconds (UTC).

CREATE TABLE workspace_governance (
    workspace_id TEXT    NOT NULL PRIMARY KEY REFERENCES workspaces (id),
    rules        TEXT    NOT NULL,
    version      INTEGER NOT NULL CHECK (version > 0),
    updated_by   TEXT    NOT NULL DEFAULT '',
    updated_at   INTEGER NOT NULL
) STRICT;
