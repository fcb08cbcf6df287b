-- 0013: which key seals the secret values (store.SecretKeys): the id of the current key
-- (secret.Key.ID, the first 8 hex digits of its SHA-256: never the key itself), so that a node
-- started with another key refuses to start rather than seal values the other nodes cannot
-- open. One row at most. Times are Unix nanoseconds (UTC).

CREATE TABLE secret_key (
    one        INTEGER NOT NULL PRIMARY KEY CHECK (one = 1),
    key_id     TEXT    NOT NULL CHECK (key_id <> ''),
    updated_at INTEGER NOT NULL
) STRICT;
