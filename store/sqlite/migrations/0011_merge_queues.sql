-- Merge queues (lifecycle.MergeQueueStore): one per repository and base
-- branch. The Store does not read state: it is the Service's JSON, kept
-- as the bytes it gave.

CREATE TABLE merge_queues (
	id          TEXT    NOT NULL PRIMARY KEY,
	mode        TEXT    NOT NULL,
	project     TEXT    NOT NULL,
	owner       TEXT    NOT NULL,
	repo        TEXT    NOT NULL,
	base        TEXT    NOT NULL,
	state       BLOB    NOT NULL,
	version     INTEGER NOT NULL,
	lease_owner TEXT    NOT NULL,
	lease_until INTEGER NOT NULL, -- Unix milliseconds
	updated_at  INTEGER NOT NULL  -- Unix milliseconds
) WITHOUT ROWID;
