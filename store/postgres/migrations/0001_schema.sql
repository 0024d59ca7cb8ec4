-- The whole schema of the lifecycle Store, as of SQLite's migrations
-- 0001 to 0006. Times are Unix milliseconds (BIGINT), as the Service keeps
-- millisecond precision; JSON members are TEXT, opaque bytes BYTEA.

CREATE TABLE tasks (
	pos                   BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY, -- listing order and cursor
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
	routing_confidence    DOUBLE PRECISION,
	triage_queue_id       TEXT,
	submission_id         TEXT,
	pr_url                TEXT,
	pr_number             BIGINT,
	branch                TEXT,
	base_branch           TEXT,
	head_sha              TEXT,
	blocker               TEXT,             -- JSON object
	status_before_blocker TEXT    NOT NULL,
	version               BIGINT  NOT NULL,
	created_at            BIGINT  NOT NULL,
	updated_at            BIGINT  NOT NULL,
	submission_mode       TEXT    NOT NULL DEFAULT '',
	pr_owner              TEXT    NOT NULL DEFAULT '',
	pr_repo               TEXT    NOT NULL DEFAULT '',
	review_policy         TEXT    NOT NULL DEFAULT '',
	review_decision       TEXT    NOT NULL DEFAULT '',
	rework_requested      BOOLEAN NOT NULL DEFAULT false,
	active_ship_id        TEXT    NOT NULL DEFAULT '',
	facts                 TEXT    NOT NULL DEFAULT '{}', -- JSON object, lifecycle.Facts
	reconcile_at          BIGINT  NOT NULL DEFAULT 0,
	active_ship_merging   BOOLEAN NOT NULL DEFAULT false
);
CREATE INDEX tasks_by_status       ON tasks (status, pos);
CREATE INDEX tasks_by_assignee     ON tasks (assignee_agent_id, pos);
CREATE INDEX tasks_by_project      ON tasks (project, pos);
-- The reconciler's queue, and the lookups of provider events.
CREATE INDEX tasks_reconcile       ON tasks (reconcile_at) WHERE status = 'in_review';
CREATE INDEX tasks_by_pull_request ON tasks (pr_number, pr_repo, pr_owner) WHERE pr_number IS NOT NULL;
CREATE INDEX tasks_by_head         ON tasks (head_sha) WHERE head_sha IS NOT NULL;

-- The outbox. Sequences come from events_seq (CACHE 1, so that its
-- last_value is the greatest sequence handed out). A transaction takes a
-- shared advisory lock keyed by last_value before its first nextval, and
-- holds it until it ends; readers return no event past the smallest key
-- held (see events.go). event_pruned keeps the greatest sequence pruned,
-- so that LastEventSequence survives the pruning of the newest events.
CREATE SEQUENCE events_seq;
CREATE TABLE event_pruned (
	one     BOOLEAN PRIMARY KEY DEFAULT true CHECK (one),
	max_seq BIGINT  NOT NULL
);
INSERT INTO event_pruned (max_seq) VALUES (0);

CREATE TABLE events (
	seq          BIGINT PRIMARY KEY,
	id           TEXT   NOT NULL UNIQUE,
	type         TEXT   NOT NULL,
	task_id      TEXT   NOT NULL REFERENCES tasks (id),
	project      TEXT,
	task_version BIGINT NOT NULL,
	occurred_at  BIGINT NOT NULL,
	trace_id     TEXT,
	data         BYTEA  NOT NULL
);
CREATE INDEX events_by_task     ON events (task_id, seq);
CREATE INDEX events_by_occurred ON events (occurred_at);

CREATE TABLE api_keys (
	pos        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	id         TEXT   NOT NULL UNIQUE,
	name       TEXT   NOT NULL,
	hash       BYTEA  NOT NULL UNIQUE,
	scopes     TEXT   NOT NULL, -- JSON array of strings
	actor_id   TEXT   NOT NULL,
	actor_role TEXT   NOT NULL,
	created_at BIGINT NOT NULL,
	revoked_at BIGINT
);

CREATE TABLE submissions (
	pos                BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	id                 TEXT    NOT NULL UNIQUE,
	task_id            TEXT    NOT NULL REFERENCES tasks (id),
	status             TEXT    NOT NULL,
	mode               TEXT    NOT NULL,
	pr_url             TEXT    NOT NULL,
	pr_number          BIGINT  NOT NULL,
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
	draft              BOOLEAN NOT NULL,
	actor_id           TEXT    NOT NULL,
	actor_role         TEXT    NOT NULL,
	accepted_at        BIGINT  NOT NULL
);
CREATE INDEX submissions_by_task ON submissions (task_id, pos);

