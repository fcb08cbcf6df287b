-- 0010: leases, the capped places every node of a fleet shares (an MCP session, an event
-- stream). A lease lives until it is released or expires unrenewed: what a dead node held frees
-- itself. Live leases of a kind are counted by workspace (and owner) to hold caps across the
-- fleet; the counts read leases_live. No foreign key to workspaces: a lease is short-lived
-- bookkeeping, and a workspace's caps are taken by its id alone.

CREATE TABLE leases (
	id           text        NOT NULL,
	workspace_id text        NOT NULL,
	kind         text        NOT NULL,
	owner        text        NOT NULL,
	-- The lease of the node holding this one ('' for none): see store.Lease.Holder.
	holder       text        NOT NULL DEFAULT '',
	data         text,
	created_at   timestamptz NOT NULL,
	expires_at   timestamptz NOT NULL,
	CONSTRAINT leases_pkey PRIMARY KEY (id)
);

CREATE INDEX leases_live ON leases (kind, workspace_id, owner, expires_at);
