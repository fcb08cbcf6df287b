-- 0009: a thread's state (SPEC M2, M3), the JSON object calls write their outputs into with
-- _outputPath, and its named instances, each an object of its own. One row per object:
-- instance '' is the thread's own, created at its first write; a named instance's row is
-- created empty by AddInstances, and a write to an instance without a row is refused. A row of
-- its own rather than a column of threads, because a run updates its thread at every step and
-- need not read or rewrite a state of up to a megabyte each time (store.MaxStateBytes).
--
-- data is json, not jsonb: the store writes the object whole and reads it back as it wrote it,
-- and never queries into it.

CREATE TABLE thread_states (
	thread_id  text        NOT NULL,
	instance   text        NOT NULL DEFAULT '',
	data       json        NOT NULL DEFAULT '{}',
	-- The last write, for whoever looks at the table.
	updated_at timestamptz NOT NULL,
	CONSTRAINT thread_states_pkey PRIMARY KEY (thread_id, instance),
	CONSTRAINT thread_states_thread_fkey FOREIGN KEY (thread_id) REFERENCES threads (id) ON DELETE CASCADE
);
