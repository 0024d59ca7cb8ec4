-- Dependencies between tasks. A task keeps the IDs it depends on
-- (depends_on) and those of them not done yet (waiting_on), as JSON
-- arrays, so that a read never joins; waiting_count is the length of
-- waiting_on, for the index of ready tasks. task_dependencies holds the
-- same edges, for the way back: which tasks wait for one that becomes
-- done.

ALTER TABLE tasks ADD COLUMN depends_on    TEXT    NOT NULL DEFAULT '[]';
ALTER TABLE tasks ADD COLUMN waiting_on    TEXT    NOT NULL DEFAULT '[]';
ALTER TABLE tasks ADD COLUMN waiting_count INTEGER NOT NULL DEFAULT 0;

CREATE TABLE task_dependencies (
	task_id       TEXT NOT NULL REFERENCES tasks (id),
	depends_on_id TEXT NOT NULL REFERENCES tasks (id),
	PRIMARY KEY (task_id, depends_on_id)
) WITHOUT ROWID;
CREATE INDEX task_dependencies_by_dependency ON task_dependencies (depends_on_id, task_id);

-- GET /tasks?ready=true: tasks in todo waiting on nothing, in creation
-- order from a cursor. Partial, so that it holds only ready tasks; its
-- columns are the query's terms, so that the planner prefers it to
-- tasks_by_status (status, pos), which would read the waiting ones too.
CREATE INDEX tasks_ready ON tasks (status, waiting_count, pos) WHERE status = 'todo' AND waiting_count = 0;
