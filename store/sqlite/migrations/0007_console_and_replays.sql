-- Sign-ins to the operator console, the revision of each subscription's
-- deliveries, and the indexes of a task's submissions and ship operations
-- and of the attempts at delivering one event.

CREATE TABLE console_sessions (
	hash       BLOB    NOT NULL PRIMARY KEY, -- SHA-256 of the session token
	key_id     TEXT    NOT NULL,
	key_hash   BLOB    NOT NULL,
	created_at INTEGER NOT NULL,             -- Unix milliseconds
	expires_at INTEGER NOT NULL
) WITHOUT ROWID;
-- Pruning.
CREATE INDEX console_sessions_by_expiry ON console_sessions (expires_at);

ALTER TABLE webhook_subscriptions ADD COLUMN revision INTEGER NOT NULL DEFAULT 0;
ALTER TABLE webhook_subscriptions ADD COLUMN rewound  INTEGER NOT NULL DEFAULT 0;
ALTER TABLE webhook_subscriptions ADD COLUMN rewind_to INTEGER NOT NULL DEFAULT 0;

-- The attempts at delivering one event, newest first.
CREATE INDEX webhook_deliveries_by_event ON webhook_deliveries (subscription_id, event_id, pos);

-- The ship operations of a task, oldest first. (submissions_by_task, of
-- 0002, serves the submissions of a task.)
CREATE INDEX ship_operations_by_task ON ship_operations (task_id, pos);

-- The greatest sequence of an event pruned, kept by a trigger: a replay
-- from before it cannot deliver every event it asks for. A database
-- pruned before this migration counts everything below its oldest event
-- as pruned.
CREATE TABLE event_pruned (max_seq INTEGER NOT NULL);
INSERT INTO event_pruned (max_seq)
	SELECT COALESCE((SELECT min(seq) - 1 FROM events), (SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0);
CREATE TRIGGER events_pruned AFTER DELETE ON events
BEGIN
	UPDATE event_pruned SET max_seq = max(max_seq, OLD.seq);
END;
