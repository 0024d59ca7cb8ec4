package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/store/sqlite"
)

// results are the figures and the broken invariants of a run.
type results struct {
	violations []string
	workload   time.Duration
	settle     time.Duration
	tasks      int
	submits    int
	ships      int
	events     int
	gaps       int // sequence numbers the store left unused (PostgreSQL)
	delivered  int
	duplicates int
	reconnects int
	notes      []string // figures of the mode
}

func (r *results) fail(format string, args ...any) {
	r.violations = append(r.violations, fmt.Sprintf(format, args...))
}

// target is what a run checks: the demo processes, the data directory
// they share (its git repositories stand in for the code host), and the
// Store they share, opened once they are stopped.
type target struct {
	servers   []*server
	data      string
	openStore func(ctx context.Context) (lifecycle.Store, error)
	// secretFiles is a glob of the files that must not hold the webhook
	// secret in the clear; empty when the Store keeps no files here.
	secretFiles string
	// dump, when set, returns a dump of the Store's data, which must not
	// hold the webhook secret in the clear either.
	dump func(ctx context.Context) ([]byte, error)
	// queue is set in the merge queue mode: the invariants of the queue
	// replace the one merge commit per task.
	queue *queueRun
	// gapless says that the Store numbers events without gaps. SQLite
	// does; PostgreSQL draws sequences from a SEQUENCE, and a transaction
	// that drew one and then rolled back (cut off by a restart) leaves a
	// number unused. Either way no stored event may be missed.
	gapless bool
}

// sqliteTarget is the target of a single demo on SQLite.
func sqliteTarget(srv *server) target {
	return target{
		servers: []*server{srv},
		data:    srv.data,
		openStore: func(context.Context) (lifecycle.Store, error) {
			return sqlite.New(sqlite.Config{Path: filepath.Join(srv.data, "lifecycle.db")})
		},
		secretFiles: filepath.Join(srv.data, "lifecycle.db*"),
		gapless:     true,
	}
}

