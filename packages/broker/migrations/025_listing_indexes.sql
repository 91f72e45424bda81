-- Listings at scale (issue 31): the consumer-group listing walks the distinct
-- group names one index probe at a time (a skip scan), in the bytewise order
-- it answers in, and rolls up only the page's cursors through the same index.
-- Without it, every page of groups read every cursor row (one per partition
-- and group: 70k rows, ~0.7 s, at 2,000 queues and one queue of 50,000
-- partitions).
create index cursors_consumer_group on queen.cursors (consumer_group collate "C");
