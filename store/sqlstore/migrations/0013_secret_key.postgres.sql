-- 0013: which key seals the secret values (store.SecretKeys): the id of the current key
-- (secret.Key.ID, the first 8 hex digits of its SHA-256: never the key itself), so that a node
-- started with another key refuses to start rather than seal values the other nodes cannot
-- open. One row at most.

CREATE TABLE secret_key (
	one        integer     NOT NULL,
	key_id     text        NOT NULL,
	updated_at timestamptz NOT NULL,
	CONSTRAINT secret_key_pkey PRIMARY KEY (one),
	CONSTRAINT secret_key_one_check CHECK (one = 1),
	CONSTRAINT secret_key_key_id_check CHECK (key_id <> '')
);
