-- Submissions, reviews, CI checks and idempotency records.

ALTER TABLE tasks ADD COLUMN submission_mode  TEXT    NOT NULL DEFAULT '';
ALTER TABLE tasks ADD COLUMN pr_owner         TEXT    NOT NULL DEFAULT '';
ALTER TABLE tasks ADD COLUMN pr_repo          TEXT    NOT NULL DEFAULT '';
ALTER TABLE tasks ADD COLUMN review_policy    TEXT    NOT NULL DEFAULT '';
ALTER TABLE tasks ADD COLUMN review_decision  TEXT    NOT NULL DEFAULT '';
ALTER TABLE tasks ADD COLUMN rework_requested INTEGER NOT NULL DEFAULT 0;

CREATE TABLE submissions (
	pos                INTEGER PRIMARY KEY AUTOINCREMENT,
	id                 TEXT    NOT NULL UNIQUE,
	task_id            TEXT    NOT NULL REFERENCES tasks (id),
	status             TEXT    NOT NULL,
	mode               TEXT    NOT NULL,
	pr_url             TEXT    NOT NULL,
	pr_number          INTEGER NOT NULL,
	head               TEXT,
	base               TEXT,
	head_sha           TEXT,
	action             TEXT    NOT NULL,
	idempotency_key    TEXT    NOT NULL,
	owner              TEXT,
	repo               TEXT,
	ci_provider        TEXT,
	code_review_policy TEXT    NOT NULL,
	participants       TEXT    NOT NULL, -- JSON array of {id, role}
	summary            TEXT    NOT NULL,
	notes              TEXT    NOT NULL,
	checks             TEXT    NOT NULL, -- JSON array of {name, status}
	draft              INTEGER NOT NULL,
	actor_id           TEXT    NOT NULL,
	actor_role         TEXT    NOT NULL,
	accepted_at        INTEGER NOT NULL
);
CREATE INDEX submissions_by_task ON submissions (task_id, pos);

CREATE TABLE reviews (
	pos           INTEGER PRIMARY KEY AUTOINCREMENT,
	id            TEXT    NOT NULL UNIQUE,
	task_id       TEXT    NOT NULL REFERENCES tasks (id),
	submission_id TEXT    NOT NULL REFERENCES submissions (id),
	reviewer_id   TEXT    NOT NULL,
	reviewer_role TEXT    NOT NULL,
	outcome       TEXT    NOT NULL,
	body          TEXT    NOT NULL,
	submitted_at  INTEGER NOT NULL
);
CREATE INDEX reviews_by_submission ON reviews (submission_id, pos);

CREATE TABLE checks (
	task_id    TEXT    NOT NULL REFERENCES tasks (id),
	head_sha   TEXT    NOT NULL,
	source     TEXT    NOT NULL,
	name       TEXT    NOT NULL,
	status     TEXT    NOT NULL,
	url        TEXT,
	updated_at INTEGER NOT NULL,
	PRIMARY KEY (task_id, head_sha, source, name)
) WITHOUT ROWID;

CREATE TABLE idempotency_records (
	principal_id TEXT    NOT NULL,
	method       TEXT    NOT NULL,
	route        TEXT    NOT NULL,
	resource_id  TEXT    NOT NULL,
	key          TEXT    NOT NULL,
	fingerprint  BLOB    NOT NULL,
	done         INTEGER NOT NULL,
	status_code  INTEGER NOT NULL,
	body         BLOB,
	created_at   INTEGER NOT NULL,
	expires_at   INTEGER NOT NULL,
	locked_until INTEGER NOT NULL,
	PRIMARY KEY (principal_id, method, route, resource_id, key)
) WITHOUT ROWID;
CREATE INDEX idempotency_by_expiry ON idempotency_records (expires_at);
