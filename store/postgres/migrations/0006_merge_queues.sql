-- Merge queues (lifecycle.MergeQueueStore): one per repository and base
-- branch. The Store does not read state: it is the Service's JSON, kept
-- as the bytes it gave. As SQLite's migration 0011.

CREATE TABLE merge_queues (
	id          TEXT   NOT NULL PRIMARY KEY,
	mode        TEXT   NOT NULL,
	project     TEXT   NOT NULL,
	owner       TEXT   NOT NULL,
	repo        TEXT   NOT NULL,
	base        TEXT   NOT NULL,
	state       BYTEA  NOT NULL,
	version     BIGINT NOT NULL,
	lease_owner TEXT   NOT NULL,
	lease_until BIGINT NOT NULL, -- Unix milliseconds
	updated_at  BIGINT NOT NULL  -- Unix milliseconds
);
