-- 0006: listing a workspace's threads newest first, a page at a time (Store.Threads), reads an
-- index in order instead of sorting every thread of the workspace.

CREATE INDEX threads_newest ON threads (workspace_id, created_at DESC, id DESC);
