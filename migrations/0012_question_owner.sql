-- The principal that asked a question (set when authentication is on): an MCP task, and the pending list of
-- `list_pending_questions`, belong to the caller that asked. Null for questions asked with auth off.
alter table questions add column owner text;

-- tasks/list with auth on: the caller's live tasks in creation order.
create index questions_tasks_by_owner on questions (owner, sequence_number) where task_id is not null;
