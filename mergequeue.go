package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/tasklifecycle/lifecycle/internal/httpapi"
	"github.com/tasklifecycle/lifecycle/internal/id"
	"github.com/tasklifecycle/lifecycle/internal/mergequeue"
	"github.com/tasklifecycle/lifecycle/internal/queuerun"
	"github.com/tasklifecycle/lifecycle/internal/telemetry"
	"github.com/tasklifecycle/lifecycle/lifecycletype"
)

// MergeQueueConfig turns on and tunes the lifecycle's own merge queue (see
// docs/merge-queue.md). With it on, a ship of a task whose adapter is a
// [QueueHost] enters the queue of its repository and base branch, unless
// the host queues merges into that base itself (GitHub's merge queue,
// which the adapter then uses): candidates are built and tested, and the
// base moves to exactly a tested candidate. The Store must be a
// [MergeQueueStore].
type MergeQueueConfig struct {
	// Enabled turns the queue on.
	Enabled bool
	// Depth bounds the candidates of one queue built or under test at
	// once: the CI runs the queue may hold. Defaults to 8.
	Depth int
	// Speculation bounds the candidates of the landing chain, each built
	// on the one before, under test at once while the queue is loaded.
	// Defaults to the engine's (see internal/mergequeue).
	Speculation int
	// MaxBatch bounds the changes of one candidate. Defaults to 16.
	MaxBatch int
	// Alternatives bounds the alternatives of a round of a quiet queue:
	// candidates beside the round's batch, each without one part, one of
	// which lands the rest should the batch fail. They spend CI runs to
	// shorten the time in queue. 0: the engine's default (Depth less
	// three, or half of it); negative: none, one CI run per round.
	Alternatives int
	// HotfixLead is how far ahead a task of priority critical goes: it
	// is placed as if it had entered the queue that much earlier, so a
	// change that waited longer still goes first. Defaults to 1 hour.
	HotfixLead time.Duration
	// PollInterval is how often a queue reads its candidates' CI and its
	// base. Defaults to 10 seconds.
	PollInterval time.Duration
	// CITimeout fails a candidate whose CI has not finished in time.
	// Defaults to 2 hours.
	CITimeout time.Duration
	// BranchPrefix begins the queue branches' names: a candidate is
	// built on <BranchPrefix><base>/<n>. Defaults to "lifecycle-queue/".
	BranchPrefix string
}

// newQueue builds the merge queue's runner, when Config.MergeQueue
// enables it.
func (s *Service) newQueue() (*queuerun.Runner, error) {
	c := s.cfg.MergeQueue
	if !c.Enabled {
		return nil, nil
	}
	if s.caps.queues == nil {
		return nil, errors.New("lifecycle: Config.MergeQueue is enabled but the Store keeps no merge queues (lifecycle.MergeQueueStore)")
	}
	orDefault(&c.Depth, 8)
	orDefault(&c.MaxBatch, 16)
	orDefault(&c.PollInterval, 10*time.Second)
	orDefault(&c.CITimeout, 2*time.Hour)
	orDefault(&c.BranchPrefix, "lifecycle-queue/")
	r := queuerun.New(queuerun.Config{
		Owner: s.owner, Store: s.caps.queues, Update: s.updateQueue, Domain: queueDomain{s}, Clock: s.clock, Log: s.log, Tel: s.tel,
		Engine:       mergequeue.Config{Depth: c.Depth, Speculation: c.Speculation, MaxBatch: c.MaxBatch, Alternatives: c.Alternatives, HotfixLead: c.HotfixLead},
		Poll:         c.PollInterval,
		Lease:        3 * c.PollInterval,
		CITimeout:    c.CITimeout,
		BranchPrefix: c.BranchPrefix,
		HostTimeout:  s.cfg.ProviderTimeout,
	})
	err := s.tel.ObserveQueueDepth(func(ctx context.Context) ([]telemetry.QueueDepth, error) {
		qs, err := r.Views(ctx)
		out := make([]telemetry.QueueDepth, len(qs))
		for i, q := range qs {
			out[i] = telemetry.QueueDepth{Queue: q.ID, Base: q.Base, Entries: int64(len(q.Entries))}
		}
		return out, err
	})
	if err != nil {
		return nil, fmt.Errorf("lifecycle: instruments: %w", err)
	}
	return r, nil
}

// updateQueue runs fn in a Store transaction, with the transaction as a
// MergeQueueTx.
func (s *Service) updateQueue(ctx context.Context, fn func(tx Tx, qtx MergeQueueTx) error) error {
	return s.update(ctx, func(tx Tx) error {
		qtx, ok := storeTx(tx).(MergeQueueTx)
		if !ok {
			return errors.New("lifecycle: the Store's transactions keep no merge queues (lifecycle.MergeQueueTx)")
		}
		return fn(tx, qtx)
	})
}

