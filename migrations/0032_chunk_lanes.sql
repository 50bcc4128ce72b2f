-- Retention whose cost does not grow with the table, step 1 of 3 (the design: docs/retention.md). `chunks`
-- becomes a table partitioned by `lane` (0: by time, in buckets of `created_at` dropped whole once due; 1: rows
-- of long-lived streams carried out of a bucket before it was dropped; 2: the rows of before the change). The
-- rows already stored, and those replicas of the previous version go on writing until step 3, are lane 2: the
-- column's constant default costs no rewrite, and the check (not yet validated, so it is instant) lets step 3
-- attach the table whole as the lane-2 partition without scanning it under a lock.
-- Waits at most this long behind a reader of chunks (everyone queues behind the wait): a start that cannot
-- have the lock fails and is retried.
set local lock_timeout = '5s';
alter table chunks add column lane smallint not null default 2;
alter table chunks add constraint chunks_lane_before check (lane = 2) not valid;
