-- 0020: what each workspace's callers used (store.Usage): calls of tools and model requests,
-- summed in buckets of a minute, an hour or a day (span, in seconds; start is the bucket's
-- start in Unix seconds, UTC) by the dimensions the row keeps (dims: 'all', one dimension's
-- name, two names joined by a comma ('key,tool', day rows only), or '' for the workspace's
-- totals; the values of the dimensions a row does not keep are ''). d0 to d31 are the
-- histogram of the calls' durations (see store.UsageBucketBound).
--
-- Each node adds what it metered every few seconds, in one transaction, its rows in key
-- order (so that two nodes adding at once never wait on each other in a cycle): a row is
-- added to, never rewritten.

CREATE TABLE usage_counts (
	workspace_id  text    NOT NULL,
	span          integer NOT NULL,
	dims          text    NOT NULL,
	start         bigint  NOT NULL,
	key_id        text    NOT NULL DEFAULT '',
	user_id       text    NOT NULL DEFAULT '',
	agent         text    NOT NULL DEFAULT '',
	tool          text    NOT NULL DEFAULT '',
	model         text    NOT NULL DEFAULT '',
	calls         bigint  NOT NULL DEFAULT 0,
	errors        bigint  NOT NULL DEFAULT 0,
	refusals      bigint  NOT NULL DEFAULT 0,
	requests      bigint  NOT NULL DEFAULT 0,
	input_tokens  bigint  NOT NULL DEFAULT 0,
	output_tokens bigint  NOT NULL DEFAULT 0,
	cost_micros   bigint  NOT NULL DEFAULT 0,
	d0            bigint  NOT NULL DEFAULT 0,
	d1            bigint  NOT NULL DEFAULT 0,
	d2            bigint  NOT NULL DEFAULT 0,
	d3            bigint  NOT NULL DEFAULT 0,
	d4            bigint  NOT NULL DEFAULT 0,
	d5            bigint  NOT NULL DEFAULT 0,
	d6            bigint  NOT NULL DEFAULT 0,
	d7            bigint  NOT NULL DEFAULT 0,
	d8            bigint  NOT NULL DEFAULT 0,
	d9            bigint  NOT NULL DEFAULT 0,
	d10            bigint  NOT NULL DEFAULT 0,
	d11            bigint  NOT NULL DEFAULT 0,
	d12            bigint  NOT NULL DEFAULT 0,
	d13            bigint  NOT NULL DEFAULT 0,
	d14            bigint  NOT NULL DEFAULT 0,
	d15            bigint  NOT NULL DEFAULT 0,
	d16            bigint  NOT NULL DEFAULT 0,
	d17            bigint  NOT NULL DEFAULT 0,
	d18            bigint  NOT NULL DEFAULT 0,
	d19            bigint  NOT NULL DEFAULT 0,
	d20            bigint  NOT NULL DEFAULT 0,
	d21            bigint  NOT NULL DEFAULT 0,
	d22            bigint  NOT NULL DEFAULT 0,
	d23            bigint  NOT NULL DEFAULT 0,
	d24            bigint  NOT NULL DEFAULT 0,
	d25            bigint  NOT NULL DEFAULT 0,
	d26            bigint  NOT NULL DEFAULT 0,
	d27            bigint  NOT NULL DEFAULT 0,
	d28            bigint  NOT NULL DEFAULT 0,
	d29            bigint  NOT NULL DEFAULT 0,
	d30            bigint  NOT NULL DEFAULT 0,
	d31            bigint  NOT NULL DEFAULT 0,	CONSTRAINT usage_counts_pkey PRIMARY KEY (workspace_id, span, dims, start, key_id, user_id, agent, tool, model),
	CONSTRAINT usage_counts_workspace_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces (id),
	CONSTRAINT usage_counts_span_check CHECK (span IN (60, 3600, 86400))
);
