-- A task's revision (lifecycle.TaskRevisioner): every write of the row
-- adds one, so that a Service can tell whether a task it encoded before
-- changed by reading this column alone. As SQLite's migration 0010.

ALTER TABLE tasks ADD COLUMN rev BIGINT NOT NULL DEFAULT 0;
