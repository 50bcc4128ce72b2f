-- The `mcp:caller` channel (issue 37): a question may ask the person at the MCP client that called
-- `ask_question`, through MCP elicitation. What was asked of that client is kept with the question, so any
-- replica can report a task as `input_required` and send the same elicitation again (both protocol eras),
-- and when the client replied (accept, decline or cancel), after which the task is `working` again until the
-- question closes. Expand-only: older replicas never set them.
alter table questions add column caller_elicitation jsonb;
alter table questions add column caller_replied_at timestamptz;
