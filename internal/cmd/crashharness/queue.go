package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/tasklifecycle/lifecycle"
)

// The merge queue mode (-merge-queue): the demo ships through the
// lifecycle's own merge queue, whose candidate check takes a while and
// records every candidate it passed in a log, synced before the pass is
// reported; kills come also while a candidate is under test. After the
// run every change must be on main's first-parent history exactly once,
// every accepted ship must have landed, and every commit main moved to
// must be in the tested log.

// queueShipsInFlight bounds the ships each worker has in the merge queue
// mode (state.shipsInFlight): with 4 workers, 12 at most, within the
// demo's 16 ship operations at once (lifecycle.Config.ShipConcurrency),
// each of which holds its place while its change waits in the queue.
const queueShipsInFlight = 3

// queueRun is what the merge queue mode adds to a kill run.
type queueRun struct {
	check     time.Duration // how long the demo's candidate check takes
	poll      time.Duration // the demo's -merge-queue-poll
	testedLog string        // the demo's -queue-tested-log

	mu        sync.Mutex
	snapshots []snapshot                 // GET /merge-queues around the kills
	testing   []time.Duration            // kills while a candidate was under test: kill → each of its ships succeeded
	final     string                     // GET /merge-queues once the ships settled
	landed    map[string]string          // task ID → the commit its ship landed in
	latency   map[string][]time.Duration // project → each ship's queuedAt to finishedAt
}

// snapshot is the answer of GET /merge-queues at a moment of the run.
type snapshot struct {
	at    time.Time
	label string
	json  string
}

// newQueueRun returns the merge queue mode of a run in dir.
func newQueueRun(dir string, check time.Duration) *queueRun {
	return &queueRun{check: check, poll: 250 * time.Millisecond, testedLog: filepath.Join(dir, "tested.log"),
		landed: map[string]string{}, latency: map[string][]time.Duration{}}
}

// demoArgs returns the demo's flags that turn the queue on.
func (q *queueRun) demoArgs() []string {
	return []string{"-merge-queue", "-merge-queue-poll", q.poll.String(),
		"-queue-check-duration", q.check.String(), "-queue-tested-log", q.testedLog}
}

// note keeps a snapshot of the queues.
func (q *queueRun) note(label string, body map[string]any) {
	raw, _ := json.Marshal(body)
	q.mu.Lock()
	defer q.mu.Unlock()
	q.snapshots = append(q.snapshots, snapshot{at: time.Now(), label: label, json: string(raw)})
}

// queueCandidate is a candidate as GET /merge-queues shows it.
type queueCandidate struct {
	ID      int      `json:"id"`
	State   string   `json:"state"`
	SHA     string   `json:"sha"`
	TaskIDs []string `json:"taskIds"`
	Checks  []struct {
		Status string `json:"status"`
	} `json:"checks"`
}

// checkRunning reports whether the candidate's check was seen running.
func (c queueCandidate) checkRunning() bool {
	for _, ch := range c.Checks {
		if ch.Status == "running" {
			return true
		}
	}
	return false
}

// testingCandidate returns a candidate under test in an answer of GET
// /merge-queues, and its queue's base.
func testingCandidate(body map[string]any) (queueCandidate, bool) {
	raw, _ := json.Marshal(body)
	var v struct {
		Data []struct {
			Candidates []queueCandidate `json:"candidates"`
		} `json:"data"`
	}
	if json.Unmarshal(raw, &v) != nil {
		return queueCandidate{}, false
	}
	for _, q := range v.Data {
		for _, c := range q.Candidates {
			if c.State == "testing" && c.SHA != "" {
				return c, true
			}
		}
	}
	return queueCandidate{}, false
}

