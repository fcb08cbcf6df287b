-- 0022: users' connections to the providers a workspace declares (OAuth authorization servers
-- where each person connects an account of their own; see platform/connect).
--
-- workspace_connections: a workspace's providers document (store.WorkspaceConnections),
-- versioned as its limits are. user_connections: each user's connection to a provider, its
-- tokens sealed by the platform (the database never sees them in the clear). connection_flows:
-- the connections being made, found by the hash of their state, each finished once (and,
-- for one started in a browser, only in that browser: browser_hash). Times are
-- Unix nanoseconds (UTC).

CREATE TABLE workspace_connections (
    workspace_id TEXT    NOT NULL PRIMARY KEY REFERENCES workspaces (id),
    document     TEXT    NOT NULL,
    version      INTEGER NOT NULL CHECK (version > 0),
    updated_by   TEXT    NOT NULL DEFAULT '',
    updated_at   INTEGER NOT NULL
) STRICT;

CREATE TABLE user_connections (
    workspace_id  TEXT    NOT NULL REFERENCES workspaces (id),
    user_id       TEXT    NOT NULL,
    provider      TEXT    NOT NULL,
    access_token  TEXT    NOT NULL,
    refresh_token TEXT    NOT NULL DEFAULT '',
    scopes        TEXT    NOT NULL DEFAULT '',
    expires_at    INTEGER,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL,
    PRIMARY KEY (workspace_id, user_id, provider)
) STRICT;

CREATE TABLE connection_flows (
    state_hash   TEXT    NOT NULL PRIMARY KEY,
    workspace_id TEXT    NOT NULL REFERENCES workspaces (id),
    user_id      TEXT    NOT NULL,
    provider     TEXT    NOT NULL,
    verifier     TEXT    NOT NULL,
    scopes       TEXT    NOT NULL DEFAULT '',
    return_to    TEXT    NOT NULL DEFAULT '',
    browser_hash TEXT    NOT NULL DEFAULT '',
    expires_at   INTEGER NOT NULL,
    created_at   INTEGER NOT NULL
) STRICT;

CREATE INDEX connection_flows_user ON connection_flows (workspace_id, user_id, created_at);
