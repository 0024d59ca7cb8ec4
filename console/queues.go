package console

import (
	"net/http"
	"strings"
	"time"

	"github.com/tasklifecycle/lifecycle"
)

// Limits of the body of POST queues/{id}/pause: a reason, as the API's
// own pause takes it.
const (
	maxPauseBytes       = 4 << 10
	maxPauseReasonBytes = 1000
	pauseReadTimeout    = 10 * time.Second
)

// pauseBody is the optional body of POST queues/{id}/pause.
type pauseBody struct {
	// Reason says why the queue is paused; it is kept, after who paused
	// it, as the queue's pause reason.
	Reason string `json:"reason"`
}

// handleQueues answers GET queues: the Service's merge queues, in ID
// order, as GET /merge-queues serves them (none when the Service's merge
// queue is off). It needs tasks:read.
func (c *Console) handleQueues(w http.ResponseWriter, r *http.Request) error {
	if _, _, err := c.signedIn(r, lifecycle.ScopeTasksRead); err != nil {
		return err
	}
	qs, err := c.svc.MergeQueues(r.Context())
	if err != nil {
		return err
	}
	lifecycle.WriteJSON(w, http.StatusOK, struct {
		Data []lifecycle.MergeQueue `json:"data"`
	}{nonNil(qs)})
	return nil
}

// handlePauseQueue answers POST queues/{id}/pause, with the session's
// CSRF token and an optional body {"reason": "..."}: it pauses the queue
// as the session's actor and answers the queue. It needs ship:write; an
// unknown queue is 404.
func (c *Console) handlePauseQueue(w http.ResponseWriter, r *http.Request) error {
	_, p, err := c.signedIn(r, lifecycle.ScopeShipWrite)
	if err != nil {
		return err
	}
	var body pauseBody
	if r.ContentLength != 0 {
		if err := c.svc.DecodeBody(w, r, &body, maxPauseBytes, pauseReadTimeout); err != nil {
			return err
		}
	}
	body.Reason = strings.TrimSpace(body.Reason)
	if len(body.Reason) > maxPauseReasonBytes {
		return &lifecycle.ValidationError{Fields: []lifecycle.FieldError{{Field: "reason", Reason: "must be at most 1000 bytes"}}}
	}
	q, err := c.svc.PauseMergeQueue(r.Context(), r.PathValue("id"), p.Actor, body.Reason)
	if err != nil {
		return err
	}
	c.svc.Logger().InfoContext(r.Context(), "console: paused merge queue", "queue", q.ID, "actor", p.Actor.ID)
	writeQueue(w, q)
	return nil
}

// handleResumeQueue answers POST queues/{id}/resume, with the session's
// CSRF token: it resumes the queue and answers it. It needs ship:write;
// an unknown queue is 404.
func (c *Console) handleResumeQueue(w http.ResponseWriter, r *http.Request) error {
	_, p, err := c.signedIn(r, lifecycle.ScopeShipWrite)
	if err != nil {
		return err
	}
	q, err := c.svc.ResumeMergeQueue(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	c.svc.Logger().InfoContext(r.Context(), "console: resumed merge queue", "queue", q.ID, "actor", p.Actor.ID)
	writeQueue(w, q)
	return nil
}

// writeQueue answers one queue.
func writeQueue(w http.ResponseWriter, q lifecycle.MergeQueue) {
	lifecycle.WriteJSON(w, http.StatusOK, struct {
		Data lifecycle.MergeQueue `json:"data"`
	}{q})
}
