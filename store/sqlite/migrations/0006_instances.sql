-- Instance identity: the lease of each live Service's instance ID, and the
-- owner of idempotency reservations.

CREATE TABLE instance_leases (
	id    TEXT    NOT NULL PRIMARY KEY,
	life  TEXT    NOT NULL,
	until INTEGER NOT NULL -- Unix milliseconds
) WITHOUT ROWID;

ALTER TABLE idempotency_records ADD COLUMN owner TEXT NOT NULL DEFAULT '';
