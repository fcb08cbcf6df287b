-- 0002: the thread file system (SPEC R5-R7), stored in the database so that every node sharing
-- it sees the same files.
--
-- One row per file or directory of a thread; the root directory "/" of every thread exists
-- implicitly and has no row. parent is the directory holding the entry ('/' or the path of a
-- directory row of the same thread): listing a directory is an index range on (thread_id,
-- parent), a subtree a range on the primary key. Paths use the "C" collation, so they compare
-- byte by byte whatever the database's locale and those ranges are exact.
--
-- Constraint names are part of the contract with files.go.

CREATE TABLE files (
	thread_id   text        NOT NULL,
	path        text COLLATE "C" NOT NULL,
	parent      text COLLATE "C" NOT NULL,
	id          text        NOT NULL,               -- fil_..., new each time content is written
	is_dir      boolean     NOT NULL,
	size        bigint      NOT NULL DEFAULT 0,
	mime_type   text        NOT NULL DEFAULT '',
	width       integer     NOT NULL DEFAULT 0,
	height      integer     NOT NULL DEFAULT 0,
	description text        NOT NULL DEFAULT '',
	mod_time    timestamptz NOT NULL,
	data        bytea,                              -- NULL for a directory
	CONSTRAINT files_pkey PRIMARY KEY (thread_id, path),
	CONSTRAINT files_id_key UNIQUE (id),
	CONSTRAINT files_thread_fkey FOREIGN KEY (thread_id) REFERENCES threads (id) ON DELETE CASCADE,
	CONSTRAINT files_path_check CHECK (left(path, 1) = '/' AND path <> '/' AND left(parent, 1) = '/'),
	CONSTRAINT files_size_check CHECK (size >= 0 AND width >= 0 AND height >= 0),
	CONSTRAINT files_dir_check CHECK (CASE WHEN is_dir THEN data IS NULL AND size = 0
		ELSE data IS NOT NULL AND size = octet_length(data) END)
);

CREATE INDEX files_children ON files (thread_id, parent, path);

-- What a thread's files hold, kept by every write in the same transaction, so that the size
-- caps are checked without summing the files. Every change to a thread's files first locks its
-- row here: changes to one thread's files take turns across connections and nodes (the caps
-- hold under concurrent writers), while appends to the thread's messages, which lock the
-- thread row, are not held up.
CREATE TABLE file_usage (
	thread_id text   NOT NULL,
	bytes     bigint NOT NULL DEFAULT 0,   -- sum of the files' sizes
	entries   bigint NOT NULL DEFAULT 0,   -- files and directories
	CONSTRAINT file_usage_pkey PRIMARY KEY (thread_id),
	CONSTRAINT file_usage_thread_fkey FOREIGN KEY (thread_id) REFERENCES threads (id) ON DELETE CASCADE,
	CONSTRAINT file_usage_check CHECK (bytes >= 0 AND entries >= 0)
);
