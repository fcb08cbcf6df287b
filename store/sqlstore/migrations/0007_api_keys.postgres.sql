-- 0007: API keys. The key itself is never stored: its SHA-256 (hash) finds the record, and its
-- first characters (prefix) recognise it in a list.

CREATE TABLE api_keys (
	id           text        NOT NULL,
	workspace_id text        NOT NULL,
	user_id      text        NOT NULL,
	name         text        NOT NULL,
	role         text        NOT NULL,
	prefix       text        NOT NULL,
	hash         bytea       NOT NULL,
	created_at   timestamptz NOT NULL,
	expires_at   timestamptz,
	revoked_at   timestamptz,
	last_used_at timestamptz,
	CONSTRAINT api_keys_pkey PRIMARY KEY (id),
	CONSTRAINT api_keys_workspace_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces (id),
	CONSTRAINT api_keys_user_fkey FOREIGN KEY (user_id) REFERENCES users (id),
	CONSTRAINT api_keys_role_check CHECK (role IN ('admin', 'member', 'viewer')),
	CONSTRAINT api_keys_hash_key UNIQUE (hash),
	CONSTRAINT api_keys_hash_check CHECK (octet_length(hash) = 32)
);

CREATE INDEX api_keys_workspace ON api_keys (workspace_id, created_at);