// queuedAdapter is the adapter of a task whose ship goes through the
// lifecycle's merge queue: its Merge enters the change in the queue and
// follows it there, unless the host queues merges into the base itself.
type queuedAdapter struct {
	ProviderAdapter
	host QueueHost
	s    *Service
	t    Task
}

// Merge implements ProviderAdapter.
func (a queuedAdapter) Merge(ctx context.Context, req MergeRequest) (MergeResult, error) {
	base := deref(a.t.BaseBranch)
	native, err := a.host.NativeQueue(ctx, RepoRef{Owner: req.Ref.Owner, Repo: req.Ref.Repo}, base)
	if err != nil {
		return MergeResult{}, err
	}
	if native {
		return a.ProviderAdapter.Merge(ctx, req)
	}
	return a.s.queue.Enter(ctx, queuerun.Change{Mode: a.t.SubmissionMode, Project: a.t.Project(), Base: base, Task: a.t,
		OperationID: a.t.ActiveShipID, PullRequest: req.Ref, Head: req.ExpectedHeadSHA}, a.host)
}

// shipAdapter returns the adapter that merges t's pull request: through
// the merge queue when it is on and the adapter can carry it.
func (s *Service) shipAdapter(t *Task, mode SubmitMode) (ProviderAdapter, error) {
	a, err := s.adapterFor(t, mode)
	if err != nil || s.queue == nil || deref(t.BaseBranch) == "" {
		return a, err
	}
	if h, ok := a.(QueueHost); ok {
		return queuedAdapter{ProviderAdapter: a, host: h, s: s, t: *t}, nil
	}
	return a, nil
}

// queueDomain is the Service as the merge queue's driver sees it.
type queueDomain struct{ s *Service }

var _ queuerun.Domain = queueDomain{}

func (d queueDomain) Host(q MergeQueueRecord) (QueueHost, CIProvider, error) {
	t := &Task{SubmissionMode: q.Mode}
	if q.Project != "" {
		t.Context.Project = &q.Project
	}
	a, err := d.s.adapterFor(t, q.Mode)
	if err != nil {
		return nil, nil, err
	}
	h, ok := a.(QueueHost)
	if !ok {
		return nil, nil, fmt.Errorf("the adapter of queue %s cannot carry a merge queue", q.ID)
	}
	ci := d.s.ciFor(t)
	if ci == nil {
		return nil, nil, fmt.Errorf("queue %s has no CI provider to test its candidates", q.ID)
	}
	return h, ci, nil
}

func (d queueDomain) Task(ctx context.Context, taskID string) (Task, error) {
	return d.s.store.Task(ctx, taskID)
}

// EntryLive reads the task alone: its ActiveShipID is the operation
// queued or running for it, cleared in the transaction that ends it.
func (d queueDomain) EntryLive(ctx context.Context, taskID, operationID, head string) (bool, error) {
	t, err := d.s.store.Task(ctx, taskID)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return err == nil && t.ActiveShipID == operationID && strings.EqualFold(deref(t.HeadSHA), head), err
}

func (d queueDomain) Emit(ctx context.Context, tx Tx, taskID string, data TaskMergeQueueData) error {
	t, err := tx.Task(ctx, taskID)
	if err != nil {
		return fmt.Errorf("merge queue event of task %s: %w", taskID, err)
	}
	s := d.s
	if err := s.countAgent(ctx, tx, &t, nil); err != nil {
		return fmt.Errorf("merge queue event of task %s: %w", taskID, err)
	}
	s.setActions(&t)
	if err := s.recordActivity(ctx, tx, &t, SystemActor()); err != nil {
		return fmt.Errorf("merge queue event of task %s: %w", taskID, err)
	}
	data.EventData = EventData{TaskID: t.ID, TaskIdentifier: t.Identifier, Status: t.Status,
		Summary: fmt.Sprintf("Task %s: %s in the merge queue into %s", t.Identifier, data.Change, data.Queue.Base), AvailableActions: httpapi.NonNil(t.AvailableActions),
		Links: EventLinks{Task: s.link("/tasks/" + t.ID)}}
	if t.ActiveShipID != "" {
		data.Links.ShipOperation = s.link("/ship-operations/" + t.ActiveShipID)
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("encode %s event: %w", EventTaskMergeQueue, err)
	}
	e := Event{ID: id.New("evt_"), Type: EventTaskMergeQueue, OccurredAt: s.now(), TaskVersion: t.Version,
		TraceID: httpapi.TraceIDFrom(ctx), Data: raw, TaskID: t.ID, Project: t.Project()}
	if err := tx.AppendEvent(ctx, &e); err != nil {
		return fmt.Errorf("append %s event: %w", EventTaskMergeQueue, err)
	}
	return nil
}

