package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/tasklifecycle/lifecycle"
)

// envelope is the body of every successful JSON answer.
type envelope[T any] struct {
	Data             T                  `json:"data"`
	AvailableActions []lifecycle.Action `json:"availableActions"`
	NextCursor       *string            `json:"nextCursor"`
}

// get calls a read and returns its data and available actions.
func get[T any](ctx context.Context, cl *Client, path string, query url.Values) (T, []lifecycle.Action, string, error) {
	var env envelope[T]
	err := cl.do(ctx, call{method: http.MethodGet, path: path, query: query, idempotent: true}, &env)
	next := ""
	if env.NextCursor != nil {
		next = *env.NextCursor
	}
	return env.Data, env.AvailableActions, next, err
}

// post calls a POST and returns its data and available actions.
func post[T any](ctx context.Context, cl *Client, c call) (T, []lifecycle.Action, error) {
	c.method = http.MethodPost
	var env envelope[T]
	err := cl.do(ctx, c, &env)
	return env.Data, env.AvailableActions, err
}

// taskPath returns the escaped path of a task, or of one of its
// sub-resources.
func taskPath(taskID string, sub ...string) string {
	return "/tasks/" + url.PathEscape(taskID) + strings.Join(append([]string{""}, sub...), "/")
}

// listQuery encodes the limit and cursor of a listing.
func listQuery(p lifecycle.ListParams) url.Values {
	q := url.Values{}
	if p.Limit != 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	if p.Cursor != "" {
		q.Set("cursor", p.Cursor)
	}
	return q
}

// ListTasks returns a page of tasks in creation order (GET /tasks, scope
// tasks:read). Pass the NextCursor of a page as Cursor to read the next.
func (cl *Client) ListTasks(ctx context.Context, p lifecycle.ListTasksParams) (lifecycle.TaskList, error) {
	q := listQuery(lifecycle.ListParams{Limit: p.Limit, Cursor: p.Cursor})
	if len(p.Statuses) > 0 {
		st := make([]string, len(p.Statuses))
		for i, s := range p.Statuses {
			st[i] = string(s)
		}
		q.Set("status", strings.Join(st, ","))
	}
	if p.AssigneeAgentID != "" {
		q.Set("assigneeAgentId", p.AssigneeAgentID)
	}
	if p.Project != "" {
		q.Set("project", p.Project)
	}
	if p.Ready {
		q.Set("ready", "true")
	}
	tasks, _, next, err := get[[]lifecycle.Task](ctx, cl, "/tasks", q)
	return lifecycle.TaskList{Tasks: tasks, NextCursor: next}, err
}

// Task reads a task (GET /tasks/{id}, scope tasks:read).
func (cl *Client) Task(ctx context.Context, taskID string) (lifecycle.Task, error) {
	t, _, _, err := get[lifecycle.Task](ctx, cl, taskPath(taskID), nil)
	return t, err
}

// CompactTask reads a task without its description and routing reason
// (GET /tasks/{id}?tokenBudget=compact), for callers that pay per token.
func (cl *Client) CompactTask(ctx context.Context, taskID string) (lifecycle.Task, error) {
	t, _, _, err := get[lifecycle.Task](ctx, cl, taskPath(taskID), url.Values{"tokenBudget": {"compact"}})
	return t, err
}

// CreateTask creates a task and routes it (POST /tasks, scope tasks:admin).
// It is not retried: a retry after a lost answer would meet 409
// identifier_taken.
func (cl *Client) CreateTask(ctx context.Context, p lifecycle.CreateTaskParams) (lifecycle.Task, error) {
	t, _, err := post[lifecycle.Task](ctx, cl, call{path: "/tasks", body: p})
	return t, err
}

// SetDependencies replaces the tasks a task depends on (PUT
// /tasks/{id}/dependencies, scope tasks:admin); none removes them all. It
// is retried: the same set again changes nothing.
func (cl *Client) SetDependencies(ctx context.Context, taskID string, dependsOn []string) (lifecycle.Task, error) {
	var env envelope[lifecycle.Task]
	err := cl.do(ctx, call{method: http.MethodPut, path: taskPath(taskID, "dependencies"), idempotent: true,
		body: lifecycle.SetDependenciesParams{DependsOn: dependsOn}}, &env)
	return env.Data, err
}

// StartTask moves a task to in_progress (POST /tasks/{id}/start, scope
// tasks:write).
func (cl *Client) StartTask(ctx context.Context, taskID string) (lifecycle.Task, error) {
	t, _, err := post[lifecycle.Task](ctx, cl, call{path: taskPath(taskID, "start"), body: struct{}{}})
	return t, err
}

