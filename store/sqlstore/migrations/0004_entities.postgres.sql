-- 0004: workspaces, users, memberships, schemas, functions with versions, and tools (E1-E6).
--
-- A NULL workspace_id marks a system record (built in, in no workspace). The store checks,
-- inside each write transaction and under row locks, that what a record refers to belongs to
-- its workspace; the constraints below are the backstop. Constraint names are part of the
-- contract with entities.go, which maps violations of them to the store's errors.

CREATE TABLE users (
	id         text        NOT NULL,
	email      text        NOT NULL,
	email_key  text        NOT NULL,  -- trimmed, lower-cased email
	name       text        NOT NULL DEFAULT '',
	created_at timestamptz NOT NULL,
	CONSTRAINT users_pkey PRIMARY KEY (id),
	CONSTRAINT users_email_key UNIQUE (email_key)
);

CREATE TABLE workspaces (
	id                      text        NOT NULL,
	name                    text        NOT NULL,
	default_runtime_user_id text,      -- a member (checked by the store)
	retention_tier          text        NOT NULL DEFAULT 'medium',
	created_at              timestamptz NOT NULL,
	updated_at              timestamptz NOT NULL,
	CONSTRAINT workspaces_pkey PRIMARY KEY (id),
	CONSTRAINT workspaces_runtime_user_fkey FOREIGN KEY (default_runtime_user_id) REFERENCES users (id),
	CONSTRAINT workspaces_retention_tier_check CHECK (retention_tier IN ('short', 'medium', 'long', 'none'))
);

CREATE TABLE memberships (
	workspace_id text        NOT NULL,
	user_id      text        NOT NULL,
	role         text        NOT NULL,
	created_at   timestamptz NOT NULL,
	CONSTRAINT memberships_pkey PRIMARY KEY (workspace_id, user_id),
	CONSTRAINT memberships_workspace_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces (id),
	CONSTRAINT memberships_user_fkey FOREIGN KEY (user_id) REFERENCES users (id),
	CONSTRAINT memberships_role_check CHECK (role IN ('admin', 'member'))
);

CREATE INDEX memberships_user ON memberships (user_id);

CREATE TABLE schemas (
	id           text        NOT NULL,
	workspace_id text,
	-- json (not jsonb) keeps the document byte for byte.
	content      json        NOT NULL,
	created_at   timestamptz NOT NULL,
	CONSTRAINT schemas_pkey PRIMARY KEY (id),
	CONSTRAINT schemas_workspace_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces (id)
);

CREATE TABLE functions (
	id                 text        NOT NULL,
	workspace_id       text,
	name               text        NOT NULL,
	default_version_id text,
	created_at         timestamptz NOT NULL,
	updated_at         timestamptz NOT NULL,
	CONSTRAINT functions_pkey PRIMARY KEY (id),
	CONSTRAINT functions_workspace_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces (id),
	CONSTRAINT functions_name_check CHECK (name <> '')
);

CREATE UNIQUE INDEX functions_name ON functions (COALESCE(workspace_id, ''), name);
CREATE INDEX functions_list ON functions (workspace_id, created_at, id);

CREATE TABLE function_versions (
	id               text        NOT NULL,
	function_id      text        NOT NULL,
	version          integer     NOT NULL,  -- 1, 2, 3... per function
	code             text        NOT NULL,
	input_schema_id  text,
	output_schema_id text,
	created_at       timestamptz NOT NULL,
	CONSTRAINT function_versions_pkey PRIMARY KEY (id),
	CONSTRAINT function_versions_number_key UNIQUE (function_id, version),
	CONSTRAINT function_versions_function_id_key UNIQUE (function_id, id),
	CONSTRAINT function_versions_function_fkey FOREIGN KEY (function_id) REFERENCES functions (id),
	CONSTRAINT function_versions_input_fkey FOREIGN KEY (input_schema_id) REFERENCES schemas (id),
	CONSTRAINT function_versions_output_fkey FOREIGN KEY (output_schema_id) REFERENCES schemas (id),
	CONSTRAINT function_versions_version_check CHECK (version > 0)
);

-- The default version is a version of the function.
ALTER TABLE functions ADD CONSTRAINT functions_default_version_fkey
	FOREIGN KEY (id, default_version_id) REFERENCES function_versions (function_id, id);

CREATE TABLE tools (
	id                    text        NOT NULL,
	workspace_id          text,
	name                  text        NOT NULL,
	description           text,
	target                text        NOT NULL,
	function_id           text,
	function_version_id   text,
	input_schema_id       text        NOT NULL,
	output_schema_id      text        NOT NULL,
	examples              json,
	requires_confirmation boolean     NOT NULL,
	enabled               boolean     NOT NULL,
	system                boolean     NOT NULL,
	created_by            text,
	runtime_user_id       text,
	deleted_at            timestamptz,
	retention_tier        text,
	purge_at              timestamptz,  -- deleted_at + the tier's days; NULL: never
	created_at            timestamptz NOT NULL,
	updated_at            timestamptz NOT NULL,
	CONSTRAINT tools_pkey PRIMARY KEY (id),
	CONSTRAINT tools_workspace_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces (id),
	CONSTRAINT tools_function_fkey FOREIGN KEY (function_id) REFERENCES functions (id),
	-- A pinned version is a version of the tool's function.
	CONSTRAINT tools_version_fkey FOREIGN KEY (function_id, function_version_id) REFERENCES function_versions (function_id, id),
	CONSTRAINT tools_input_fkey FOREIGN KEY (input_schema_id) REFERENCES schemas (id),
	CONSTRAINT tools_output_fkey FOREIGN KEY (output_schema_id) REFERENCES schemas (id),
	CONSTRAINT tools_created_by_fkey FOREIGN KEY (created_by) REFERENCES users (id),
	CONSTRAINT tools_runtime_user_fkey FOREIGN KEY (runtime_user_id) REFERENCES users (id),
	CONSTRAINT tools_name_check CHECK (name <> ''),
	CONSTRAINT tools_target_check CHECK (target IN ('server', 'client')),
	-- A server tool wraps a function, a client tool none (E1).
	CONSTRAINT tools_function_check CHECK ((target = 'server') = (function_id IS NOT NULL)),
	CONSTRAINT tools_pin_check CHECK (function_version_id IS NULL OR function_id IS NOT NULL),
	-- System tools, and only they, belong to no workspace.
	CONSTRAINT tools_system_check CHECK (system = (workspace_id IS NULL)),
	CONSTRAINT tools_deleted_check CHECK ((deleted_at IS NULL) = (retention_tier IS NULL)),
	CONSTRAINT tools_retention_tier_check CHECK (retention_tier IN ('short', 'medium', 'long', 'none')),
	CONSTRAINT tools_purge_check CHECK (purge_at IS NULL OR deleted_at IS NOT NULL)
);

-- Names are unique among the active tools of a workspace (and among the system tools).
CREATE UNIQUE INDEX tools_name ON tools (COALESCE(workspace_id, ''), name) WHERE deleted_at IS NULL;
-- Keyset paging: the listing order within a workspace.
CREATE INDEX tools_list ON tools (workspace_id, created_at, id);
CREATE INDEX tools_function ON tools (function_id) WHERE function_id IS NOT NULL;
CREATE INDEX tools_runtime_user ON tools (workspace_id, runtime_user_id) WHERE runtime_user_id IS NOT NULL;
-- The cleanup worker's queue.
CREATE INDEX tools_purge ON tools (purge_at) WHERE purge_at IS NOT NULL;
