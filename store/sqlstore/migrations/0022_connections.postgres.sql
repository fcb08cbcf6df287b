-- 0022: users' connections to the providers a workspace declares (OAuth authorization servers
-- where each person connects an account of their own; see platform/connect).
--
-- workspace_connections: a workspace's providers document (store.WorkspaceConnections),
-- versioned as its limits are. user_connections: each user's connection to a provider, its
-- tokens sealed by the platform (the database never sees them in the clear). connection_flows:
-- the connections being made, found by the hash of their state, each finished once (and,
-- for one started in a browser, only in that browser: browser_hash).

CREATE TABLE workspace_connections (
	workspace_id text        NOT NULL REFERENCES workspaces (id),
	document     text        NOT NULL,
	version      bigint      NOT NULL,
	updated_by   text        NOT NULL DEFAULT '',
	updated_at   timestamptz NOT NULL,
	CONSTRAINT workspace_connections_pkey PRIMARY KEY (workspace_id),
	CONSTRAINT workspace_connections_version_check CHECK (version > 0)
);

CREATE TABLE user_connections (
	workspace_id  text        NOT NULL REFERENCES workspaces (id),
	user_id       text        NOT NULL,
	provider      text        NOT NULL,
	access_token  text        NOT NULL,
	refresh_token text        NOT NULL DEFAULT '',
	scopes        text        NOT NULL DEFAULT '',
	expires_at    timestamptz,
	created_at    timestamptz NOT NULL,
	updated_at    timestamptz NOT NULL,
	CONSTRAINT user_connections_pkey PRIMARY KEY (workspace_id, user_id, provider)
);

CREATE TABLE connection_flows (
	state_hash   text        NOT NULL,
	workspace_id text        NOT NULL REFERENCES workspaces (id),
	user_id      text        NOT NULL,
	provider     text        NOT NULL,
	verifier     text        NOT NULL,
	scopes       text        NOT NULL DEFAULT '',
	return_to    text        NOT NULL DEFAULT '',
	browser_hash text        NOT NULL DEFAULT '',
	expires_at   timestamptz NOT NULL,
	created_at   timestamptz NOT NULL,
	CONSTRAINT connection_flows_pkey PRIMARY KEY (state_hash)
);

CREATE INDEX connection_flows_user ON connection_flows (workspace_id, user_id, created_at);
