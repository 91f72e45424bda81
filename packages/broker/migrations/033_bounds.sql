-- maxSize on every write path. A schedule whose queue is at its maxSize when
-- a fire time is due waits for room instead of pushing past it
-- (src/maintenance/schedule-firer.ts): next_fire_at stays at the first fire
-- time not pushed, and room_wait_since records since when it has waited.
-- While it is set, the fire times the schedule waited through are pushed
-- once there is room, whatever its `missed` policy: a wait for room is not a
-- missed fire. Reset to null by the pass that pushes all that is due.
alter table queen.schedules add column room_wait_since timestamptz;
