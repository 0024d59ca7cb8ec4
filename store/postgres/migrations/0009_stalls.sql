-- Stalled tasks (lifecycle.Config.StallAfter): when a task last saw
-- activity, and since when it is marked stalled (0: it is not). As
-- SQLite's migration 0014.

ALTER TABLE tasks ADD COLUMN last_activity_at BIGINT NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN stalled_at BIGINT NOT NULL DEFAULT 0;
UPDATE tasks SET last_activity_at = updated_at;

CREATE INDEX tasks_stall_due ON tasks (status, last_activity_at)
	WHERE stalled_at = 0 AND status IN ('in_progress', 'in_review') AND active_ship_id = '';
CREATE INDEX tasks_stalled ON tasks (pos) WHERE stalled_at <> 0;