CREATE TABLE reviews (
	pos           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	id            TEXT   NOT NULL UNIQUE,
	task_id       TEXT   NOT NULL REFERENCES tasks (id),
	submission_id TEXT   NOT NULL REFERENCES submissions (id),
	reviewer_id   TEXT   NOT NULL,
	reviewer_role TEXT   NOT NULL,
	outcome       TEXT   NOT NULL,
	body          TEXT   NOT NULL,
	submitted_at  BIGINT NOT NULL,
	head_sha      TEXT   NOT NULL DEFAULT '',
	host_id       TEXT   NOT NULL DEFAULT ''
);
CREATE INDEX reviews_by_submission ON reviews (submission_id, pos);

CREATE TABLE checks (
	task_id    TEXT   NOT NULL REFERENCES tasks (id),
	head_sha   TEXT   NOT NULL,
	source     TEXT   NOT NULL,
	name       TEXT   NOT NULL,
	status     TEXT   NOT NULL,
	url        TEXT,
	updated_at BIGINT NOT NULL,
	PRIMARY KEY (task_id, head_sha, source, name)
);

CREATE TABLE idempotency_records (
	principal_id TEXT    NOT NULL,
	method       TEXT    NOT NULL,
	route        TEXT    NOT NULL,
	resource_id  TEXT    NOT NULL,
	key          TEXT    NOT NULL,
	fingerprint  BYTEA   NOT NULL,
	done         BOOLEAN NOT NULL,
	status_code  INTEGER NOT NULL,
	body         BYTEA,
	created_at   BIGINT  NOT NULL,
	expires_at   BIGINT  NOT NULL,
	locked_until BIGINT  NOT NULL,
	owner        TEXT    NOT NULL DEFAULT '',
	PRIMARY KEY (principal_id, method, route, resource_id, key)
);
CREATE INDEX idempotency_by_expiry ON idempotency_records (expires_at);

CREATE TABLE ship_operations (
	pos               BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	id                TEXT    NOT NULL UNIQUE,
	task_id           TEXT    NOT NULL REFERENCES tasks (id),
	status            TEXT    NOT NULL,
	mode              TEXT    NOT NULL,
	environment       TEXT    NOT NULL,
	expected_head_sha TEXT    NOT NULL,
	submission_mode   TEXT    NOT NULL,
	pr_owner          TEXT    NOT NULL,
	pr_repo           TEXT    NOT NULL,
	pr_number         BIGINT  NOT NULL,
	actor_id          TEXT    NOT NULL,
	actor_role        TEXT    NOT NULL,
	trace_id          TEXT,
	queued_at         BIGINT  NOT NULL,
	started_at        BIGINT,
	finished_at       BIGINT,
	merge_commit_sha  TEXT,
	deployment        TEXT,    -- JSON object
	error             TEXT,    -- JSON object {code, message}
	attempts          INTEGER NOT NULL,
	lease_until       BIGINT  NOT NULL,
	lease_owner       TEXT    NOT NULL DEFAULT ''
);
-- The runner's queue: unfinished operations in the order they were queued.
CREATE INDEX ship_operations_runnable ON ship_operations (pos) WHERE status IN ('queued', 'running');

CREATE TABLE webhook_subscriptions (
	pos         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, -- listing order and cursor
	id          TEXT   NOT NULL UNIQUE,
	url         TEXT   NOT NULL,
	event_types TEXT   NOT NULL, -- JSON array of strings
	description TEXT,
	filters     TEXT   NOT NULL, -- JSON object {taskIds, projects}
	status      TEXT   NOT NULL,
	secret      BYTEA  NOT NULL, -- the sealed secret, opaque
	created_at  BIGINT NOT NULL,
	cursor      BIGINT NOT NULL,
	lease_owner TEXT   NOT NULL DEFAULT '',
	lease_until BIGINT NOT NULL
);

-- One row per attempt; rows of a deleted subscription go with it.
CREATE TABLE webhook_deliveries (
	pos             BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY, -- listing order and cursor
	id              TEXT    NOT NULL UNIQUE,
	subscription_id TEXT    NOT NULL REFERENCES webhook_subscriptions (id) ON DELETE CASCADE,
	event_id        TEXT    NOT NULL,
	event_seq       BIGINT  NOT NULL,
	attempt         INTEGER NOT NULL,
	status          TEXT    NOT NULL,
	response_status INTEGER,
	error           TEXT,
	attempted_at    BIGINT  NOT NULL,
	next_attempt_at BIGINT,
	body            BYTEA             -- the request body, kept while pending
);
CREATE INDEX webhook_deliveries_by_subscription ON webhook_deliveries (subscription_id, pos);
CREATE INDEX webhook_deliveries_pending ON webhook_deliveries (subscription_id, next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_by_attempted ON webhook_deliveries (attempted_at);

CREATE TABLE provider_deliveries (
	source      TEXT   NOT NULL,
	id          TEXT   NOT NULL,
	received_at BIGINT NOT NULL,
	PRIMARY KEY (source, id)
);
CREATE INDEX provider_deliveries_by_time ON provider_deliveries (received_at);

CREATE TABLE instance_leases (
	id    TEXT   NOT NULL PRIMARY KEY,
	life  TEXT   NOT NULL,
	until BIGINT NOT NULL
);
