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
	delivered  int
	duplicates int
	reconnects int
}

func (r *results) fail(format string, args ...any) {
	r.violations = append(r.violations, fmt.Sprintf(format, args...))
}

// check waits for the acknowledged work to settle, stops the server
// cleanly and checks every invariant against what the clients were told,
// the Store, the event stream, the webhook receiver and the git
// repositories.
func check(ctx context.Context, o options, srv *server, st *state, obs *observer, recv *receiver, dir string) *results {
	r := &results{}
	start := time.Now()
	deadline := start.Add(o.deadline)
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

	// The stream and the webhooks catch up: wait until every event the
	// stream saw was delivered and the stream has been quiet a while.
	for time.Now().Before(deadline) {
		ids, _, last := obs.seen()
		if time.Since(last) > 1500*time.Millisecond && recv.has(ids) == len(ids) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	r.settle = time.Since(start)
	if err := srv.stop(); err != nil {
		r.fail("%v", err)
	}

	// The stream saw every stored event after it started, once, in order.
	store, err := sqlite.New(sqlite.Config{Path: filepath.Join(srv.data, "lifecycle.db")})
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
		if stored[i].Sequence != stored[i-1].Sequence+1 {
			r.fail("the outbox has a gap: sequence %d after %d", stored[i].Sequence, stored[i-1].Sequence)
		}
	}
	ids, seqs, _ := obs.seen()
	obs.mu.Lock()
	r.reconnects = obs.reconnects
	obs.mu.Unlock()
	switch {
	case len(seqs) == 0:
		r.fail("the event stream saw no event")
	default:
		for i := 1; i < len(seqs); i++ {
			if seqs[i] != seqs[i-1]+1 {
				r.fail("the event stream went from sequence %d to %d (a gap or a duplicate)", seqs[i-1], seqs[i])
			}
		}
		i := slices.IndexFunc(stored, func(e lifecycle.Event) bool { return e.Sequence == seqs[0] })
		if i < 0 || len(stored)-i != len(seqs) {
			r.fail("the event stream saw %d events from sequence %d; the store holds %d from there", len(seqs), seqs[0], len(stored)-max(i, 0))
		} else {
			for j, e := range stored[i:] {
				if e.ID != ids[j] {
					r.fail("the event stream's event %d is %s; the store's is %s", j, ids[j], e.ID)
					break
				}
			}
		}
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
	merges := map[string]int{}
	for _, project := range []string{"crash0", "crash1"} {
		if err := countMerges(filepath.Join(srv.data, "repos", project), merges); err != nil {
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

	// No 5xx answer.
	st.mu.Lock()
	for _, f := range st.fivexx {
		r.fail("5xx answer: %s", f)
	}
	st.mu.Unlock()

	// The webhook secret is sealed at rest.
	files, _ := filepath.Glob(filepath.Join(srv.data, "lifecycle.db*"))
	for _, f := range files {
		if raw, err := os.ReadFile(f); err == nil && bytes.Contains(raw, []byte(webhookSecret)) {
			r.fail("%s holds the webhook secret in the clear", filepath.Base(f))
		}
	}
	return r
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

// print prints the run's figures and its broken invariants.
func (r *results) print(srv *server, st *state) {
	srv.mu.Lock()
	kills, restarts := slices.Clone(srv.kills), slices.Clone(srv.restarts)
	srv.mu.Unlock()
	reasons := map[string]int{}
	for _, k := range kills {
		reasons[k.reason]++
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	fmt.Printf("kills: %d (%s)\n", len(kills), joinCounts(reasons))
	fmt.Printf("start to first answer: %s (first start and %d restarts)\n", spread(restarts), max(len(restarts)-1, 0))
	fmt.Printf("SIGKILL + immediate restart → queued ship completes in %s\n", spread(st.shipDone))
	fmt.Printf("SIGKILL + immediate restart → retried submit replays in %s\n", spread(st.replays))
	fmt.Printf("workload: %s, %d answers (%s); settling: %s\n", r.workload.Round(time.Millisecond), st.requests, joinStatuses(st.statuses), r.settle.Round(time.Millisecond))
	fmt.Printf("acknowledged: %d tasks, %d submits, %d ships\n", r.tasks, r.submits, r.ships)
	fmt.Printf("events: %d stored; the stream reconnected %d times; webhooks: %d of %d delivered (%d duplicates)\n",
		r.events, r.reconnects, r.delivered, r.events, r.duplicates)
	for _, v := range r.violations {
		fmt.Println("VIOLATION:", v)
	}
	if len(r.violations) > 0 {
		fmt.Println("--- the demo's last log:")
		fmt.Println(lastLines(srv.logs(), 40))
	}
}

// spread formats durations as their median and spread: "0.41 s (n=3:
// min 0.30, median 0.41, p90 0.52, max 0.52; 0 over 10 s)".
func spread(ds []time.Duration) string {
	if len(ds) == 0 {
		return "n=0: no such kill in this run"
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
