-- The page's Closed tab lists closed questions newest-closed first and pages on (closed_at, sequence_number):
-- this index serves that order, so a page reads its rows instead of sorting every closed question. Questions
-- are kept (they are the record of who answered what), so the closed set only grows. Built in the
-- migration's transaction: questions are people's questions, thousands of rows, not chunks.
create index questions_closed_idx on questions (closed_at desc, sequence_number desc) where status <> 'pending';
