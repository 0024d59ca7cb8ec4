-- What code hosts report: the facts stored with each task, the schedule of
-- their reconciliation, host reviews, ship leases with owners, and the
-- webhook deliveries of hosts already applied.

ALTER TABLE tasks ADD COLUMN facts               TEXT    NOT NULL DEFAULT '{}'; -- JSON object, lifecycle.Facts
ALTER TABLE tasks ADD COLUMN reconcile_at        INTEGER NOT NULL DEFAULT 0;    -- Unix milliseconds
ALTER TABLE tasks ADD COLUMN active_ship_merging INTEGER NOT NULL DEFAULT 0;
-- The reconciler's queue, and the lookups of provider events.
CREATE INDEX tasks_reconcile       ON tasks (reconcile_at) WHERE status = 'in_review';
CREATE INDEX tasks_by_pull_request ON tasks (pr_number, pr_repo, pr_owner) WHERE pr_number IS NOT NULL;
CREATE INDEX tasks_by_head         ON tasks (head_sha) WHERE head_sha IS NOT NULL;

ALTER TABLE reviews ADD COLUMN head_sha TEXT NOT NULL DEFAULT '';
ALTER TABLE reviews ADD COLUMN host_id  TEXT NOT NULL DEFAULT '';

ALTER TABLE ship_operations ADD COLUMN lease_owner TEXT NOT NULL DEFAULT '';

CREATE TABLE provider_deliveries (
	source      TEXT    NOT NULL,
	id          TEXT    NOT NULL,
	received_at INTEGER NOT NULL,
	PRIMARY KEY (source, id)
) WITHOUT ROWID;
CREATE INDEX provider_deliveries_by_time ON provider_deliveries (received_at);
