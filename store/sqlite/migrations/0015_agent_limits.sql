-- Limits of the agent's loop: the rework rounds a task started
-- (lifecycle.Task.ReworkRounds) and those counted when a person last
-- granted more (ReworkRoundsBase), and an index that counts an agent's
-- tasks in progress (lifecycle.Config.MaxInProgressPerAgent).

ALTER TABLE tasks ADD COLUMN rework_rounds      INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN rework_rounds_base INTEGER NOT NULL DEFAULT 0;

CREATE INDEX tasks_in_progress_by_assignee ON tasks (assignee_agent_id) WHERE status = 'in_progress';
