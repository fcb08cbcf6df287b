-- 0003: variable values (SPEC V2-V5), per layer and owner, within a workspace.
--
-- owner_id is the thread id, agent id, prompt name or user id the value belongs to, and '' for
-- the instance layer. A secret's value is stored sealed (AES-256-GCM, by package store/vars):
-- its plaintext never reaches this table. scoped marks a thread value provided as scoped.
-- Times are Unix nanoseconds (UTC).

CREATE TABLE variables (
    workspace_id TEXT    NOT NULL CHECK (workspace_id <> ''),
    layer        TEXT    NOT NULL CHECK (layer IN ('thread', 'agent', 'prompt', 'user', 'instance')),
    owner_id     TEXT    NOT NULL,
    name         TEXT    NOT NULL CHECK (name <> ''),
    value        TEXT    NOT NULL,
    secret       INTEGER NOT NULL DEFAULT 0 CHECK (secret IN (0, 1)),
    scoped       INTEGER NOT NULL DEFAULT 0 CHECK (scoped IN (0, 1)),
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    PRIMARY KEY (workspace_id, layer, owner_id, name),
    -- The instance layer has no owner; every other layer has one.
    CHECK ((layer = 'instance') = (owner_id = ''))
) STRICT;

-- Key rotation reads every secret value.
CREATE INDEX variables_secrets ON variables (workspace_id) WHERE secret = 1;
