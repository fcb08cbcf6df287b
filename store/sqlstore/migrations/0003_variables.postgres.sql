-- 0003: variable values (SPEC V2-V5), per layer and owner, within a workspace.
--
-- owner_id is the thread id, agent id, prompt name or user id the value belongs to, and '' for
-- the instance layer. A secret's value is stored sealed (AES-256-GCM, by package store/vars):
-- its plaintext never reaches this table. scoped marks a thread value provided as scoped.

CREATE TABLE variables (
	workspace_id text        NOT NULL,
	layer        text        NOT NULL,
	owner_id     text        NOT NULL,
	name         text        NOT NULL,
	value        text        NOT NULL,
	secret       boolean     NOT NULL DEFAULT false,
	scoped       boolean     NOT NULL DEFAULT false,
	created_at   timestamptz NOT NULL,
	updated_at   timestamptz NOT NULL,
	CONSTRAINT variables_pkey PRIMARY KEY (workspace_id, layer, owner_id, name),
	CONSTRAINT variables_workspace_check CHECK (workspace_id <> ''),
	CONSTRAINT variables_name_check CHECK (name <> ''),
	CONSTRAINT variables_layer_check CHECK (layer IN ('thread', 'agent', 'prompt', 'user', 'instance')),
	-- The instance layer has no owner; every other layer has one.
	CONSTRAINT variables_owner_check CHECK ((layer = 'instance') = (owner_id = ''))
);

-- Key rotation reads every secret value.
CREATE INDEX variables_secrets ON variables (workspace_id) WHERE secret;
