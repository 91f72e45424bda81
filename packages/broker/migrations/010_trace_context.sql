-- W3C trace context on messages (PROTOCOL §5.3 `traceparent`, an extension).
--
-- Queen v1's traceId is a UUID: room for a W3C trace-id but not for the
-- parent span-id, so a consumer could join the producer's trace but not
-- hang its spans under the producer's span. The whole `traceparent` header
-- (version-traceid-spanid-flags, 55 characters) is kept beside the message
-- in its own nullable column: a message pushed without one costs a bit in
-- the row's null bitmap and nothing else. Pop reads it only for messages
-- that carry a traceId (clients that trace set both), so untraced pops do
-- not probe for it.
alter table queen.messages add column traceparent text;

-- The functions this migration created or replaced are defined since issue 30
-- in packages/broker/src/sql/, one file each, applied after the migrations (migrate.ts).