// killWhileTesting polls GET /merge-queues until a candidate is under
// test, waits a random part of the check's duration (the candidate still
// under test), and kills the server; without one in 20 s it kills anyway.
// It returns the tasks of the candidate it killed under.
func (q *queueRun) killWhileTesting(st *state, rnd *rand.Rand) []string {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	delay := time.Duration(rnd.Int64N(int64(q.check) + 1))
	seen := map[string]time.Time{} // candidate SHA → first seen under test
	for ctx.Err() == nil {
		a, err := st.call(ctx, "GET", "/merge-queues", nil, "")
		if err != nil {
			break
		}
		if c, ok := testingCandidate(a.body); ok {
			first, ok := seen[c.SHA]
			if !ok {
				first = time.Now()
				seen[c.SHA] = first
			}
			if time.Since(first) >= delay {
				reason := "while a candidate was under test, its check not yet seen running"
				if c.checkRunning() {
					reason = "while a candidate was under test, its check running"
				}
				q.note(fmt.Sprintf("before the kill while candidate %d (%s) was under test", c.ID, c.SHA), a.body)
				st.srv.kill(reason)
				return c.TaskIDs
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	st.srv.kill("random (no candidate under test in 20 s)")
	return nil
}

// followShips measures, for each task of a candidate killed under test,
// the time from the kill to its ship's success.
func (q *queueRun) followShips(st *state, taskIDs []string, killed time.Time) {
	st.mu.Lock()
	var ops []string
	for _, t := range st.tasks {
		if slices.Contains(taskIDs, t.id) && t.shipOp != "" {
			ops = append(ops, t.shipOp)
		}
	}
	st.mu.Unlock()
	for _, op := range ops {
		st.waiters.Add(1)
		go func() {
			defer st.waiters.Done()
			if d, ok := st.waitShip(op, killed, 60*time.Second); ok {
				q.mu.Lock()
				q.testing = append(q.testing, d)
				q.mu.Unlock()
			}
		}()
	}
}

// snapshotNow keeps a snapshot of the queues as they are now.
func (q *queueRun) snapshotNow(st *state, label string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if a, err := st.call(ctx, "GET", "/merge-queues", nil, ""); err == nil {
		q.note(label, a.body)
	}
}

// readLanded reads, while the server runs and the ships have settled,
// the queues and the commit each shipped task's operation landed in.
func (q *queueRun) readLanded(ctx context.Context, r *results, st *state, tasks []*taskState) {
	if a, err := st.call(ctx, "GET", "/merge-queues", nil, ""); err == nil {
		raw, _ := json.Marshal(a.body)
		q.final = string(raw)
		var v struct {
			Data []struct {
				Base    string `json:"base"`
				Entries []any  `json:"entries"`
			} `json:"data"`
		}
		json.Unmarshal(raw, &v)
		for _, queue := range v.Data {
			if len(queue.Entries) > 0 {
				r.fail("the merge queue into %s still holds %d entries once the ships settled", queue.Base, len(queue.Entries))
			}
		}
	}
	for _, t := range tasks {
		if t.shipOp == "" {
			continue
		}
		a, err := st.call(ctx, "GET", "/ship-operations/"+t.shipOp, nil, "")
		if err != nil || a.status != 200 {
			continue
		}
		if sha, _ := a.data()["mergeCommitSha"].(string); sha != "" && a.data()["status"] == "succeeded" {
			q.landed[t.id] = sha
		}
		queued, err1 := time.Parse(time.RFC3339Nano, fmt.Sprint(a.data()["queuedAt"]))
		finished, err2 := time.Parse(time.RFC3339Nano, fmt.Sprint(a.data()["finishedAt"]))
		if err1 == nil && err2 == nil {
			q.latency[t.project] = append(q.latency[t.project], finished.Sub(queued))
		}
	}
}

// fpCommit is a commit of main's first-parent history.
type fpCommit struct {
	sha, title string
	pull       string // its Lifecycle-Queue-Pull trailer: a queue candidate's merge
	task       string // its Lifecycle-Task trailer: a merge outside the queue
	second     string // its second parent, the change it merged
}

// firstParents returns main's first-parent history in the repository at
// dir, newest first.
func firstParents(dir string) ([]fpCommit, error) {
	repo, err := git.PlainOpen(dir)
	if err != nil {
		return nil, err
	}
	ref, err := repo.Reference(plumbing.NewBranchReferenceName("main"), true)
	if err != nil {
		return nil, err
	}
	var out []fpCommit
	for h := ref.Hash(); ; {
		c, err := repo.CommitObject(h)
		if err != nil {
			return nil, fmt.Errorf("commit %s: %w", h, err)
		}
		fc := fpCommit{sha: c.Hash.String()}
		fc.title, _, _ = strings.Cut(c.Message, "\n")
		for _, line := range strings.Split(c.Message, "\n") {
			if v, ok := strings.CutPrefix(line, "Lifecycle-Queue-Pull: "); ok {
				fc.pull = v
			}
			if v, ok := strings.CutPrefix(line, "Lifecycle-Task: "); ok {
				fc.task = v
			}
		}
		if c.NumParents() > 1 {
			fc.second = c.ParentHashes[1].String()
		}
		out = append(out, fc)
		if c.NumParents() == 0 {
			return out, nil
		}
		h = c.ParentHashes[0]
	}
}

// readTested reads the tested log: the candidates the check passed, as
// "repo sha".
func readTested(path string) (map[string]bool, int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	tested := map[string]bool{}
	lines := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 3 {
			return nil, 0, fmt.Errorf("line %d of the tested log is %q, not REPO BASE SHA", lines+1, sc.Text())
		}
		tested[fields[0]+" "+fields[2]] = true
		lines++
	}
	return tested, lines, sc.Err()
}

// landedEvents returns the commits the stored task.merge_queue events say
// entries landed in, as "repo sha".
func landedEvents(stored []lifecycle.Event) map[string]bool {
	out := map[string]bool{}
	for _, e := range stored {
		if e.Type != lifecycle.EventTaskMergeQueue {
			continue
		}
		var d lifecycle.TaskMergeQueueData
		if json.Unmarshal(e.Data, &d) != nil || d.Change != "landed" || d.Queue.LandedSHA == "" {
			continue
		}
		_, repo, _ := strings.Cut(d.Queue.Repository, "/")
		out[repo+" "+d.Queue.LandedSHA] = true
	}
	return out
}

// verify checks the merge queue's invariants against the git
// repositories, the tested log and the stored events, and returns the
// figures.
func (q *queueRun) verify(r *results, tg target, tasks []*taskState, shipped map[string]bool, stored []lifecycle.Event) []string {
	tested, lines, err := readTested(q.testedLog)
	if err != nil {
		r.fail("read the tested log: %v", err)
		return nil
	}
	events := landedEvents(stored)
	positions := map[string]bool{} // "repo sha": every commit main moved to through the queue, by git
	merges, landings := 0, 0
	for _, project := range []string{"crash0", "crash1"} {
		fp, err := firstParents(filepath.Join(tg.data, "repos", project))
		if err != nil {
			r.fail("read the repository of %s: %v", project, err)
			continue
		}
		heads, pulls := map[string]int{}, map[string]int{}
		index := map[string]int{} // sha → place in fp
		for i, c := range fp {
			index[c.sha] = i
			switch {
			case c.task != "":
				r.fail("%s: main holds %s, a merge of task %s outside the merge queue", project, c.sha, c.task)
			case c.pull == "" && c.second != "":
				r.fail("%s: main holds %s, a merge of %s that is no queue candidate's", project, c.sha, c.second)
			case c.pull == "":
				continue // the repository's first commit
			}
			merges++
			heads[c.second]++
			pulls[c.pull]++
			// main moved to the last merge commit of each candidate: the
			// newest of a run of commits with the candidate's title.
			if i == 0 || fp[i-1].title != c.title || fp[i-1].pull == "" {
				positions[project+" "+c.sha] = true
				landings++
			}
		}
		for pull, n := range pulls {
			if n > 1 {
				r.fail("%s: pull request #%s landed %d times on main (Lifecycle-Queue-Pull)", project, pull, n)
			}
		}
		for _, t := range tasks {
			if t.project != project || t.headSHA == "" {
				continue
			}
			n := heads[t.headSHA]
			switch {
			case n > 1:
				r.fail("task %s: its change %s landed %d times on main", t.identifier, t.headSHA, n)
			case shipped[t.id] && n == 0:
				r.fail("task %s: shipped, but its change %s is not on main's first-parent history", t.identifier, t.headSHA)
			}
			landed, ok := q.landed[t.id]
			if !shipped[t.id] || n != 1 {
				continue
			}
			if !ok {
				r.fail("task %s: its ship succeeded without a mergeCommitSha", t.identifier)
				continue
			}
			// The operation's commit is the candidate main moved to that
			// holds the task's merge.
			mi := slices.IndexFunc(fp, func(c fpCommit) bool { return c.second == t.headSHA })
			li, on := index[landed]
			if !on || !positions[project+" "+landed] || li > mi || fp[li].title != fp[mi].title {
				r.fail("task %s: its ship landed in %s, which is not the candidate main moved to with its merge %s", t.identifier, landed, fp[mi].sha)
			}
		}
	}
	// No candidate landed untested: every commit main moved to, by git
	// and by the events, is in the tested log; and the two agree.
	for p := range positions {
		if !tested[p] {
			r.fail("main of %s moved to %s, which the candidate check never passed", strings.Fields(p)[0], strings.Fields(p)[1])
		}
		if !events[p] {
			r.fail("main of %s moved to %s, and no task.merge_queue event says an entry landed there", strings.Fields(p)[0], strings.Fields(p)[1])
		}
	}
	for p := range events {
		if !tested[p] {
			r.fail("an event says entries landed in %s of %s, which the candidate check never passed", strings.Fields(p)[1], strings.Fields(p)[0])
		}
		if !positions[p] {
			r.fail("an event says entries landed in %s of %s, which is not a commit main moved to", strings.Fields(p)[1], strings.Fields(p)[0])
		}
	}
	if len(tested) == 0 {
		r.fail("the tested log is empty: no candidate was tested")
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	figures := []string{
		fmt.Sprintf("merge queue: %d changes landed on main in %d landings (%.1f a landing); %d candidates passed their %s check (%d passes logged, a candidate retested after a kill counts again)",
			merges, landings, float64(merges)/float64(max(landings, 1)), len(tested), q.check, lines),
		fmt.Sprintf("SIGKILL while a candidate is under test + immediate restart → its ships complete in %s", spread(q.testing)),
	}
	for _, project := range []string{"crash0", "crash1"} {
		figures = append(figures, fmt.Sprintf("ship through the queue into %s/main, queued to finished: %s", project, spread(q.latency[project])))
	}
	if q.final != "" {
		figures = append(figures, "merge queues at the end: "+statsOf(q.final))
	}
	return figures
}

// statsOf returns the stats of the queues in an answer of GET
// /merge-queues, by base.
func statsOf(raw string) string {
	var v struct {
		Data []struct {
			Repository string          `json:"repository"`
			Base       string          `json:"base"`
			Stats      json.RawMessage `json:"stats"`
		} `json:"data"`
	}
	if json.Unmarshal([]byte(raw), &v) != nil {
		return raw
	}
	var parts []string
	for _, q := range v.Data {
		parts = append(parts, fmt.Sprintf("%s %s %s", q.Repository, q.Base, q.Stats))
	}
	return strings.Join(parts, "; ")
}

// printSnapshots prints the queues as they were around the kills, the
// last n of them, and at the end.
func (q *queueRun) printSnapshots(n int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	fmt.Println("--- the merge queues around the last kills:")
	for _, s := range q.snapshots[max(len(q.snapshots)-n, 0):] {
		fmt.Printf("%s %s:\n%s\n", s.at.Format("15:04:05.000"), s.label, s.json)
	}
	fmt.Printf("--- the merge queues at the end:\n%s\n", q.final)
}
