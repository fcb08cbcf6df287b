-- 0018: who may see and call which tool.
--
-- workspace_entitlements: a workspace's entitlement document (store.Entitlements), as the
-- platform encodes it (a JSON object), with the version of the workspace's latest change. One
-- row per workspace that ever stored one. Times are Unix nanoseconds (UTC).
--
-- api_keys.toolsets: the toolsets a key is bound to (store.APIKey.Toolsets), a JSON array of
-- their names; '[]' for a key bound to none, as every key made before.

CREATE TABLE workspace_entitlements (
    workspace_id TEXT    NOT NULL PRIMARY KEY REFERENCES workspaces (id),
    document     TEXT    NOT NULL,
    version      INTEGER NOT NULL CHECK (version > 0),
    updated_by   TEXT    NOT NULL DEFAULT '',
    updated_at   INTEGER NOT NULL
) STRICT;

ALTER TABLE api_keys ADD COLUMN toolsets TEXT NOT NULL DEFAULT '[]';
