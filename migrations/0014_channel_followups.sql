-- What happens to a delivered Slack message once its question closes, and how Slack's callbacks find it.
--
-- When a question is answered, cancelled or expires — on any path: REST, MCP, Slack, GitHub, the reaper — its
-- delivered Slack messages are updated (`chat.update`) to show the outcome. The worker finds them by this state
-- ('waiting' until the question closes), claims one at a time like a send (leased by next_attempt_at), and
-- records 'done', or 'failed' when Slack refuses for good. GitHub comments need no update: the answer is a
-- reply there already.
alter table channel_deliveries add column update_status text not null default 'waiting'
    check (update_status in ('waiting', 'done', 'failed'));
alter table channel_deliveries add column update_attempts integer not null default 0;

create index channel_deliveries_update_due_idx on channel_deliveries (next_attempt_at)
    where status = 'delivered' and update_status = 'waiting';

-- A reply in a Slack thread, or a button on the message, names the message by channel id and timestamp.
create index channel_deliveries_message_idx on channel_deliveries ((message_ref ->> 'ts'))
    where message_ref is not null;

-- A delivery that moves on (delivered, retried, given up) is a change of its question: watchers see it as
-- `question_updated`, and a blocking `ask_question` reports it.
alter table question_events drop constraint question_events_kind_check;
alter table question_events add constraint question_events_kind_check
    check (kind in ('question_created', 'question_answered', 'question_cancelled', 'question_expired',
                    'question_updated'));
