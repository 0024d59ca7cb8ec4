package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// taskState is what the harness was told about one task: every field is
// an acknowledgement it holds the server to.
type taskState struct {
	id, identifier, project string
	submissionID            string // acknowledged submit
	headSHA                 string
	shipOp                  string // acknowledged ship operation
}

// state is the workload's record of acknowledgements and answers.
type state struct {
	srv     *server
	workers int

	target atomic.Pointer[string] // "submit" or "ship": kill after the next such acknowledgement

	mu         sync.Mutex
	tasks      []*taskState
	requests   int
	statuses   map[int]int
	fivexx     []string
	violations []string
	replays    []time.Duration // targeted submit kills: kill to replayed answer
	shipDone   []time.Duration // targeted ship kills: kill to succeeded
	waiters    sync.WaitGroup  // ship completion watchers
}

func newState(srv *server, workers int) *state {
	return &state{srv: srv, workers: workers, statuses: make(map[int]int)}
}

// killAfterNext arms a targeted kill: the next acknowledgement of kind
// (submit or ship) kills the server at once, then the harness measures
// how the retried or queued work fares. It returns once the kill happened.
func (st *state) killAfterNext(kind string) {
	st.target.Store(&kind)
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if st.target.Load() == nil {
			return // the worker that got the acknowledgement killed (and restarts)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// No such acknowledgement came in time: kill anyway.
	if st.target.CompareAndSwap(&kind, nil) {
		st.srv.kill("random (no " + kind + " acknowledged in 20 s)")
	}
}

// acknowledged runs a targeted kill when kind is armed; it reports whether
// it killed.
func (st *state) acknowledged(kind string) bool {
	t := st.target.Load()
	if t == nil || *t != kind || !st.target.CompareAndSwap(t, nil) {
		return false
	}
	st.srv.kill("right after a " + kind + " was acknowledged")
	return true
}

// runWorkers runs the workers until ctx is done.
func (st *state) runWorkers(ctx context.Context, seed uint64) {
	var wg sync.WaitGroup
	for w := 0; w < st.workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st.worker(ctx, w, rand.New(rand.NewPCG(seed, uint64(w))))
		}()
	}
	wg.Wait()
	st.waiters.Wait()
}

// answer is one HTTP answer.
type answer struct {
	status   int
	body     map[string]any
	replayed bool
}

// call sends one request, retrying while the server is down, until it
// answers or ctx ends. Every answer is counted; a 5xx is recorded.
func (st *state) call(ctx context.Context, method, path string, body any, idemKey string) (answer, error) {
	var raw []byte
	if body != nil {
		raw, _ = json.Marshal(body)
	}
	for {
		if err := ctx.Err(); err != nil {
			return answer{}, err
		}
		req, _ := http.NewRequestWithContext(ctx, method, st.srv.base+path, bytes.NewReader(raw))
		req.Header.Set("Authorization", "Bearer "+adminKey)
		if idemKey != "" {
			req.Header.Set("Idempotency-Key", idemKey)
		}
		resp, err := st.srv.client.Do(req)
		if err != nil {
			if ctx.Err() != nil {
				return answer{}, ctx.Err()
			}
			time.Sleep(20 * time.Millisecond) // down or restarting: not an answer
			continue
		}
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			time.Sleep(20 * time.Millisecond) // killed while answering
			continue
		}
		a := answer{status: resp.StatusCode, replayed: resp.Header.Get("Idempotent-Replayed") == "true"}
		json.Unmarshal(data, &a.body)
		st.mu.Lock()
		st.requests++
		st.statuses[a.status]++
		if a.status >= 500 {
			st.fivexx = append(st.fivexx, fmt.Sprintf("%s %s: %d %s", method, path, a.status, data))
		}
		st.mu.Unlock()
		return a, nil
	}
}

// violation records a broken invariant seen during the workload.
func (st *state) violation(format string, args ...any) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.violations = append(st.violations, fmt.Sprintf(format, args...))
}

// worker takes tasks through create, start, submit, checks, review and
// ship until ctx is done.
func (st *state) worker(ctx context.Context, w int, rnd *rand.Rand) {
	for n := 0; ctx.Err() == nil; n++ {
		t := &taskState{identifier: fmt.Sprintf("CH-%d-%d", w, n), project: fmt.Sprintf("crash%d", w%2)}
		if err := st.lifecycle(ctx, t, rnd); err != nil && ctx.Err() == nil {
			st.violation("task %s: %v", t.identifier, err)
		}
	}
}

// data returns the data member of an answer.
func (a answer) data() map[string]any {
	d, _ := a.body["data"].(map[string]any)
	return d
}

