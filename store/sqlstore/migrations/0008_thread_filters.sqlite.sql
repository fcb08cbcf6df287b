-- 0008: listing a workspace's threads by agent, tag or status (Store.Threads with a
-- ThreadFilter), a page at a time, reads an index in order from the cursor, as the unfiltered
-- list reads threads_newest: a page costs the same however few threads match and however deep
-- in the list it is. A combination of filters reads one of these indexes and checks the others
-- on each row it reads.

CREATE INDEX threads_agent_newest ON threads (workspace_id, agent_id, created_at DESC, id DESC);
CREATE INDEX threads_status_newest ON threads (workspace_id, status, created_at DESC, id DESC);

-- A thread's tags, one row each, kept by CreateThread and UpdateThread in the transaction that
-- writes the thread's tags column (the record; this table is its index). created_at is the
-- thread's, which never changes, so that the list by tag is read in order from this table.
CREATE TABLE thread_tags (
    thread_id    TEXT    NOT NULL,
    tag          TEXT    NOT NULL CHECK (tag <> ''),
    workspace_id TEXT    NOT NULL,
    created_at   INTEGER NOT NULL,
    PRIMARY KEY (thread_id, tag),
    FOREIGN KEY (workspace_id, thread_id) REFERENCES threads (workspace_id, id) ON DELETE CASCADE
) STRICT, WITHOUT ROWID;

CREATE INDEX thread_tags_newest ON thread_tags (workspace_id, tag, created_at DESC, thread_id DESC);

-- Tags over 1024 bytes (store.MaxTagBytes, which earlier versions did not enforce) stay out,
-- as in PostgreSQL, whose index cannot hold them. Such a thread is not listed by that tag.
INSERT INTO thread_tags (thread_id, tag, workspace_id, created_at)
    SELECT DISTINCT t.id, j.value, t.workspace_id, t.created_at FROM threads t, json_each(t.tags) j
    WHERE j.type = 'text' AND j.value <> '' AND length(CAST(j.value AS BLOB)) <= 1024;
