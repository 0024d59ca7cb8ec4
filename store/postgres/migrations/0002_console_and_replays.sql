-- Sign-ins to the operator console, the revision of each subscription's
-- deliveries, and the indexes of a task's ship operations and of the
-- attempts at delivering one event; as SQLite's migration 0007.

CREATE TABLE console_sessions (
	hash       BYTEA  NOT NULL PRIMARY KEY, -- SHA-256 of the session token
	key_id     TEXT   NOT NULL,
	key_hash   BYTEA  NOT NULL,
	created_at BIGINT NOT NULL,
	expires_at BIGINT NOT NULL
);
-- Pruning.
CREATE INDEX console_sessions_by_expiry ON console_sessions (expires_at);

ALTER TABLE webhook_subscriptions ADD COLUMN revision BIGINT  NOT NULL DEFAULT 0;
ALTER TABLE webhook_subscriptions ADD COLUMN rewound  BOOLEAN NOT NULL DEFAULT false;
ALTER TABLE webhook_subscriptions ADD COLUMN rewind_to BIGINT NOT NULL DEFAULT 0;

-- The attempts at delivering one event, newest first.
CREATE INDEX webhook_deliveries_by_event ON webhook_deliveries (subscription_id, event_id, pos);

-- The ship operations of a task, oldest first. (submissions_by_task, of
-- 0001, serves the submissions of a task.)
CREATE INDEX ship_operations_by_task ON ship_operations (task_id, pos);
