-- 0015: the configuration every node of a fleet shares (store.FleetConfigs): its versions, each
-- stored whole (content, as the platform encodes it) and never changed, and the documents they
-- refer to (OpenAPI documents), each stored once under the SHA-256 of its content, so that a
-- version that changes an agent copies no document. documents lists the digests a version
-- refers to, as a JSON array. Not a workspace's: the operator's, for every workspace. Times are
-- Unix nanoseconds (UTC).

CREATE TABLE fleet_config (
    version    INTEGER NOT NULL PRIMARY KEY CHECK (version > 0),
    digest     TEXT    NOT NULL,
    content    BLOB    NOT NULL,
    documents  TEXT    NOT NULL DEFAULT '[]',
    applied_by TEXT    NOT NULL DEFAULT '',
    created_at INTEGER NOT NULL
) STRICT;

CREATE TABLE fleet_documents (
    digest     TEXT    NOT NULL PRIMARY KEY,
    content    BLOB    NOT NULL,
    created_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
