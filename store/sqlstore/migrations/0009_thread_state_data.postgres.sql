-- 0009: a thread's state (SPEC M2, M3), the JSON object calls write their outputs into with
-- _outputPath, and its named instances, each an object of its own.
--
-- thread_states has a row per object: instance '' is the thread's own, created at its first
-- write; a named instance's row is created by AddInstances, and a write to an instance
-- without one is refused. size is the bytes of the paths and values written, which
-- store.MaxStateBytes caps.
--
-- thread_state_values has a row per path written, its value as written: paths are written
-- once, so a write is a few index lookups (is the path, a path above it or one below it
-- written?) and an insert, whatever the size of the state, where one JSON document per object
-- would be read, decoded, changed and written back whole. No row's path is a prefix of
-- another's: a write below a written path goes into that path's value, which is then
-- decoded and written back (that value only). Reading the state
-- assembles the object from the rows. path is collated "C": the paths below /a are those
-- from "/a/" up to "/a0", bytewise.

CREATE TABLE thread_states (
	thread_id  text        NOT NULL,
	instance   text        NOT NULL DEFAULT '',
	size       bigint      NOT NULL DEFAULT 0,
	-- The last write, for whoever looks at the table.
	updated_at timestamptz NOT NULL,
	CONSTRAINT thread_states_pkey PRIMARY KEY (thread_id, instance),
	CONSTRAINT thread_states_thread_fkey FOREIGN KEY (thread_id) REFERENCES threads (id) ON DELETE CASCADE
);

CREATE TABLE thread_state_values (
	thread_id text NOT NULL,
	instance  text NOT NULL,
	path      text COLLATE "C" NOT NULL,
	value     text NOT NULL,
	CONSTRAINT thread_state_values_pkey PRIMARY KEY (thread_id, instance, path),
	CONSTRAINT thread_state_values_state_fkey FOREIGN KEY (thread_id, instance) REFERENCES thread_states (thread_id, instance) ON DELETE CASCADE
);
