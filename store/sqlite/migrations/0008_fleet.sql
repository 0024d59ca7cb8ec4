-- Why a running ship operation waits (a rate limit), and the reconciler's
-- queue: tasks in review, and tasks back in progress because the code host
-- closed their pull request, which a reopen puts back in review.

ALTER TABLE ship_operations ADD COLUMN wait TEXT; -- JSON object {reason, message, until}, or NULL

DROP INDEX tasks_reconcile;
CREATE INDEX tasks_reconcile ON tasks (reconcile_at) WHERE status IN ('in_review', 'in_progress');
