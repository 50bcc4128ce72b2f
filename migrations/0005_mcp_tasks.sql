-- MCP tasks: `ask_question` called as a task. The task is the question (questions.task_id): its status is
-- derived from the question's, so every replica and both protocol eras read the same state. The TTL the
-- task was granted, in milliseconds, bounds the question's life and how long the task can be fetched.
alter table questions add column task_ttl_ms bigint check (task_ttl_ms > 0);

-- tasks/list walks tasks in creation order.
create index questions_task_list_idx on questions (sequence_number) where task_id is not null;
