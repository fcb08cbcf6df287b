-- 0016: the governance rules a workspace's admins set on its tools (store.Governances), as the
-- platform encodes them (a JSON array), with the version of the workspace's latest change.
-- One row per workspace that ever set rules.

CREATE TABLE workspace_governance (
	workspace_id text        NOT NULL REFERENCES workspaces (id),
	rules        text        NOT NULL,
	version      bigint      NOT NULL,
	updated_by   text        NOT NULL DEFAULT '',
	updated_at   timestamptz NOT NULL,
	CONSTRAINT workspace_governance_pkey PRIMARY KEY (workspace_id),
	CONSTRAINT workspace_governance_version_check CHECK (version > 0)
);
