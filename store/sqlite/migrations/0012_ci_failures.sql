-- Failures of CI checks (lifecycle.CIFailureStore): one record per failed
-- check of a task's commit, due while its details are to be fetched from
-- the CI provider, then holding them (failure: the CIFailure as JSON, or
-- NULL when there are none).

CREATE TABLE ci_failures (
	task_id         TEXT    NOT NULL REFERENCES tasks (id),
	head_sha        TEXT    NOT NULL,
	source          TEXT    NOT NULL,
	name            TEXT    NOT NULL,
	due             INTEGER NOT NULL, -- 0 or 1
	attempts        INTEGER NOT NULL,
	next_attempt_at INTEGER NOT NULL, -- Unix milliseconds
	failure         TEXT,
	updated_at      INTEGER NOT NULL, -- Unix milliseconds
	PRIMARY KEY (task_id, head_sha, source, name)
) WITHOUT ROWID;

-- The fetcher's claims: due records, earliest first.
CREATE INDEX ci_failures_due ON ci_failures (next_attempt_at) WHERE due = 1;
