-- 0014: how the person who decided on a call proved who they were: the API key they used
-- (key_id), or an access token of theirs (access_token = 1); neither for a door that
-- authenticates no one. The call's result keeps them with the decision (quiver.DecisionRecord).

ALTER TABLE call_decisions ADD COLUMN key_id TEXT NOT NULL DEFAULT '';
ALTER TABLE call_decisions ADD COLUMN access_token INTEGER NOT NULL DEFAULT 0 CHECK (access_token IN (0, 1));
