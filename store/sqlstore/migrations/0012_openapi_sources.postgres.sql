-- 0012: the OpenAPI documents a workspace imported (store.OpenAPISource); their operations are
-- the workspace's tools. options is JSON: servers, operations, credentials, timeout_ms,
-- max_response_bytes.

CREATE TABLE openapi_sources (
	workspace_id text        NOT NULL REFERENCES workspaces (id),
	name         text        NOT NULL,
	document     bytea       NOT NULL,
	options      text        NOT NULL DEFAULT '{}',
	created_by   text        NOT NULL DEFAULT '',
	created_at   timestamptz NOT NULL,
	updated_at   timestamptz NOT NULL,
	CONSTRAINT openapi_sources_pkey PRIMARY KEY (workspace_id, name)
);
