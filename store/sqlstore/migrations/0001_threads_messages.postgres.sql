-- 0001: threads, their messages, and the tool calls the messages ask for.
--
-- Constraint names are part of the contract with postgres.go, which maps violations of them to
-- the store's errors: rename one there when you rename it here.

CREATE TABLE threads (
	id           text        NOT NULL,
	workspace_id text        NOT NULL,
	agent_id     text        NOT NULL DEFAULT '',
	user_id      text        NOT NULL DEFAULT '',
	parent_id    text,
	tags         text[]      NOT NULL DEFAULT '{}',
	step_count   integer     NOT NULL DEFAULT 0,
	current_side text        NOT NULL DEFAULT '',
	stopped      boolean     NOT NULL DEFAULT false,
	-- last_seq is the seq of the thread's newest message. Append bumps it with an UPDATE, which
	-- locks the row: appends to one thread are serialised and their seqs have no gaps.
	last_seq     bigint      NOT NULL DEFAULT 0,
	created_at   timestamptz NOT NULL,
	updated_at   timestamptz NOT NULL,
	CONSTRAINT threads_pkey PRIMARY KEY (id),
	CONSTRAINT threads_workspace_id_key UNIQUE (workspace_id, id),
	-- A parent is a thread of the same workspace.
	CONSTRAINT threads_parent_fkey FOREIGN KEY (workspace_id, parent_id) REFERENCES threads (workspace_id, id),
	CONSTRAINT threads_not_own_parent CHECK (parent_id <> id)
);

CREATE INDEX threads_children ON threads (workspace_id, parent_id, created_at, id) WHERE parent_id IS NOT NULL;

-- One row per call of an assistant message: a call id is unique within its thread.
CREATE TABLE tool_calls (
	thread_id   text    NOT NULL,
	call_id     text    NOT NULL,
	message_seq bigint  NOT NULL,
	idx         integer NOT NULL,
	name        text    NOT NULL DEFAULT '',
	-- json (not jsonb) keeps the arguments byte for byte, as the model wrote them.
	args        json,
	reasoning   text    NOT NULL DEFAULT '',
	CONSTRAINT tool_calls_pkey PRIMARY KEY (thread_id, call_id),
	CONSTRAINT tool_calls_thread_fkey FOREIGN KEY (thread_id) REFERENCES threads (id) ON DELETE CASCADE
);

CREATE TABLE messages (
	id           text        NOT NULL,
	thread_id    text        NOT NULL,
	seq          bigint      NOT NULL,
	role         text        NOT NULL,
	content      text        NOT NULL DEFAULT '',
	tool_calls   json,
	tool_call_id text,
	tool_name    text        NOT NULL DEFAULT '',
	result       json,
	created_at   timestamptz NOT NULL,
	CONSTRAINT messages_pkey PRIMARY KEY (id),
	CONSTRAINT messages_thread_seq_key UNIQUE (thread_id, seq),
	CONSTRAINT messages_thread_fkey FOREIGN KEY (thread_id) REFERENCES threads (id) ON DELETE CASCADE,
	CONSTRAINT messages_role_check CHECK (role IN ('system', 'user', 'assistant', 'tool')),
	-- A tool message, and only a tool message, answers a call...
	CONSTRAINT messages_tool_call_check CHECK ((role = 'tool') = (tool_call_id IS NOT NULL)),
	-- ... that an assistant message of the same thread asked for.
	CONSTRAINT messages_call_fkey FOREIGN KEY (thread_id, tool_call_id)
		REFERENCES tool_calls (thread_id, call_id) ON DELETE CASCADE
);

-- Exactly-once results: a second result for a call is impossible, whichever node writes it.
CREATE UNIQUE INDEX messages_one_result ON messages (thread_id, tool_call_id) WHERE tool_call_id IS NOT NULL;
