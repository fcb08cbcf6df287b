-- 0021: what the model request that wrote an assistant message used (store.ModelUsage, JSON:
-- the model, its input and output tokens, its duration); NULL for every other message and for
-- messages written before it was recorded. A nullable column without a default adds the column
-- without rewriting the table.

ALTER TABLE messages ADD COLUMN usage json;
