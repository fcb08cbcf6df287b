-- 0015: the configuration every node of a fleet shares (store.FleetConfigs): its versions, each
-- stored whole (content, as the platform encodes it) and never changed, and the documents they
-- refer to (OpenAPI documents), each stored once under the SHA-256 of its content, so that a
-- version that changes an agent copies no document. documents lists the digests a version
-- refers to, as a JSON array. Not a workspace's: the operator's, for every workspace.

CREATE TABLE fleet_config (
	version    bigint      NOT NULL,
	digest     text        NOT NULL,
	content    bytea       NOT NULL,
	documents  text        NOT NULL DEFAULT '[]',
	applied_by text        NOT NULL DEFAULT '',
	created_at timestamptz NOT NULL,
	CONSTRAINT fleet_config_pkey PRIMARY KEY (version),
	CONSTRAINT fleet_config_version_check CHECK (version > 0)
);

CREATE TABLE fleet_documents (
	digest     text        NOT NULL,
	content    bytea       NOT NULL,
	created_at timestamptz NOT NULL,
	CONSTRAINT fleet_documents_pkey PRIMARY KEY (digest)
);
