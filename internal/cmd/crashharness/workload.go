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
	shipOp                  string    // acknowledged ship operation
	shipAcked               time.Time // when it was acknowledged
}

// state is the workload's record of acknowledgements and answers.
type state struct {
	srv     *server   // the server the kill mode kills
	servers []*server // where requests go, each to the next in turn
	next    atomic.Uint64
	workers int
	// faults is set in the store-fault mode: a 503 store_unavailable
	// with Retry-After is an answer the client retries, and a request
	// without an answer (no process is killed) is a failure.
	faults bool
	// shipsInFlight, when set, bounds the ships a worker has acknowledged
	// and not yet seen end: it waits before it starts another task. The
	// merge queue mode sets it, so that the queue keeps up with the
	// workload and a run stays bounded in time.
	shipsInFlight int

	target atomic.Pointer[string] // "submit" or "ship": kill after the next such acknowledgement

	mu          sync.Mutex
	tasks       []*taskState
	requests    int
	statuses    map[int]int
	fivexx      []string
	noAnswer    []string    // store-fault mode: requests that got no answer
	unavailable []time.Time // store-fault mode: when each 503 store_unavailable came
	slowest     time.Duration
	slowestReq  string
	ambiguous   int             // creates answered 503 store_unavailable, then 409: the first had committed
	keyWaits    []time.Duration // retries refused 409 request_in_progress: how long until the key was free
	conflicts   map[string]int  // 409 answers by error.details.reason
	violations  []string
	replays     []time.Duration // targeted submit kills: kill to replayed answer
	shipDone    []time.Duration // targeted ship kills: kill to succeeded
	waiters     sync.WaitGroup  // ship completion watchers
}

// newState returns the workload's state for requests to servers, the
// first of which the kill mode kills.
func newState(workers int, servers ...*server) *state {
	return &state{srv: servers[0], servers: servers, workers: workers, statuses: make(map[int]int), conflicts: make(map[string]int)}
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
	// unavailable counts the 503 store_unavailable answers the request
	// got, and retried, before this one.
	unavailable int
}

// storeRetry is how soon the store-fault mode retries a request answered
// 503 store_unavailable. It is shorter than the answer's Retry-After (2 s)
// so that the figures measure the service's recovery, not the client's
// patience.
const storeRetry = 100 * time.Millisecond

// call sends one request, to the next server in turn, retrying while the
// server is down (and, in the store-fault mode, while it answers 503
// store_unavailable), until it answers or ctx ends.
func (st *state) call(ctx context.Context, method, path string, body any, idemKey string) (answer, error) {
	var raw []byte
	if body != nil {
		raw, _ = json.Marshal(body)
	}
	unavailable := 0
	for {
		if err := ctx.Err(); err != nil {
			return answer{}, err
		}
		srv := st.servers[int(st.next.Add(1)%uint64(len(st.servers)))]
		a, err := st.once(ctx, srv, method, path, raw, idemKey)
		switch {
		case err != nil && ctx.Err() != nil:
			return answer{}, ctx.Err()
		case err != nil:
			if st.faults {
				st.mu.Lock()
				st.noAnswer = append(st.noAnswer, fmt.Sprintf("%s %s on %s: %v", method, path, srv.name, err))
				st.mu.Unlock()
			}
			time.Sleep(20 * time.Millisecond) // down or restarting: not an answer
			continue
		case st.faults && a.storeUnavailable():
			unavailable++
			time.Sleep(storeRetry)
			continue
		}
		a.unavailable = unavailable
		return a, nil
	}
}

// once sends one request to srv and returns its answer, counted. An
// error means no answer came (refused, cut off, or past the client's
// timeout).
func (st *state) once(ctx context.Context, srv *server, method, path string, raw []byte, idemKey string) (answer, error) {
	req, _ := http.NewRequestWithContext(ctx, method, srv.base+path, bytes.NewReader(raw))
	req.Header.Set("Authorization", "Bearer "+adminKey)
	if idemKey != "" {
		req.Header.Set("Idempotency-Key", idemKey)
	}
	sent := time.Now()
	resp, err := srv.client.Do(req)
	if err != nil {
		return answer{}, err
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return answer{}, err // killed while answering
	}
	return st.count(srv, method, path, resp.StatusCode, resp.Header, data, time.Since(sent)), nil
}

