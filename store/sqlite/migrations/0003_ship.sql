-- Ship operations, and the operation a task is being shipped by.

ALTER TABLE tasks ADD COLUMN active_ship_id TEXT NOT NULL DEFAULT '';

CREATE TABLE ship_operations (
	pos               INTEGER PRIMARY KEY AUTOINCREMENT,
	id                TEXT    NOT NULL UNIQUE,
	task_id           TEXT    NOT NULL REFERENCES tasks (id),
	status            TEXT    NOT NULL,
	mode              TEXT    NOT NULL,
	environment       TEXT    NOT NULL,
	expected_head_sha TEXT    NOT NULL,
	submission_mode   TEXT    NOT NULL,
	pr_owner          TEXT    NOT NULL,
	pr_repo           TEXT    NOT NULL,
	pr_number         INTEGER NOT NULL,
	actor_id          TEXT    NOT NULL,
	actor_role        TEXT    NOT NULL,
	trace_id          TEXT,
	queued_at         INTEGER NOT NULL,
	started_at        INTEGER,
	finished_at       INTEGER,
	merge_commit_sha  TEXT,
	deployment        TEXT,    -- JSON object
	error             TEXT,    -- JSON object {code, message}
	attempts          INTEGER NOT NULL,
	lease_until       INTEGER NOT NULL
);
-- The runner's queue: unfinished operations in the order they were queued.
CREATE INDEX ship_operations_runnable ON ship_operations (status, pos) WHERE status IN ('queued', 'running');