// CancelTask cancels a task (POST /tasks/{id}/cancel, scope tasks:admin);
// reason may be empty.
func (cl *Client) CancelTask(ctx context.Context, taskID, reason string) (lifecycle.Task, error) {
	t, _, err := post[lifecycle.Task](ctx, cl, call{path: taskPath(taskID, "cancel"), body: lifecycle.CancelTaskParams{Reason: reason}})
	return t, err
}

// RecordBlocker records what an agent needs from a user (POST
// /tasks/{id}/blocker, scope tasks:write). The Actor of p is ignored: the
// server takes it from the API key.
func (cl *Client) RecordBlocker(ctx context.Context, taskID string, p lifecycle.RecordBlockerParams) (lifecycle.Task, error) {
	t, _, err := post[lifecycle.Task](ctx, cl, call{path: taskPath(taskID, "blocker"), body: p})
	return t, err
}

// ResolveBlocker resolves a task's blocker (POST /tasks/{id}/resolve-blocker,
// scope tasks:write); resolution may be empty.
func (cl *Client) ResolveBlocker(ctx context.Context, taskID, resolution string) (lifecycle.Task, error) {
	t, _, err := post[lifecycle.Task](ctx, cl, call{path: taskPath(taskID, "resolve-blocker"),
		body: lifecycle.ResolveBlockerParams{Resolution: resolution}})
	return t, err
}

// Submit submits finished work (POST /tasks/{id}/submit, scope
// tasks:write). It sends p.IdempotencyKey when set, else the context's key
// (see [WithIdempotencyKey]), else a new one, the same on every retry.
func (cl *Client) Submit(ctx context.Context, taskID string, p lifecycle.SubmitParams) (lifecycle.Submission, error) {
	if p.IdempotencyKey != "" {
		ctx = WithIdempotencyKey(ctx, p.IdempotencyKey)
	}
	sub, _, err := post[lifecycle.Submission](ctx, cl, call{path: taskPath(taskID, "submit"), body: p, idempotent: true, idemKey: true})
	return sub, err
}

// PostReview records a review (POST /tasks/{id}/reviews, scope
// reviews:write) and returns it with the task's next steps.
func (cl *Client) PostReview(ctx context.Context, taskID string, p lifecycle.PostReviewParams) (lifecycle.Review, []lifecycle.Action, error) {
	return post[lifecycle.Review](ctx, cl, call{path: taskPath(taskID, "reviews"), body: p})
}

// ReviewFeedback reads the review decision and the reviews of the latest
// submission (GET /tasks/{id}/review-feedback, scope tasks:read), with the
// task's next steps.
func (cl *Client) ReviewFeedback(ctx context.Context, taskID string) (lifecycle.ReviewFeedback, []lifecycle.Action, error) {
	fb, acts, _, err := get[lifecycle.ReviewFeedback](ctx, cl, taskPath(taskID, "review-feedback"), nil)
	return fb, acts, err
}

// ReportChecks reports CI checks for a head commit (POST /tasks/{id}/checks,
// scope ci:write) and returns the task's CI status and next steps.
func (cl *Client) ReportChecks(ctx context.Context, taskID string, p lifecycle.ReportChecksParams) (lifecycle.CIStatus, []lifecycle.Action, error) {
	return post[lifecycle.CIStatus](ctx, cl, call{path: taskPath(taskID, "checks"), body: p})
}

// CIStatus reads the CI status of a task's head (GET /tasks/{id}/ci-status,
// scope tasks:read), with the task's next steps.
func (cl *Client) CIStatus(ctx context.Context, taskID string) (lifecycle.CIStatus, []lifecycle.Action, error) {
	st, acts, _, err := get[lifecycle.CIStatus](ctx, cl, taskPath(taskID, "ci-status"), nil)
	return st, acts, err
}

// Ship queues the merge (and deployment) of an approved task (POST
// /tasks/{id}/ship, scope ship:write). The operation is returned queued;
// follow it with [Client.ShipOperation]. The Idempotency-Key is the
// context's (see [WithIdempotencyKey]) or a new one, the same on every
// retry.
func (cl *Client) Ship(ctx context.Context, taskID string, p lifecycle.ShipParams) (lifecycle.ShipOperation, error) {
	op, _, err := post[lifecycle.ShipOperation](ctx, cl, call{path: taskPath(taskID, "ship"), body: p, idempotent: true, idemKey: true})
	return op, err
}

// ShipOperation reads a ship operation (GET /ship-operations/{operationId},
// scope tasks:read).
func (cl *Client) ShipOperation(ctx context.Context, operationID string) (lifecycle.ShipOperation, error) {
	op, _, _, err := get[lifecycle.ShipOperation](ctx, cl, "/ship-operations/"+url.PathEscape(operationID), nil)
	return op, err
}

