-- 0004: workspaces, users, memberships, schemas, functions with versions, and tools (E1-E6).
--
-- Times are Unix nanoseconds (UTC). A NULL workspace_id marks a system record (built in, in no
-- workspace). The store checks in Go, inside each write transaction, that what a record refers
-- to belongs to its workspace; the constraints below are the backstop.

CREATE TABLE workspaces (
    id                      TEXT    NOT NULL PRIMARY KEY,
    name                    TEXT    NOT NULL,
    default_runtime_user_id TEXT    REFERENCES users (id),  -- a member (checked by the store)
    retention_tier          TEXT    NOT NULL DEFAULT 'medium'
                                    CHECK (retention_tier IN ('short', 'medium', 'long', 'none')),
    created_at              INTEGER NOT NULL,
    updated_at              INTEGER NOT NULL
) STRICT;

CREATE TABLE users (
    id         TEXT    NOT NULL PRIMARY KEY,
    email      TEXT    NOT NULL,
    email_key  TEXT    NOT NULL UNIQUE,                     -- trimmed, lower-cased email
    name       TEXT    NOT NULL DEFAULT '',
    created_at INTEGER NOT NULL
) STRICT;

CREATE TABLE memberships (
    workspace_id TEXT    NOT NULL REFERENCES workspaces (id),
    user_id      TEXT    NOT NULL REFERENCES users (id),
    role         TEXT    NOT NULL CHECK (role IN ('admin', 'member')),
    created_at   INTEGER NOT NULL,
    PRIMARY KEY (workspace_id, user_id)
) STRICT, WITHOUT ROWID;

CREATE INDEX memberships_user ON memberships (user_id);

CREATE TABLE schemas (
    id           TEXT    NOT NULL PRIMARY KEY,
    workspace_id TEXT    REFERENCES workspaces (id),
    content      TEXT    NOT NULL CHECK (json_valid(content)),
    created_at   INTEGER NOT NULL
) STRICT;

CREATE TABLE functions (
    id                 TEXT    NOT NULL PRIMARY KEY,
    workspace_id       TEXT    REFERENCES workspaces (id),
    name               TEXT    NOT NULL CHECK (name <> ''),
    default_version_id TEXT,
    created_at         INTEGER NOT NULL,
    updated_at         INTEGER NOT NULL,
    -- The default version is a version of this function.
    FOREIGN KEY (id, default_version_id) REFERENCES function_versions (function_id, id)
) STRICT;

CREATE UNIQUE INDEX functions_name ON functions (coalesce(workspace_id, ''), name);
CREATE INDEX functions_list ON functions (workspace_id, created_at, id);

CREATE TABLE function_versions (
    id               TEXT    NOT NULL PRIMARY KEY,
    function_id      TEXT    NOT NULL REFERENCES functions (id),
    version          INTEGER NOT NULL CHECK (version > 0),  -- 1, 2, 3... per function
    code             TEXT    NOT NULL,
    input_schema_id  TEXT    REFERENCES schemas (id),
    output_schema_id TEXT    REFERENCES schemas (id),
    created_at       INTEGER NOT NULL,
    UNIQUE (function_id, version),
    UNIQUE (function_id, id)
) STRICT;

CREATE TABLE tools (
    id                    TEXT    NOT NULL PRIMARY KEY,
    workspace_id          TEXT    REFERENCES workspaces (id),
    name                  TEXT    NOT NULL CHECK (name <> ''),
    description           TEXT,
    target                TEXT    NOT NULL CHECK (target IN ('server', 'client')),
    function_id           TEXT    REFERENCES functions (id),
    function_version_id   TEXT,
    input_schema_id       TEXT    NOT NULL REFERENCES schemas (id),
    output_schema_id      TEXT    NOT NULL REFERENCES schemas (id),
    examples              TEXT    CHECK (examples IS NULL OR json_valid(examples)),
    requires_confirmation INTEGER NOT NULL CHECK (requires_confirmation IN (0, 1)),
    enabled               INTEGER NOT NULL CHECK (enabled IN (0, 1)),
    system                INTEGER NOT NULL CHECK (system IN (0, 1)),
    created_by            TEXT    REFERENCES users (id),
    runtime_user_id       TEXT    REFERENCES users (id),
    deleted_at            INTEGER,
    retention_tier        TEXT    CHECK (retention_tier IN ('short', 'medium', 'long', 'none')),
    purge_at              INTEGER,                       -- deleted_at + the tier's days; NULL: never
    created_at            INTEGER NOT NULL,
    updated_at            INTEGER NOT NULL,
    -- A pinned version is a version of the tool's function.
    FOREIGN KEY (function_id, function_version_id) REFERENCES function_versions (function_id, id),
    -- A server tool wraps a function, a client tool none (E1).
    CHECK ((target = 'server') = (function_id IS NOT NULL)),
    CHECK (function_version_id IS NULL OR function_id IS NOT NULL),
    -- System tools, and only they, belong to no workspace.
    CHECK (system = (workspace_id IS NULL)),
    CHECK ((deleted_at IS NULL) = (retention_tier IS NULL)),
    CHECK (purge_at IS NULL OR deleted_at IS NOT NULL)
) STRICT;

-- Names are unique among the active tools of a workspace (and among the system tools).
CREATE UNIQUE INDEX tools_name ON tools (coalesce(workspace_id, ''), name) WHERE deleted_at IS NULL;
-- Keyset paging: the listing order within a workspace.
CREATE INDEX tools_list ON tools (workspace_id, created_at, id);
CREATE INDEX tools_function ON tools (function_id) WHERE function_id IS NOT NULL;
-- The cleanup worker's queue.
CREATE INDEX tools_purge ON tools (purge_at) WHERE purge_at IS NOT NULL;
