-- A dead letter moves the partition on (issue 13).
--
-- A `failed` ack item that dead-letters its message ends the lease (in 008's
-- queen.log_ack_items_v1, changed there before 008 was released): the
-- messages after it are poppable at once. Here:
--
-- queen.log_pop_dead_letter_v1: a pop that claimed messages it can never
--    deliver (an encrypted payload that does not decrypt with this broker's
--    key) dead-letters them at the head of their partition and moves on.

-- The functions this migration created or replaced are defined since issue 30
-- in packages/broker/src/sql/, one file each, applied after the migrations (migrate.ts).