// queuePath returns the escaped path of a merge queue, or of one of its
// actions.
func queuePath(queueID string, sub ...string) string {
	return "/merge-queues/" + url.PathEscape(queueID) + strings.Join(append([]string{""}, sub...), "/")
}

// MergeQueues returns the lifecycle's merge queues, in ID order (GET
// /merge-queues, scope tasks:read): each with its entries in landing
// order, its candidates and their CI checks. None when the server's
// merge queue is off.
func (cl *Client) MergeQueues(ctx context.Context) ([]lifecycle.MergeQueue, error) {
	qs, _, _, err := get[[]lifecycle.MergeQueue](ctx, cl, "/merge-queues", nil)
	return qs, err
}

// MergeQueue reads a merge queue (GET /merge-queues/{id}, scope
// tasks:read). An unknown queue is an error matching lifecycle.ErrNotFound.
func (cl *Client) MergeQueue(ctx context.Context, queueID string) (lifecycle.MergeQueue, error) {
	q, _, _, err := get[lifecycle.MergeQueue](ctx, cl, queuePath(queueID), nil)
	return q, err
}

// PauseMergeQueue pauses a merge queue (POST /merge-queues/{id}/pause,
// scope ship:write): nothing is built or landed until it is resumed.
// reason, at most 1000 bytes, may be empty; the server keeps it with the
// key's actor as the queue's pause reason. Pausing a paused queue changes
// nothing, so the call is retried like a read.
func (cl *Client) PauseMergeQueue(ctx context.Context, queueID, reason string) (lifecycle.MergeQueue, error) {
	body := struct {
		Reason string `json:"reason,omitempty"`
	}{reason}
	q, _, err := post[lifecycle.MergeQueue](ctx, cl, call{path: queuePath(queueID, "pause"), body: body, idempotent: true})
	return q, err
}

// ResumeMergeQueue resumes a paused merge queue (POST
// /merge-queues/{id}/resume, scope ship:write). Resuming a queue that is
// not paused changes nothing, so the call is retried like a read.
func (cl *Client) ResumeMergeQueue(ctx context.Context, queueID string) (lifecycle.MergeQueue, error) {
	q, _, err := post[lifecycle.MergeQueue](ctx, cl, call{path: queuePath(queueID, "resume"), idempotent: true})
	return q, err
}

// CreateSubscription subscribes an https URL to events (POST
// /event-subscriptions, scope webhooks:write). The Idempotency-Key is the
// context's (see [WithIdempotencyKey]) or a new one, the same on every
// retry.
func (cl *Client) CreateSubscription(ctx context.Context, p lifecycle.CreateSubscriptionParams) (lifecycle.Subscription, error) {
	sub, _, err := post[lifecycle.Subscription](ctx, cl, call{path: "/event-subscriptions", body: p, idempotent: true, idemKey: true})
	return sub, err
}

// ListSubscriptions returns a page of subscriptions in creation order (GET
// /event-subscriptions, scope webhooks:read).
func (cl *Client) ListSubscriptions(ctx context.Context, p lifecycle.ListParams) (lifecycle.SubscriptionList, error) {
	subs, _, next, err := get[[]lifecycle.Subscription](ctx, cl, "/event-subscriptions", listQuery(p))
	return lifecycle.SubscriptionList{Subscriptions: subs, NextCursor: next}, err
}

// Subscription reads a subscription (GET /event-subscriptions/{id}, scope
// webhooks:read).
func (cl *Client) Subscription(ctx context.Context, id string) (lifecycle.Subscription, error) {
	sub, _, _, err := get[lifecycle.Subscription](ctx, cl, "/event-subscriptions/"+url.PathEscape(id), nil)
	return sub, err
}

// DeleteSubscription deletes a subscription and its delivery history (DELETE
// /event-subscriptions/{id}, scope webhooks:write). A 404 to a retry, after
// an attempt whose answer was lost, counts as deleted.
func (cl *Client) DeleteSubscription(ctx context.Context, id string) error {
	return cl.do(ctx, call{method: http.MethodDelete, path: "/event-subscriptions/" + url.PathEscape(id), idempotent: true, goneOnRetryOK: true}, nil)
}

// Deliveries returns a page of a subscription's delivery attempts, newest
// first (GET /event-subscriptions/{id}/deliveries, scope webhooks:read).
func (cl *Client) Deliveries(ctx context.Context, subscriptionID string, p lifecycle.ListParams) (lifecycle.DeliveryList, error) {
	ds, _, next, err := get[[]lifecycle.Delivery](ctx, cl, "/event-subscriptions/"+url.PathEscape(subscriptionID)+"/deliveries", listQuery(p))
	return lifecycle.DeliveryList{Deliveries: ds, NextCursor: next}, err
}

