-- 0012: the OpenAPI documents a workspace imported (store.OpenAPISource); their operations are
-- the workspace's tools. options is JSON: servers, operations, credentials, timeout_ms,
-- max_response_bytes. Times are Unix nanoseconds (UTC).

CREATE TABLE openapi_sources (
    workspace_id TEXT    NOT NULL REFERENCES workspaces (id),
    name         TEXT    NOT NULL,
    document     BLOB    NOT NULL,
    options      TEXT    NOT NULL DEFAULT '{}',
    created_by   TEXT    NOT NULL DEFAULT '',
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    PRIMARY KEY (workspace_id, name)
) STRICT, WITHOUT ROWID;
