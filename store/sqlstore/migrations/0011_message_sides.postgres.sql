-- 0011: the side of a two-sided dual-AI agent that wrote an assistant message (side_a or
-- side_b); '' for every other message. A constant default adds the column without rewriting
-- the table.

ALTER TABLE messages ADD COLUMN side TEXT NOT NULL DEFAULT '';