// ReplaySubscription delivers a subscription's events after
// p.FromSequence again, in order, each as a new delivery (POST
// /event-subscriptions/{id}/replay, scope webhooks:write). The
// Idempotency-Key is the context's (see [WithIdempotencyKey]) or a new
// one, the same on every retry, so a retried call replays once;
// p.IdempotencyKey is not used. Events that were pruned give an error
// matching lifecycle.ErrCursorExpired.
func (cl *Client) ReplaySubscription(ctx context.Context, id string, p lifecycle.ReplayParams) (lifecycle.Replay, error) {
	r, _, err := post[lifecycle.Replay](ctx, cl, call{path: "/event-subscriptions/" + url.PathEscape(id) + "/replay", body: p, idempotent: true, idemKey: true})
	return r, err
}

// RetryDelivery makes the next attempt at a delivery now (POST
// /event-subscriptions/{id}/deliveries/{deliveryId}/retry, scope
// webhooks:write) and returns the attempt, pending and due. It is not
// retried: a lost answer could make a second attempt.
func (cl *Client) RetryDelivery(ctx context.Context, subscriptionID, deliveryID string) (lifecycle.Delivery, error) {
	d, _, err := post[lifecycle.Delivery](ctx, cl, call{path: "/event-subscriptions/" + url.PathEscape(subscriptionID) + "/deliveries/" +
		url.PathEscape(deliveryID) + "/retry"})
	return d, err
}

// EnableSubscription makes a disabled subscription active again (POST
// /event-subscriptions/{id}/enable, scope webhooks:write). Enabling is
// idempotent, so the call is retried like a read.
func (cl *Client) EnableSubscription(ctx context.Context, id string) (lifecycle.Subscription, error) {
	sub, _, err := post[lifecycle.Subscription](ctx, cl, call{path: "/event-subscriptions/" + url.PathEscape(id) + "/enable", idempotent: true})
	return sub, err
}

// CreateAPIKey issues an API key (POST /api-keys, scope keys:admin) and
// returns its record and its plaintext, which the server shows this once.
// It is not retried: a lost answer would leave a key nobody knows.
func (cl *Client) CreateAPIKey(ctx context.Context, p lifecycle.CreateAPIKeyParams) (lifecycle.APIKey, string, error) {
	created, _, err := post[struct {
		lifecycle.APIKey
		Key string `json:"key"`
	}](ctx, cl, call{path: "/api-keys", body: p})
	return created.APIKey, created.Key, err
}

// APIKeys lists every API key, revoked ones included (GET /api-keys, scope
// keys:admin); never a plaintext or a hash.
func (cl *Client) APIKeys(ctx context.Context) ([]lifecycle.APIKey, error) {
	keys, _, _, err := get[[]lifecycle.APIKey](ctx, cl, "/api-keys", nil)
	return keys, err
}

// RevokeAPIKey revokes an API key by its ID, key_... (DELETE /api-keys/{id},
// scope keys:admin). Revoking a revoked key is not an error.
func (cl *Client) RevokeAPIKey(ctx context.Context, keyID string) error {
	return cl.do(ctx, call{method: http.MethodDelete, path: "/api-keys/" + url.PathEscape(keyID), idempotent: true}, nil)
}

// OpenAPI returns the server's OpenAPI document (GET /openapi.yaml, no scope
// needed).
func (cl *Client) OpenAPI(ctx context.Context) ([]byte, error) {
	status, raw, header, err := cl.send(ctx, http.MethodGet, cl.url("/openapi.yaml", nil), nil, "")
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, parseError(status, header, raw)
	}
	return raw, nil
}

// Healthz asks whether the server's process serves requests (GET
// /healthz, no key needed): nil when it answers 200.
func (cl *Client) Healthz(ctx context.Context) error {
	_, err := cl.health(ctx, "/healthz")
	return err
}

// Ready asks whether the Service can do its work (GET /readyz, no key
// needed): its store answers and it holds its instance lease. A Service
// that is not ready answers 503: Ready then returns its checks with a
// *Error whose StatusCode is 503 and Code not_ready.
func (cl *Client) Ready(ctx context.Context) (lifecycle.Health, error) {
	return cl.health(ctx, "/readyz")
}

// health reads a health endpoint.
func (cl *Client) health(ctx context.Context, path string) (lifecycle.Health, error) {
	status, raw, header, err := cl.send(ctx, http.MethodGet, cl.url(path, nil), nil, "")
	if err != nil {
		return lifecycle.Health{}, err
	}
	var h lifecycle.Health
	if jerr := json.Unmarshal(raw, &h); jerr != nil || h.Status == "" {
		return lifecycle.Health{}, parseError(status, header, raw)
	}
	if status != http.StatusOK {
		return h, &Error{StatusCode: status, Code: "not_ready", Message: "The service is not ready: " + fmt.Sprint(h.Checks) + "."}
	}
	return h, nil
}
