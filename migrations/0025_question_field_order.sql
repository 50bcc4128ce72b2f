-- The order of a typed question's fields as the asker wrote them (issue 26): `jsonb` keeps an object's keys in
-- its own order, so the property names are kept beside the schema, and forms show the fields in this order.
-- Expand-only.
alter table questions add column response_fields text[];
