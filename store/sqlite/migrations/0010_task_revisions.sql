-- A task's revision (lifecycle.TaskRevisioner): every write of the row
-- adds one, so that a Service can tell whether a task it encoded before
-- changed by reading this column alone.

ALTER TABLE tasks ADD COLUMN rev INTEGER NOT NULL DEFAULT 0;
