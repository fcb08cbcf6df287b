-- 0017: the name a file came with when the store named its path (store.FileInfo.OriginalName):
-- an attachment's name as the tool gave it ("chart.png", stored at
-- /attachments/<time>-<random>.png so that paths never collide), kept by its copies. Empty for
-- a file written at a path of its writer's choosing, and for the files stored before.

ALTER TABLE files ADD COLUMN original_name text NOT NULL DEFAULT '';
