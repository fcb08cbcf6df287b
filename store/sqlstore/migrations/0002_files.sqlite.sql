-- 0002: the thread file system (SPEC R5-R7), stored in the database.
--
-- One row per file or directory of a thread; the root directory "/" of every thread exists
-- implicitly and has no row. parent is the directory holding the entry ('/' or the path of a
-- directory row of the same thread): listing a directory is an index range on (thread_id,
-- parent), a subtree is a range on the primary key (paths compare byte by byte). data is the
-- last column so that queries reading only metadata never touch the content's overflow pages.
-- Times are Unix nanoseconds (UTC).

CREATE TABLE files (
    thread_id   TEXT    NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
    path        TEXT    NOT NULL CHECK (substr(path, 1, 1) = '/' AND path <> '/'),
    parent      TEXT    NOT NULL CHECK (substr(parent, 1, 1) = '/'),
    id          TEXT    NOT NULL UNIQUE,            -- fil_..., new each time content is written
    is_dir      INTEGER NOT NULL CHECK (is_dir IN (0, 1)),
    size        INTEGER NOT NULL DEFAULT 0 CHECK (size >= 0),
    mime_type   TEXT    NOT NULL DEFAULT '',
    width       INTEGER NOT NULL DEFAULT 0 CHECK (width >= 0),
    height      INTEGER NOT NULL DEFAULT 0 CHECK (height >= 0),
    description TEXT    NOT NULL DEFAULT '',
    mod_time    INTEGER NOT NULL,
    data        BLOB,                               -- NULL for a directory
    PRIMARY KEY (thread_id, path),
    CHECK (is_dir = 0 OR (data IS NULL AND size = 0)),
    CHECK (is_dir = 1 OR (data IS NOT NULL AND size = length(data)))
) STRICT;

CREATE INDEX files_children ON files (thread_id, parent, path);

-- What a thread's files hold, kept by every write in the same transaction, so that the size
-- caps are checked without summing the files.
CREATE TABLE file_usage (
    thread_id TEXT    NOT NULL PRIMARY KEY REFERENCES threads (id) ON DELETE CASCADE,
    bytes     INTEGER NOT NULL DEFAULT 0 CHECK (bytes >= 0),   -- sum of the files' sizes
    entries   INTEGER NOT NULL DEFAULT 0 CHECK (entries >= 0)  -- files and directories
) STRICT, WITHOUT ROWID;
