-- 0014: how the person who decided on a call proved who they were: the API key they used
-- (key_id), or an access token of theirs (access_token); neither for a door that
-- authenticates no one. The call's result keeps them with the decision (quiver.DecisionRecord).
-- Constant defaults add the columns without rewriting the table.

ALTER TABLE call_decisions ADD COLUMN key_id text NOT NULL DEFAULT '',
	ADD COLUMN access_token boolean NOT NULL DEFAULT false;
