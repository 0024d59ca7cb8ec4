-- Tasks, their event outbox and API keys.

CREATE TABLE tasks (
	pos                   INTEGER PRIMARY KEY AUTOINCREMENT, -- listing order and cursor
	id                    TEXT    NOT NULL UNIQUE,
	identifier            TEXT    NOT NULL UNIQUE,
	title                 TEXT    NOT NULL,
	description           TEXT    NOT NULL,
	status                TEXT    NOT NULL,
	priority              TEXT    NOT NULL,
	labels                TEXT    NOT NULL, -- JSON array of strings
	acceptance_criteria   TEXT    NOT NULL, -- JSON array of strings
	issue_url             TEXT    NOT NULL,
	parent_issue_url      TEXT,
	project               TEXT,
	goal                  TEXT    NOT NULL,
	assignee_agent_id     TEXT,
	assignee_name         TEXT,
	assignment_source     TEXT,
	routing_decision_id   TEXT,
	routing_reason        TEXT,             -- JSON object
	routing_confidence    REAL,
	triage_queue_id       TEXT,
	submission_id         TEXT,
	pr_url                TEXT,
	pr_number             INTEGER,
	branch                TEXT,
	base_branch           TEXT,
	head_sha              TEXT,
	blocker               TEXT,             -- JSON object
	status_before_blocker TEXT    NOT NULL,
	version               INTEGER NOT NULL,
	created_at            INTEGER NOT NULL, -- Unix milliseconds
	updated_at            INTEGER NOT NULL
);
CREATE INDEX tasks_by_status   ON tasks (status, pos);
CREATE INDEX tasks_by_assignee ON tasks (assignee_agent_id, pos);
CREATE INDEX tasks_by_project  ON tasks (project, pos);

-- AUTOINCREMENT: a sequence is never reused, even after pruning.
CREATE TABLE events (
	seq          INTEGER PRIMARY KEY AUTOINCREMENT,
	id           TEXT    NOT NULL UNIQUE,
	type         TEXT    NOT NULL,
	task_id      TEXT    NOT NULL REFERENCES tasks (id),
	project      TEXT,
	task_version INTEGER NOT NULL,
	occurred_at  INTEGER NOT NULL,
	trace_id     TEXT,
	data         BLOB    NOT NULL
);
CREATE INDEX events_by_task     ON events (task_id, seq);
CREATE INDEX events_by_occurred ON events (occurred_at);

CREATE TABLE api_keys (
	pos        INTEGER PRIMARY KEY AUTOINCREMENT,
	id         TEXT    NOT NULL UNIQUE,
	name       TEXT    NOT NULL,
	hash       BLOB    NOT NULL UNIQUE,
	scopes     TEXT    NOT NULL, -- JSON array of strings
	actor_id   TEXT    NOT NULL,
	actor_role TEXT    NOT NULL,
	created_at INTEGER NOT NULL,
	revoked_at INTEGER
);
