-- 0023: leases of a rate limit's counts over several slots.
--
-- A node took its calls one slot at a time (0019): ten takes a second for a per-second limit,
-- a write transaction each, whatever the rate. Far from the bound it now takes a lease: calls
-- it may use in any of the next few slots, counted in the lease's last slot with how far back
-- the lease reaches (back). The calls of a lease may fall in any of its slots, so a take
-- counts a lease in every window that meets it: no window ever holds more calls than its
-- bound. That holds a lease's calls against more windows than the slot they fall in, so
-- leases are taken only while every window they meet keeps a quarter of its bound free; nearer
-- the bound a node takes one slot at a time, as before, and callers get the whole bound.

ALTER TABLE limit_windows ADD COLUMN back int NOT NULL DEFAULT 0;
ALTER TABLE limit_windows DROP CONSTRAINT limit_windows_pkey;
ALTER TABLE limit_windows ADD CONSTRAINT limit_windows_pkey PRIMARY KEY (workspace_id, key, slot, back);
ALTER TABLE limit_windows ADD CONSTRAINT limit_windows_back_check CHECK (back >= 0);

-- quiver_take_lease counts up to p_want calls in a lease of a counter: p_slots slots from
-- p_slot when every window of p_span slots the lease meets keeps a quarter of p_max free
-- after it,
-- else one slot, in which it counts up to p_want / p_slots (what the node would have used in a
-- slot of the lease), as many as keep within p_max the windows that meet it (each window
-- holding every lease that meets it). It returns how many it counted, the
-- lease's last slot, then the counts of the p_span slots ending at p_slot, oldest first
-- (leases that end later in the last). The counter's takes run one after the other (an advisory lock on it, held to the
-- commit). A take whose slot is older than a lease's first slot (its node waited on the lock,
-- or its clock is behind) takes from that slot instead: a count is never put where it would
-- leave the window before the counts it came after. One statement: one round trip and one
-- commit a take.
CREATE FUNCTION quiver_take_lease(p_ws text, p_key text, p_slot bigint, p_span int, p_slots int, p_max bigint, p_want bigint)
RETURNS bigint[] LANGUAGE plpgsql AS $$
DECLARE
	len    int := p_slots;
	lo     bigint;
	last   bigint;
	d      bigint[];
	run    bigint;
	peak   bigint;
	a1     bigint;
	a2     bigint;
	taken  bigint;
	counts bigint[] := array_fill(0::bigint, ARRAY[p_span]);
	r      record;
BEGIN
	PERFORM pg_advisory_xact_lock(hashtextextended('quiver_limit/' || p_ws || '/' || p_key, 0));
	SELECT GREATEST(p_slot, max(slot - back)) INTO p_slot FROM limit_windows WHERE workspace_id = p_ws AND key = p_key;
	lo := p_slot - p_span + 1; -- the first window that meets the lease starts here
	LOOP
		last := p_slot + len - 1;
		-- d: how much each window a in [lo, last] holds, as differences: a lease from f to l
		-- meets the windows that start from f - p_span + 1 to l.
		d := array_fill(0::bigint, ARRAY[(last - lo + 2)::int]);
		FOR r IN SELECT slot, back, n FROM limit_windows
			WHERE workspace_id = p_ws AND key = p_key AND slot >= lo LOOP
			a1 := GREATEST(lo, r.slot - r.back - p_span + 1);
			a2 := LEAST(last, r.slot);
			IF a1 <= a2 THEN
				d[(a1 - lo + 1)::int] := d[(a1 - lo + 1)::int] + r.n;
				d[(a2 - lo + 2)::int] := d[(a2 - lo + 2)::int] - r.n;
			END IF;
		END LOOP;
		run := 0;
		peak := 0;
		FOR i IN 1 .. (last - lo + 1)::int LOOP
			run := run + d[i];
			peak := GREATEST(peak, run);
		END LOOP;
		IF len = 1 THEN
			taken := GREATEST(0, LEAST(p_want, p_max - peak));
			EXIT;
		END IF;
		IF peak + p_want <= p_max / 4 * 3 THEN
			taken := p_want;
			EXIT;
		END IF;
		-- What the node would have used in one of the lease's slots.
		p_want := (p_want + len - 1) / len;
		len := 1;
	END LOOP;
	IF taken > 0 THEN
		INSERT INTO limit_windows (workspace_id, key, slot, back, n) VALUES (p_ws, p_key, last, len - 1, taken)
			ON CONFLICT (workspace_id, key, slot, back) DO UPDATE SET n = limit_windows.n + taken;
	END IF;
	FOR r IN SELECT slot, sum(n) AS n FROM limit_windows
		WHERE workspace_id = p_ws AND key = p_key AND slot > p_slot - p_span GROUP BY slot LOOP
		counts[(LEAST(r.slot, p_slot) - p_slot + p_span)::int] := counts[(LEAST(r.slot, p_slot) - p_slot + p_span)::int] + r.n;
	END LOOP;
	DELETE FROM limit_windows WHERE workspace_id = p_ws AND key = p_key AND slot <= p_slot - p_span;
	RETURN array_prepend(taken, array_prepend(last, counts));
END
$$;

-- quiver_take_limit is 0019's take, kept for the nodes of the release before this one while a
-- fleet is upgraded: a lease of one slot.
DROP FUNCTION quiver_take_limit(text, text, bigint, int, bigint, bigint);
CREATE FUNCTION quiver_take_limit(p_ws text, p_key text, p_slot bigint, p_span int, p_max bigint, p_want bigint)
RETURNS bigint[] LANGUAGE sql AS $$
	SELECT t[1:1] || t[3:] FROM quiver_take_lease(p_ws, p_key, p_slot, p_span, 1, p_max, p_want) AS t
$$;
