-- Webhook subscriptions and their delivery attempts.

CREATE TABLE webhook_subscriptions (
	pos         INTEGER PRIMARY KEY AUTOINCREMENT, -- listing order and cursor
	id          TEXT    NOT NULL UNIQUE,
	url         TEXT    NOT NULL,
	event_types TEXT    NOT NULL, -- JSON array of strings
	description TEXT,
	filters     TEXT    NOT NULL, -- JSON object {taskIds, projects}
	status      TEXT    NOT NULL,
	secret      BLOB    NOT NULL, -- the sealed secret, opaque
	created_at  INTEGER NOT NULL, -- Unix milliseconds
	cursor      INTEGER NOT NULL,
	lease_owner TEXT    NOT NULL DEFAULT '',
	lease_until INTEGER NOT NULL
);

-- One row per attempt; rows of a deleted subscription go with it.
CREATE TABLE webhook_deliveries (
	pos             INTEGER PRIMARY KEY AUTOINCREMENT, -- listing order and cursor
	id              TEXT    NOT NULL UNIQUE,
	subscription_id TEXT    NOT NULL REFERENCES webhook_subscriptions (id) ON DELETE CASCADE,
	event_id        TEXT    NOT NULL,
	event_seq       INTEGER NOT NULL,
	attempt         INTEGER NOT NULL,
	status          TEXT    NOT NULL,
	response_status INTEGER,
	error           TEXT,
	attempted_at    INTEGER NOT NULL,
	next_attempt_at INTEGER,
	body            BLOB              -- the request body, kept while pending
);
-- The newest-first listing, and the cascade from a subscription.
CREATE INDEX webhook_deliveries_by_subscription ON webhook_deliveries (subscription_id, pos);
-- The retry queue of each subscription.
CREATE INDEX webhook_deliveries_pending ON webhook_deliveries (subscription_id, next_attempt_at) WHERE status = 'pending';
-- Pruning.
CREATE INDEX webhook_deliveries_by_attempted ON webhook_deliveries (attempted_at);
