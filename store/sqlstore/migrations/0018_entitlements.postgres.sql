-- 0018: who may see and call which tool.
--
-- workspace_entitlements: a workspace's entitlement document (store.Entitlements), as the
-- platform encodes it (a JSON object), with the version of the workspace's latest change. One
-- row per workspace that ever stored one.
--
-- api_keys.toolsets: the toolsets a key is bound to (store.APIKey.Toolsets), a JSON array of
-- their names; '[]' for a key bound to none, as every key made before.

CREATE TABLE workspace_entitlements (
	workspace_id text        NOT NULL REFERENCES workspaces (id),
	document     text        NOT NULL,
	version      bigint      NOT NULL,
	updated_by   text        NOT NULL DEFAULT '',
	updated_at   timestamptz NOT NULL,
	CONSTRAINT workspace_entitlements_pkey PRIMARY KEY (workspace_id),
	CONSTRAINT workspace_entitlements_version_check CHECK (version > 0)
);

ALTER TABLE api_keys ADD COLUMN toolsets text NOT NULL DEFAULT '[]';