// MergeQueues returns the lifecycle's merge queues, in ID order: none
// when Config.MergeQueue is off.
func (s *Service) MergeQueues(ctx context.Context) ([]MergeQueue, error) {
	if s.queue == nil {
		return []MergeQueue{}, nil
	}
	return s.queue.Views(ctx)
}

// MergeQueue returns one merge queue; its error matches ErrNotFound when
// there is none.
func (s *Service) MergeQueue(ctx context.Context, queueID string) (MergeQueue, error) {
	if s.queue == nil {
		return MergeQueue{}, notFound("merge queue", queueID)
	}
	q, err := s.queue.ViewOf(ctx, queueID)
	if errors.Is(err, ErrNotFound) {
		return q, notFound("merge queue", queueID)
	}
	return q, err
}

// MergeQueueOf returns the merge queue a task's change is in, and its
// entry there; the error matches ErrNotFound when it is in none.
func (s *Service) MergeQueueOf(ctx context.Context, taskID string) (MergeQueue, MergeQueueEntry, error) {
	if s.queue == nil {
		return MergeQueue{}, MergeQueueEntry{}, fmt.Errorf("task %s is in no merge queue: %w", taskID, ErrNotFound)
	}
	q, e, err := s.queue.Locate(ctx, taskID)
	if errors.Is(err, ErrNotFound) {
		return q, MergeQueueEntry{}, fmt.Errorf("task %s is in no merge queue: %w", taskID, ErrNotFound)
	}
	if err != nil {
		return q, MergeQueueEntry{}, err
	}
	return q, *e, nil
}

// PauseMergeQueue pauses a merge queue: nothing is built or landed until
// ResumeMergeQueue; candidates under test go on. actor and why are kept
// as the queue's pause reason.
func (s *Service) PauseMergeQueue(ctx context.Context, queueID string, actor Actor, why string) (MergeQueue, error) {
	reason := "paused by " + actor.ID
	if why != "" {
		reason += ": " + why
	}
	return s.setQueuePaused(ctx, queueID, true, reason)
}

// ResumeMergeQueue resumes a paused merge queue.
func (s *Service) ResumeMergeQueue(ctx context.Context, queueID string) (MergeQueue, error) {
	return s.setQueuePaused(ctx, queueID, false, "")
}

func (s *Service) setQueuePaused(ctx context.Context, queueID string, paused bool, why string) (MergeQueue, error) {
	if s.queue == nil {
		return MergeQueue{}, notFound("merge queue", queueID)
	}
	q, err := s.queue.SetPaused(ctx, queueID, paused, why)
	if errors.Is(err, ErrNotFound) {
		return q, notFound("merge queue", queueID)
	}
	return q, err
}

func (s *Service) handleListMergeQueues(w http.ResponseWriter, r *http.Request, p *Principal) error {
	qs, err := s.MergeQueues(httpapi.RequestContext(r))
	if err != nil {
		return err
	}
	httpapi.WriteJSON(w, http.StatusOK, struct {
		Data []MergeQueue `json:"data"`
	}{qs})
	return nil
}

func (s *Service) handleGetMergeQueue(w http.ResponseWriter, r *http.Request, p *Principal) error {
	q, err := s.MergeQueue(httpapi.RequestContext(r), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeQueue(w, q)
	return nil
}

// pauseBody is the optional body of POST /merge-queues/{id}/pause.
type pauseBody struct {
	Reason string `json:"reason"`
}

func (s *Service) handlePauseMergeQueue(w http.ResponseWriter, r *http.Request, p *Principal) error {
	var body pauseBody
	if err := httpapi.DecodeJSON(w, r, &body, true); err != nil {
		return err
	}
	if len(body.Reason) > 1000 {
		return lifecycletype.Invalid("reason", "must be at most 1000 bytes")
	}
	q, err := s.PauseMergeQueue(httpapi.RequestContext(r), r.PathValue("id"), p.Actor, body.Reason)
	if err != nil {
		return err
	}
	writeQueue(w, q)
	return nil
}

func (s *Service) handleResumeMergeQueue(w http.ResponseWriter, r *http.Request, p *Principal) error {
	q, err := s.ResumeMergeQueue(httpapi.RequestContext(r), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeQueue(w, q)
	return nil
}

func writeQueue(w http.ResponseWriter, q MergeQueue) {
	httpapi.WriteJSON(w, http.StatusOK, struct {
		Data MergeQueue `json:"data"`
	}{q})
}