// check waits at most settle for the acknowledged work to settle, stops
// the servers cleanly and checks every invariant against what the
// clients were told, the Store, the event streams, the webhook receiver
// and the git repositories.
func check(ctx context.Context, settle time.Duration, tg target, st *state, streams []*observer, recv *receiver) *results {
	r := &results{}
	start := time.Now()
	deadline := start.Add(settle)
	st.mu.Lock()
	tasks := slices.Clone(st.tasks)
	r.violations = append(r.violations, st.violations...)
	st.mu.Unlock()

	// Every acknowledged mutation is visible, and every accepted ship ends.
	shipped := map[string]bool{}
	for _, t := range tasks {
		r.tasks++
		if t.shipOp != "" {
			r.ships++
			left := time.Until(deadline)
			if _, ok := st.waitShip(t.shipOp, start, max(left, time.Second)); !ok {
				r.fail("ship %s of %s is not succeeded within the deadline", t.shipOp, t.identifier)
			} else {
				shipped[t.id] = true
			}
		}
		a, err := st.call(ctx, "GET", "/tasks/"+t.id, nil, "")
		if err != nil || a.status != 200 {
			r.fail("acknowledged task %s (%s) is not visible: %d", t.identifier, t.id, a.status)
			continue
		}
		if t.submissionID != "" {
			r.submits++
			if a.data()["submissionId"] != t.submissionID {
				r.fail("task %s: acknowledged submission %s, the task says %v", t.identifier, t.submissionID, a.data()["submissionId"])
			}
		}
		if shipped[t.id] && a.data()["status"] != "done" {
			r.fail("task %s: shipped, but its status is %v", t.identifier, a.data()["status"])
		}
	}
	if tg.queue != nil {
		tg.queue.readLanded(ctx, r, st, tasks)
	}

	// The streams and the webhooks catch up: wait until every event the
	// streams saw was delivered and they have been quiet a while.
	for time.Now().Before(deadline) {
		settled := true
		for _, o := range streams {
			ids, _, last := o.seen()
			settled = settled && time.Since(last) > 1500*time.Millisecond && recv.has(ids) == len(ids)
		}
		if settled {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	r.settle = time.Since(start)
	for _, srv := range tg.servers {
		if err := srv.stop(); err != nil {
			r.fail("%v", err)
		}
	}

	// Each stream saw every stored event after it started, once, in order.
	store, err := tg.openStore(ctx)
	if err != nil {
		r.fail("open the store: %v", err)
		return r
	}
	defer store.Close()
	var stored []lifecycle.Event
	for after := int64(0); ; {
		page, err := store.Events(ctx, lifecycle.EventFilter{After: after, Limit: 1000})
		if err != nil {
			r.fail("read the events: %v", err)
			return r
		}
		stored = append(stored, page...)
		if len(page) < 1000 {
			break
		}
		after = page[len(page)-1].Sequence
	}
	r.events = len(stored)
	for i := 1; i < len(stored); i++ {
		switch prev, seq := stored[i-1].Sequence, stored[i].Sequence; {
		case seq <= prev:
			r.fail("the outbox is out of order: sequence %d after %d", seq, prev)
		case seq != prev+1 && tg.gapless:
			r.fail("the outbox has a gap: sequence %d after %d", seq, prev)
		case seq != prev+1:
			r.gaps += int(seq - prev - 1)
		}
	}
	for _, o := range streams {
		r.checkStream(o, stored)
	}

	// Every event reached the webhook receiver, with a valid signature.
	recv.mu.Lock()
	for _, e := range stored {
		if n := recv.events[e.ID]; n == 0 {
			r.fail("event %s (sequence %d) was never delivered to the webhook", e.ID, e.Sequence)
		} else {
			r.delivered++
			r.duplicates += n - 1
		}
	}
	if recv.invalid > 0 || recv.mismatch > 0 {
		r.fail("the receiver got %d deliveries with a bad signature and %d with a wrong event ID header", recv.invalid, recv.mismatch)
	}
	recv.mu.Unlock()

	// Every shipped task is merged exactly once; no task twice.
	if tg.queue != nil {
		r.notes = append(r.notes, tg.queue.verify(r, tg, tasks, shipped, stored)...)
	} else {
		r.checkMerges(tg, tasks, shipped)
	}

	// No 5xx answer (but, in the store-fault mode, 503 store_unavailable
	// with Retry-After), and no request without an answer there.
	st.mu.Lock()
	for _, f := range st.fivexx {
		r.fail("5xx answer: %s", f)
	}
	for _, f := range st.noAnswer {
		r.fail("no answer (no process was killed): %s", f)
	}
	st.mu.Unlock()

	// The webhook secret is sealed at rest.
	if tg.secretFiles != "" {
		files, _ := filepath.Glob(tg.secretFiles)
		for _, f := range files {
			if raw, err := os.ReadFile(f); err == nil && bytes.Contains(raw, []byte(webhookSecret)) {
				r.fail("%s holds the webhook secret in the clear", filepath.Base(f))
			}
		}
	}
	if tg.dump != nil {
		raw, err := tg.dump(ctx)
		switch {
		case err != nil:
			r.fail("dump the store: %v", err)
		case !bytes.Contains(raw, []byte("crashharness")):
			r.fail("the dump of the store holds none of the harness's data: %.200s", raw)
		case bytes.Contains(raw, []byte(webhookSecret)):
			r.fail("the store holds the webhook secret in the clear")
		}
	}
	return r
}

// checkMerges checks that every shipped task is merged exactly once, and
// no task twice: one merge commit per task on main.
func (r *results) checkMerges(tg target, tasks []*taskState, shipped map[string]bool) {
	merges := map[string]int{}
	for _, project := range []string{"crash0", "crash1"} {
		if err := countMerges(filepath.Join(tg.data, "repos", project), merges); err != nil {
			r.fail("read the repository of %s: %v", project, err)
		}
	}
	for _, t := range tasks {
		if shipped[t.id] && merges[t.id] != 1 {
			r.fail("task %s was shipped and merged %d times", t.identifier, merges[t.id])
		}
	}
	for id, n := range merges {
		if n > 1 {
			r.fail("task %s has %d merge commits", id, n)
		}
	}
}

// checkStream checks that the stream o saw every stored event from its
// first one on, once, in sequence.
func (r *results) checkStream(o *observer, stored []lifecycle.Event) {
	ids, seqs, _ := o.seen()
	o.mu.Lock()
	r.reconnects += o.reconnects
	o.mu.Unlock()
	name := "the event stream"
	if o.srv.name != "demo" {
		name = "the event stream of " + o.srv.name
	}
	if len(seqs) == 0 {
		r.fail("%s saw no event", name)
		return
	}
	// Where the store holds no event, the sequence may skip (see
	// target.gapless); the comparison with the store below finds any
	// event missed.
	for i := 1; i < len(seqs); i++ {
		if seqs[i] <= seqs[i-1] {
			r.fail("%s went from sequence %d to %d (a duplicate or out of order)", name, seqs[i-1], seqs[i])
		}
	}
	i := slices.IndexFunc(stored, func(e lifecycle.Event) bool { return e.Sequence == seqs[0] })
	if i < 0 || len(stored)-i != len(seqs) {
		r.fail("%s saw %d events from sequence %d; the store holds %d from there", name, len(seqs), seqs[0], len(stored)-max(i, 0))
	}
	for j, e := range stored[max(i, 0):] {
		if j >= len(ids) || e.ID != ids[j] {
			seen := "nothing"
			if j < len(ids) {
				seen = fmt.Sprintf("%s (sequence %d)", ids[j], seqs[j])
			}
			r.fail("%s's event %d is %s; the store's is %s (sequence %d)", name, j, seen, e.ID, e.Sequence)
			return
		}
	}
}

// countMerges counts the merge commits on main of the repository at dir by
// the task named in their Lifecycle-Task trailer.
func countMerges(dir string, merges map[string]int) error {
	repo, err := git.PlainOpen(dir)
	if err != nil {
		return err
	}
	ref, err := repo.Reference(plumbing.NewBranchReferenceName("main"), true)
	if err != nil {
		return err
	}
	iter, err := repo.Log(&git.LogOptions{From: ref.Hash()})
	if err != nil {
		return err
	}
	return iter.ForEach(func(c *object.Commit) error {
		if c.NumParents() < 2 {
			return nil
		}
		for _, line := range strings.Split(c.Message, "\n") {
			if id, ok := strings.CutPrefix(line, "Lifecycle-Task: "); ok {
				merges[id]++
			}
		}
		return nil
	})
}

// killFigures returns the kill mode's figures: the kills, the restarts,
// and what the targeted kills measured.
func killFigures(srv *server, st *state) []string {
	srv.mu.Lock()
	kills, restarts := slices.Clone(srv.kills), slices.Clone(srv.restarts)
	srv.mu.Unlock()
	reasons := map[string]int{}
	for _, k := range kills {
		reasons[k.reason]++
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return []string{
		fmt.Sprintf("kills: %d (%s)", len(kills), joinCounts(reasons)),
		fmt.Sprintf("start to first answer: %s (first start and %d restarts)", spread(restarts), max(len(restarts)-1, 0)),
		fmt.Sprintf("SIGKILL + immediate restart → queued ship completes in %s", spread(st.shipDone)),
		fmt.Sprintf("SIGKILL + immediate restart → retried submit replays in %s", spread(st.replays)),
	}
}

// print prints the lines head, the run's figures and its broken
// invariants, with the end of the servers' logs when any failed.
func (r *results) print(tg target, st *state, head []string) {
	for _, line := range head {
		fmt.Println(line)
	}
	st.mu.Lock()
	fmt.Printf("workload: %s, %d answers (%s); settling: %s\n", r.workload.Round(time.Millisecond), st.requests, joinStatuses(st.statuses), r.settle.Round(time.Millisecond))
	if st.faults {
		fmt.Printf("answers 503 store_unavailable with Retry-After: %d; other 5xx: %d; requests without an answer: %d; slowest answer: %.2f s (%s)\n",
			len(st.unavailable), len(st.fivexx), len(st.noAnswer), st.slowest.Seconds(), st.slowestReq)
		reasons := joinCounts(st.conflicts)
		if reasons == "" {
			reasons = "none"
		}
		fmt.Printf("409 answers by reason: %s; creates answered 503 that had committed (a retry found the task): %d\n", reasons, st.ambiguous)
		fmt.Printf("retries whose Idempotency-Key an attempt cut off by the store still held (409 request_in_progress) waited %s\n", spread(st.keyWaits))
	}
	st.mu.Unlock()
	fmt.Printf("acknowledged: %d tasks, %d submits, %d ships\n", r.tasks, r.submits, r.ships)
	streams := "the stream"
	if len(tg.servers) > 1 {
		streams = fmt.Sprintf("%d streams, one per replica,", len(tg.servers))
	}
	gaps := ""
	if r.gaps > 0 {
		gaps = fmt.Sprintf(" (%d sequence numbers skipped by transactions that rolled back)", r.gaps)
	}
	fmt.Printf("events: %d stored%s; %s reconnected %d times; webhooks: %d of %d delivered (%d duplicates)\n",
		r.events, gaps, streams, r.reconnects, r.delivered, r.events, r.duplicates)
	for _, line := range r.notes {
		fmt.Println(line)
	}
	for _, v := range r.violations {
		fmt.Println("VIOLATION:", v)
	}
	if len(r.violations) > 0 && tg.queue != nil {
		tg.queue.printSnapshots(6)
	}
	if len(r.violations) > 0 {
		for _, srv := range tg.servers {
			fmt.Printf("--- the last log of %s:\n", srv.name)
			fmt.Println(lastLines(srv.logs(), 40))
		}
	}
}

// spread formats durations as their median and spread: "0.41 s (n=3:
// min 0.30, median 0.41, p90 0.52, max 0.52; 0 over 10 s)".
func spread(ds []time.Duration) string {
	if len(ds) == 0 {
		return "n=0: none in this run"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	sec := func(d time.Duration) string { return fmt.Sprintf("%.2f", d.Seconds()) }
	over := len(s) - sort.Search(len(s), func(i int) bool { return s[i] > 10*time.Second })
	return fmt.Sprintf("%s s (n=%d: min %s, median %s, p90 %s, max %s; %d over 10 s)", sec(s[len(s)/2]), len(s),
		sec(s[0]), sec(s[len(s)/2]), sec(s[len(s)*9/10]), sec(s[len(s)-1]), over)
}

func joinCounts(m map[string]int) string {
	var parts []string
	for k, v := range m {
		parts = append(parts, fmt.Sprintf("%d %s", v, k))
	}
	slices.Sort(parts)
	return strings.Join(parts, "; ")
}

func joinStatuses(m map[int]int) string {
	var keys []int
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d×%d", m[k], k))
	}
	return strings.Join(parts, ", ")
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}