// count counts an answer that took took and returns it: a 5xx is
// recorded unless, in the store-fault mode, it is a 503 store_unavailable
// with Retry-After.
func (st *state) count(srv *server, method, path string, status int, header http.Header, data []byte, took time.Duration) answer {
	a := answer{status: status, replayed: header.Get("Idempotent-Replayed") == "true"}
	json.Unmarshal(data, &a.body)
	st.mu.Lock()
	defer st.mu.Unlock()
	st.requests++
	st.statuses[a.status]++
	if a.status == http.StatusConflict {
		st.conflicts[errorReason(a)]++
	}
	if took > st.slowest {
		st.slowest, st.slowestReq = took, fmt.Sprintf("%s %s on %s: %d", method, path, srv.name, a.status)
	}
	switch {
	case st.faults && a.storeUnavailable() && header.Get("Retry-After") != "":
		st.unavailable = append(st.unavailable, time.Now())
	case a.status >= 500:
		st.fivexx = append(st.fivexx, fmt.Sprintf("%s %s on %s: %d (Retry-After %q) %s", method, path, srv.name, a.status, header.Get("Retry-After"), data))
	}
	return a
}

// storeUnavailable reports whether a is 503 store_unavailable.
func (a answer) storeUnavailable() bool {
	e, _ := a.body["error"].(map[string]any)
	return a.status == http.StatusServiceUnavailable && e["code"] == "store_unavailable"
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
	var inFlight []string // ship operations acknowledged, not seen ended
	for n := 0; ctx.Err() == nil; n++ {
		if st.shipsInFlight > 0 {
			if inFlight = st.awaitShips(ctx, inFlight, st.shipsInFlight-1); ctx.Err() != nil {
				return
			}
		}
		t := &taskState{identifier: fmt.Sprintf("CH-%d-%d", w, n), project: fmt.Sprintf("crash%d", w%2)}
		if err := st.lifecycle(ctx, t, rnd); err != nil && ctx.Err() == nil {
			st.violation("task %s: %v", t.identifier, err)
		}
		st.mu.Lock()
		if t.shipOp != "" {
			inFlight = append(inFlight, t.shipOp)
		}
		st.mu.Unlock()
	}
}

// awaitShips waits until at most n of the ship operations ops have not
// ended, or ctx is done, and returns those that have not.
func (st *state) awaitShips(ctx context.Context, ops []string, n int) []string {
	for len(ops) > n && ctx.Err() == nil {
		left := ops[:0]
		for _, op := range ops {
			a, err := st.call(ctx, "GET", "/ship-operations/"+op, nil, "")
			if err != nil {
				return ops
			}
			if s := a.data()["status"]; s != "succeeded" && s != "failed" {
				left = append(left, op)
			}
		}
		ops = left
		if len(ops) > n {
			time.Sleep(100 * time.Millisecond)
		}
	}
	return ops
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
		if a.unavailable > 0 {
			// The connection to the database broke while it committed:
			// the 503 could not tell, and the task was made.
			st.mu.Lock()
			st.ambiguous++
			st.mu.Unlock()
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
	var held time.Time // when the key was first found held
	for {
		if a, err = st.call(ctx, "POST", "/tasks/"+t.id+"/submit", submit, key); err != nil {
			return nil
		}
		if a.status == http.StatusConflict && errorReason(a) == "request_in_progress" {
			held = st.heldKey(held)
			time.Sleep(100 * time.Millisecond) // held by a request the kill cut short: wait for its lease
			continue
		}
		st.keyFreed(held)
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
	held = time.Time{}
	for {
		if a, err = st.call(ctx, "POST", "/tasks/"+t.id+"/ship", ship, "ship-"+t.id); err != nil {
			return nil
		}
		if a.status == http.StatusConflict && errorReason(a) == "request_in_progress" {
			held = st.heldKey(held)
			time.Sleep(100 * time.Millisecond)
			continue
		}
		st.keyFreed(held)
		break
	}
	if a.status != http.StatusAccepted {
		return fmt.Errorf("ship: %d %v", a.status, a.body)
	}
	st.mu.Lock()
	t.shipOp, _ = a.data()["operationId"].(string)
	t.shipAcked = time.Now()
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

// heldKey notes a retry refused 409 request_in_progress: its key is held
// by an earlier attempt. It returns when the key was first found held.
func (st *state) heldKey(since time.Time) time.Time {
	if since.IsZero() {
		return time.Now()
	}
	return since
}

// keyFreed records how long a retry waited for its key, found held since
// since (zero: it was not).
func (st *state) keyFreed(since time.Time) {
	if since.IsZero() {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	st.keyWaits = append(st.keyWaits, time.Since(since))
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
