-- Stalled tasks (lifecycle.Config.StallAfter): when a task last saw
-- activity, and since when it is marked stalled (0: it is not). A task
-- that existed before is taken to have last seen activity at its last
-- change.
--
-- tasks_stall_due holds the tasks a sweep may mark: not stalled, in a
-- status StallAfter may watch, with no ship operation queued or running
-- (the operation has timeouts of its own). A sweep finds the due ones through it in
-- one statement, reading no task that is not due. tasks_stalled serves
-- GET /tasks?stalled=true in creation order.

ALTER TABLE tasks ADD COLUMN last_activity_at INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN stalled_at INTEGER NOT NULL DEFAULT 0;
UPDATE tasks SET last_activity_at = updated_at;

CREATE INDEX tasks_stall_due ON tasks (status, last_activity_at)
	WHERE stalled_at = 0 AND status IN ('in_progress', 'in_review') AND active_ship_id = '';
CREATE INDEX tasks_stalled ON tasks (pos) WHERE stalled_at <> 0;
