-- 0005: the rest of the thread state: the children registry (status, blocking, resumable), the
-- runtime's run state, messages queued for the next step, decisions on calls that require
-- confirmation, and the thread's log.

ALTER TABLE threads
	ADD COLUMN status    text    NOT NULL DEFAULT 'idle',
	ADD COLUMN blocking  boolean NOT NULL DEFAULT false,
	ADD COLUMN resumable boolean NOT NULL DEFAULT false,
	ADD COLUMN state     json,
	-- last_log_seq numbers the thread's log like last_seq numbers its messages.
	ADD COLUMN last_log_seq bigint NOT NULL DEFAULT 0,
	ADD CONSTRAINT threads_status_check CHECK (status IN ('idle', 'running', 'terminated'));

CREATE TABLE queued_messages (
	id         text        NOT NULL,
	thread_id  text        NOT NULL,
	-- n orders the queue: an identity increases with each insert.
	n          bigint      GENERATED ALWAYS AS IDENTITY,
	role       text        NOT NULL,
	content    text        NOT NULL DEFAULT '',
	created_at timestamptz NOT NULL,
	CONSTRAINT queued_messages_pkey PRIMARY KEY (id),
	CONSTRAINT queued_messages_thread_fkey FOREIGN KEY (thread_id) REFERENCES threads (id) ON DELETE CASCADE,
	CONSTRAINT queued_messages_role_check CHECK (role IN ('system', 'user', 'assistant'))
);

CREATE INDEX queued_messages_thread ON queued_messages (thread_id, n);

CREATE TABLE call_decisions (
	thread_id  text        NOT NULL,
	call_id    text        NOT NULL,
	n          bigint      GENERATED ALWAYS AS IDENTITY,
	action     text        NOT NULL,
	args       json,
	message    text        NOT NULL DEFAULT '',
	user_id    text        NOT NULL DEFAULT '',
	decided_at timestamptz NOT NULL,
	-- Decided once, and only a call the thread asked for.
	CONSTRAINT call_decisions_pkey PRIMARY KEY (thread_id, call_id),
	CONSTRAINT call_decisions_call_fkey FOREIGN KEY (thread_id, call_id)
		REFERENCES tool_calls (thread_id, call_id) ON DELETE CASCADE,
	CONSTRAINT call_decisions_action_check CHECK (action IN ('approve', 'edit', 'deny'))
);

CREATE TABLE thread_logs (
	thread_id text        NOT NULL,
	seq       bigint      NOT NULL,
	level     text        NOT NULL,
	message   text        NOT NULL,
	data      json,
	time      timestamptz NOT NULL,
	CONSTRAINT thread_logs_pkey PRIMARY KEY (thread_id, seq),
	CONSTRAINT thread_logs_thread_fkey FOREIGN KEY (thread_id) REFERENCES threads (id) ON DELETE CASCADE,
	CONSTRAINT thread_logs_level_check CHECK (level IN ('debug', 'info', 'warn', 'error'))
);