// lifecycle takes one task from creation to an acknowledged ship.
func (st *state) lifecycle(ctx context.Context, t *taskState, rnd *rand.Rand) error {
	create := map[string]any{"identifier": t.identifier, "title": "Crash harness task " + t.identifier,
		"links": map[string]any{"issue": "https://issues.example.com/" + t.identifier}, "context": map[string]any{"project": t.project, "goal": "survive"}}
	a, err := st.call(ctx, "POST", "/tasks", create, "")
	if err != nil {
		return nil
	}
	switch {
	case a.status == http.StatusCreated:
		t.id, _ = a.data()["id"].(string)
	case a.status == http.StatusConflict: // created before a kill cut the answer off
		if t.id, err = st.findTask(ctx, t); err != nil || t.id == "" {
			return fmt.Errorf("created before a kill, but not found: %v", err)
		}
	default:
		return fmt.Errorf("create: %d %v", a.status, a.body)
	}
	st.mu.Lock()
	st.tasks = append(st.tasks, t)
	st.mu.Unlock()

	if a, err = st.call(ctx, "POST", "/tasks/"+t.id+"/start", nil, ""); err != nil {
		return nil
	} else if a.status != http.StatusOK && a.status != http.StatusConflict {
		return fmt.Errorf("start: %d %v", a.status, a.body)
	}

	submit := map[string]any{"summary": "Work on " + t.identifier + " is done.", "mode": "artifact",
		"checks": []map[string]any{{"name": "unit", "status": "passed"}}}
	key := "submit-" + t.id
	for {
		if a, err = st.call(ctx, "POST", "/tasks/"+t.id+"/submit", submit, key); err != nil {
			return nil
		}
		if a.status == http.StatusConflict && errorReason(a) == "request_in_progress" {
			time.Sleep(100 * time.Millisecond) // held by a request the kill cut short: wait for its lease
			continue
		}
		break
	}
	if a.status != http.StatusAccepted {
		return fmt.Errorf("submit: %d %v", a.status, a.body)
	}
	t.submissionID, _ = a.data()["submissionId"].(string)
	t.headSHA, _ = a.data()["headSha"].(string)
	if st.acknowledged("submit") {
		killed := st.srv.lastKill()
		if err := st.srv.restart(); err != nil {
			return err
		}
		again, err := st.call(ctx, "POST", "/tasks/"+t.id+"/submit", submit, key)
		if err != nil {
			return nil
		}
		if again.status != http.StatusAccepted || !again.replayed || again.data()["submissionId"] != t.submissionID {
			return fmt.Errorf("an acknowledged submit was not replayed after a kill: %d replayed=%v %v", again.status, again.replayed, again.body)
		}
		st.mu.Lock()
		st.replays = append(st.replays, time.Since(killed))
		st.mu.Unlock()
	}

	checks := map[string]any{"headSha": t.headSHA, "checks": []map[string]any{{"name": "build", "status": "passed"}}}
	if a, err = st.call(ctx, "POST", "/tasks/"+t.id+"/checks", checks, ""); err != nil {
		return nil
	} else if a.status != http.StatusOK {
		return fmt.Errorf("checks: %d %v", a.status, a.body)
	}
	if a, err = st.call(ctx, "POST", "/tasks/"+t.id+"/reviews", map[string]any{"outcome": "approved", "body": "Fine."}, ""); err != nil {
		return nil
	} else if a.status != http.StatusCreated {
		return fmt.Errorf("review: %d %v", a.status, a.body)
	}

	ship := map[string]any{"mode": "merge_only", "targetEnvironment": "staging", "expectedHeadSha": t.headSHA}
	for {
		if a, err = st.call(ctx, "POST", "/tasks/"+t.id+"/ship", ship, "ship-"+t.id); err != nil {
			return nil
		}
		if a.status == http.StatusConflict && errorReason(a) == "request_in_progress" {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		break
	}
	if a.status != http.StatusAccepted {
		return fmt.Errorf("ship: %d %v", a.status, a.body)
	}
	st.mu.Lock()
	t.shipOp, _ = a.data()["operationId"].(string)
	st.mu.Unlock()
	if st.acknowledged("ship") {
		killed := st.srv.lastKill()
		if err := st.srv.restart(); err != nil {
			return err
		}
		st.waiters.Add(1)
		go func() {
			defer st.waiters.Done()
			if d, ok := st.waitShip(t.shipOp, killed, 150*time.Second); ok {
				st.mu.Lock()
				st.shipDone = append(st.shipDone, d)
				st.mu.Unlock()
			}
		}()
	}
	time.Sleep(time.Duration(rnd.IntN(50)) * time.Millisecond)
	return nil
}

// errorReason returns error.details.reason of an answer.
func errorReason(a answer) string {
	e, _ := a.body["error"].(map[string]any)
	d, _ := e["details"].(map[string]any)
	r, _ := d["reason"].(string)
	return r
}

// findTask finds a task by identifier in its project.
func (st *state) findTask(ctx context.Context, t *taskState) (string, error) {
	cursor := ""
	for {
		a, err := st.call(ctx, "GET", "/tasks?limit=200&project="+t.project+cursor, nil, "")
		if err != nil {
			return "", err
		}
		list, _ := a.body["data"].([]any)
		for _, item := range list {
			m, _ := item.(map[string]any)
			if m["identifier"] == t.identifier {
				id, _ := m["id"].(string)
				return id, nil
			}
		}
		next, _ := a.body["nextCursor"].(string)
		if next == "" {
			return "", nil
		}
		cursor = "&cursor=" + next
	}
}

// waitShip polls a ship operation until it is terminal; it returns the time
// since since, and whether it succeeded in time.
func (st *state) waitShip(op string, since time.Time, limit time.Duration) (time.Duration, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	for {
		a, err := st.call(ctx, "GET", "/ship-operations/"+op, nil, "")
		if err != nil {
			return 0, false
		}
		switch a.data()["status"] {
		case "succeeded":
			return time.Since(since), true
		case "failed":
			return 0, false
		}
		time.Sleep(50 * time.Millisecond)
	}
}
