-- 0019: how often the callers of a workspace may call.
--
-- workspace_limits: a workspace's limits document (store.Limits), as the platform encodes it
-- (a JSON object), with the version of the workspace's latest change. One row per workspace
-- that ever stored one.
--
-- limit_windows: the counts of the limits' rates, which the nodes of a fleet share
-- (store.LimitWindows): the calls counted in one slot of one counter (a limit, its period, and
-- the values it counts per). quiver_take_limit counts in it. limit_holds, below: the places of
-- their concurrent calls.

CREATE TABLE workspace_limits (
	workspace_id text        NOT NULL REFERENCES workspaces (id),
	document     text        NOT NULL,
	version      bigint      NOT NULL,
	updated_by   text        NOT NULL DEFAULT '',
	updated_at   timestamptz NOT NULL,
	CONSTRAINT workspace_limits_pkey PRIMARY KEY (workspace_id),
	CONSTRAINT workspace_limits_version_check CHECK (version > 0)
);

CREATE TABLE limit_windows (
	workspace_id text   NOT NULL,
	key          text   NOT NULL,
	slot         bigint NOT NULL,
	n            bigint NOT NULL,
	CONSTRAINT limit_windows_pkey PRIMARY KEY (workspace_id, key, slot)
);

-- quiver_take_limit counts up to p_want calls in slot p_slot of a counter, as many as keep the
-- counts of the p_span slots ending at p_slot within p_max, and returns how many it counted
-- followed by the counts of those slots, oldest first. The counter's takes run one after the
-- other (an advisory lock on it, held to the commit), so that the nodes together never count
-- past p_max; the slots that have left the window go as the counter is next counted in. A take
-- whose slot is older than one counted already (its node waited on the lock, or its clock is
-- behind) counts in that newest slot instead: a count is never put where it would leave the
-- window before the counts it came after. One statement: one round trip and one commit a take.
CREATE FUNCTION quiver_take_limit(p_ws text, p_key text, p_slot bigint, p_span int, p_max bigint, p_want bigint)
RETURNS bigint[] LANGUAGE plpgsql AS $$
DECLARE
	counts bigint[] := array_fill(0::bigint, ARRAY[p_span]);
	total  bigint := 0;
	taken  bigint;
	r      record;
BEGIN
	PERFORM pg_advisory_xact_lock(hashtextextended('quiver_limit/' || p_ws || '/' || p_key, 0));
	SELECT GREATEST(p_slot, max(slot)) INTO p_slot FROM limit_windows WHERE workspace_id = p_ws AND key = p_key;
	FOR r IN SELECT slot, n FROM limit_windows
		WHERE workspace_id = p_ws AND key = p_key AND slot > p_slot - p_span LOOP
		counts[(r.slot - p_slot + p_span)::int] := r.n;
		total := total + r.n;
	END LOOP;
	taken := GREATEST(0, LEAST(p_want, p_max - total));
	IF taken > 0 THEN
		INSERT INTO limit_windows (workspace_id, key, slot, n) VALUES (p_ws, p_key, p_slot, taken)
			ON CONFLICT (workspace_id, key, slot) DO UPDATE SET n = limit_windows.n + taken;
		counts[p_span] := counts[p_span] + taken;
	END IF;
	DELETE FROM limit_windows WHERE workspace_id = p_ws AND key = p_key AND slot <= p_slot - p_span;
	RETURN array_prepend(taken, counts);
END
$$;

-- limit_holds: the places among a limit's concurrent calls that each node holds
-- (store.LimitHolds): a node takes a few more than it runs, renews them while it uses them and
-- gives back what it no longer needs; a node that stops renewing (it died) loses them when
-- they expire. quiver_hold_limit sets a node's holding.
CREATE TABLE limit_holds (
	workspace_id text        NOT NULL,
	key          text        NOT NULL,
	node         text        NOT NULL,
	held         bigint      NOT NULL,
	expires_at   timestamptz NOT NULL,
	CONSTRAINT limit_holds_pkey PRIMARY KEY (workspace_id, key, node)
);

-- quiver_hold_limit sets what node p_node holds of a counter of concurrent calls: p_want
-- places, as many of them as the other nodes' live holdings leave within p_max, for p_ttl_ms
-- from now; it returns what the node holds. The counter's holdings change one after the other
-- (the advisory lock of its counts), so that the nodes together never hold more than p_max.
CREATE FUNCTION quiver_hold_limit(p_ws text, p_key text, p_node text, p_want bigint, p_max bigint, p_ttl_ms bigint)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
	others bigint;
	held   bigint;
BEGIN
	PERFORM pg_advisory_xact_lock(hashtextextended('quiver_limit/' || p_ws || '/' || p_key, 0));
	DELETE FROM limit_holds WHERE workspace_id = p_ws AND key = p_key AND expires_at <= clock_timestamp();
	SELECT coalesce(sum(h.held), 0) INTO others FROM limit_holds h
		WHERE h.workspace_id = p_ws AND h.key = p_key AND h.node <> p_node;
	held := GREATEST(0, LEAST(p_want, p_max - others));
	IF held = 0 THEN
		DELETE FROM limit_holds WHERE workspace_id = p_ws AND key = p_key AND node = p_node;
	ELSE
		INSERT INTO limit_holds (workspace_id, key, node, held, expires_at)
			VALUES (p_ws, p_key, p_node, held, clock_timestamp() + p_ttl_ms * interval '1 millisecond')
			ON CONFLICT (workspace_id, key, node) DO UPDATE SET held = EXCLUDED.held, expires_at = EXCLUDED.expires_at;
	END IF;
	RETURN held;
END
$$;
