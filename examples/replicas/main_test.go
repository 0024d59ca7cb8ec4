package main

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/jackc/pgx/v5"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/internal/testenv"
	"github.com/tasklifecycle/lifecycle/store/postgres/pgtest"
)

// The test re-executes its own binary as each replica: TestMain runs main
// in the children. It needs a PostgreSQL server (LIFECYCLE_TEST_POSTGRES,
// default the local one with trust authentication), where it creates a
// database of its own and drops it at the end.
var (
	testDB pgtest.Database // the test database; DSN "" when no server answered
	runs   atomic.Int64    // runs of TestKillReplica, for schema names
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(testenv.Report(pgtest.Main(m, "examples/replicas", &testDB)))
}

// TestSmoke runs the example as `replicas -smoke` does.
func TestSmoke(t *testing.T) {
	if testDB.DSN == "" {
		testenv.Require(t, testenv.PostgreSQL, testDB.SkipReason)
	}
	out, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	err = launch(t.Context(), launchOptions{n: 2, smoke: true, replica: replicaOptions{dsn: testDB.DSN}}, out)
	b, _ := os.ReadFile(out.Name())
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if !strings.Contains(string(b), "created on b") {
		t.Errorf("the stream of a did not show the task created on b:\n%s", b)
	}
}

// hookReceiver is an https webhook receiver that records when each event
// was delivered.
type hookReceiver struct {
	mu    sync.Mutex
	times map[string][]time.Time // event ID -> deliveries
}

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	h.mu.Lock()
	id := r.Header.Get(lifecycle.HeaderEventID)
	h.times[id] = append(h.times[id], time.Now())
	h.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (h *hookReceiver) deliveries() map[string][]time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string][]time.Time, len(h.times))
	for k, v := range h.times {
		out[k] = slices.Clone(v)
	}
	return out
}

// TestKillReplica runs three replicas as processes on one database under a
// mixed workload (creates, starts, submits, checks, reviews, ships with a
// deployment, webhook deliveries to an https receiver on loopback) and
// kills one of them with SIGKILL while it holds running ship operations.
// Nothing is lost: the others finish its operations once their lease ends;
// every ship merges exactly once (merge commits counted in the shared git
// repository) and deploys once (the shared deployment log), except that an
// operation the dead replica held may deploy again; the stream of replica
// a has every event committed on any replica, in sequence order, with no
// gap and no duplicate; the receiver gets every event, twice only when one
// delivery came before the kill and one after.
func TestKillReplica(t *testing.T) {
	if testDB.DSN == "" {
		testenv.Require(t, testenv.PostgreSQL, testDB.SkipReason)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	data := t.TempDir()
	rec := &hookReceiver{times: make(map[string][]time.Time)}
	hook := httptest.NewTLSServer(rec)
	defer hook.Close()
	caFile := filepath.Join(data, "receiver.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: hook.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	schema := fmt.Sprintf("kill_%d", runs.Add(1)) // one per run, under -count
	common := replicaOptions{dsn: testDB.DSN, schema: schema, data: data, adminKey: newAdminKey(), webhookCA: caFile,
		shipLease: 3 * time.Second, webhookLease: 3 * time.Second, deployTime: 300 * time.Millisecond}

	// Start a, b and c together: they migrate once, under the lock.
	procs := make([]*replicaProc, 3)
	for i := range procs {
		r := common
		r.name, r.addr = string(rune('a'+i)), freeAddr()
		p, err := startReplica(r)
		if err != nil {
			t.Fatal(err)
		}
		procs[i] = p
		t.Cleanup(func() { p.stop(5 * time.Second) })
	}
	for _, p := range procs {
		if err := p.waitReady(30 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
	db, err := pgx.Connect(ctx, testDB.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	if _, err := db.Exec(ctx, "SET search_path = "+schema); err != nil {
		t.Fatal(err)
	}

	c := &client{key: common.adminKey}
	var start int64
	if err := db.QueryRow(ctx, "SELECT coalesce(max(seq), 0) FROM events").Scan(&start); err != nil {
		t.Fatal(err)
	}
	stream, err := c.stream(ctx, procs[0].base)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	hookTypes := []string{"task.updated", "task.reviewed", "task.shipped"}
	if err := c.do(ctx, "POST", procs[1].base+"/event-subscriptions", "subscribe-receiver", map[string]any{"url": hook.URL + "/hook",
		"eventTypes": hookTypes, "secret": "0123456789abcdef0123456789abcdef"}, nil); err != nil {
		t.Fatal(err)
	}

	// The workload: each task goes through its lifecycle with each step on
	// another replica. A step sent to the killed replica may fail; its
	// task is left there.
	const tasks, workers = 36, 6
	var (
		dead      atomic.Bool // c is dead
		shipped   atomic.Int64
		abandoned atomic.Int64
	)
	replica := func(task, step int) *replicaProc {
		i := (task + step) % 3
		if i == 2 && dead.Load() {
			i = step % 2
		}
		return procs[i]
	}
	lifecycleOf := func(i int) error {
		ident := fmt.Sprintf("KILL-%d", i)
		id, err := c.createTask(ctx, replica(i, 0).base, ident, "Fix "+ident)
		if err != nil {
			return err
		}
		path := "/tasks/" + id
		if err := c.do(ctx, "POST", replica(i, 1).base+path+"/start", "", map[string]any{}, nil); err != nil {
			return err
		}
		var sub struct {
			HeadSHA string `json:"headSha"`
		}
		if err := c.do(ctx, "POST", replica(i, 2).base+path+"/submit", "submit-"+ident, map[string]any{"summary": "Fixed " + ident}, &sub); err != nil {
			return err
		}
		if err := c.do(ctx, "POST", replica(i, 3).base+path+"/checks", "", map[string]any{"headSha": sub.HeadSHA,
			"checks": []map[string]any{{"name": "build", "status": "passed"}}}, nil); err != nil {
			return err
		}
		if err := c.do(ctx, "POST", replica(i, 4).base+path+"/reviews", "", map[string]any{"outcome": "approved"}, nil); err != nil {
			return err
		}
		if err := c.do(ctx, "POST", replica(i, 5).base+path+"/ship", "ship-"+ident, map[string]any{"mode": "merge_and_deploy",
			"targetEnvironment": "staging", "expectedHeadSha": sub.HeadSHA}, nil); err != nil {
			return err
		}
		shipped.Add(1)
		return nil
	}
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := lifecycleOf(i); err != nil {
					var se *statusError
					if errors.As(err, &se) || !dead.Load() {
						t.Errorf("task %d: %v", i, err)
					}
					abandoned.Add(1)
				}
			}
		}()
	}

	// The killer: once a third of the tasks have shipped, and c holds a
	// running ship operation, kill c.
	var (
		killedAt time.Time
		heldByC  []string // the unfinished operations c held when it died
	)
	killed := make(chan struct{})
	go func() {
		defer close(killed)
		// Kill c once a third has shipped and c runs an operation, or
		// after 30 s whatever it runs.
		testenv.WaitUntil(30*time.Second, func() bool {
			var running int
			db.QueryRow(ctx, "SELECT count(*) FROM ship_operations WHERE lease_owner = 'c' AND status = 'running'").Scan(&running)
			return ctx.Err() != nil || shipped.Load() >= tasks/3 && running > 0
		})
		dead.Store(true)
		procs[2].kill()
		killedAt = time.Now()
		rows, _ := db.Query(ctx, "SELECT id FROM ship_operations WHERE lease_owner = 'c' AND status NOT IN ('succeeded', 'failed')")
		heldByC, _ = pgx.CollectRows(rows, pgx.RowTo[string])
	}()
	for i := range tasks {
		next <- i
	}
	close(next)
	wg.Wait()
	<-killed
	if t.Failed() {
		return
	}
	t.Logf("c killed with %d running or queued ship operations; %d tasks shipped, %d left on c", len(heldByC), shipped.Load(), abandoned.Load())
	if len(heldByC) == 0 {
		t.Fatal("c held no ship operation when it was killed: the test proves nothing")
	}

	// Every ship operation succeeds, whoever accepted it, c's included.
	waitFor(t, ctx, 30*time.Second, "every ship operation succeeded", func() bool {
		var open int
		db.QueryRow(ctx, "SELECT count(*) FROM ship_operations WHERE status <> 'succeeded'").Scan(&open)
		return open == 0
	})
	ops := map[string]string{} // operation -> expected head
	owners := map[string]string{}
	rows, err := db.Query(ctx, "SELECT id, expected_head_sha, lease_owner FROM ship_operations")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id, head, owner string
		if err := rows.Scan(&id, &head, &owner); err != nil {
			t.Fatal(err)
		}
		ops[id], owners[id] = head, owner
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	if len(ops) < int(shipped.Load()) {
		t.Errorf("%d ship operations stored, %d accepted", len(ops), shipped.Load())
	}
	for _, id := range heldByC {
		if owners[id] == "c" {
			t.Errorf("operation %s, held by c when it died, was finished by c", id)
		}
	}

	// Each merged exactly once: one merge commit on main per operation,
	// whose second parent is the operation's expected head. (A merge c
	// made before dying and before recording it is recognised by the
	// adapter, even under later merges.)
	merges := mergeCommits(t, filepath.Join(data, "repos", "web"))
	heads := map[string]bool{}
	for id, head := range ops {
		heads[head] = true
		if n := merges[head]; n != 1 {
			t.Errorf("head %s of %s merged %d times, want once", head, id, n)
		}
	}
	for head, n := range merges {
		if !heads[head] {
			t.Errorf("head %s merged %d times without a ship operation", head, n)
		}
	}

	// Each deployed once, except that an operation c held may deploy
	// again when c was killed after deploying and before recording it.
	deploys := map[string]int{}
	log, err := os.ReadFile(filepath.Join(data, "deployments.log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(log)), "\n") {
		deploys[strings.Fields(line)[0]]++
	}
	for id := range ops {
		if n := deploys[id]; n < 1 || (n > 1 && !slices.Contains(heldByC, id)) {
			t.Errorf("operation %s deployed %d times", id, n)
		}
	}

	// The stream of a has every event committed, in sequence order.
	var want []string
	rows, err = db.Query(ctx, "SELECT id FROM events WHERE seq > $1 ORDER BY seq", start)
	if err != nil {
		t.Fatal(err)
	}
	if want, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		t.Fatal(err)
	}
	var got []string
	timeout := time.After(20 * time.Second)
	for len(got) < len(want) {
		select {
		case f, ok := <-stream.frames:
			if !ok {
				t.Fatalf("the stream of a ended after %d of %d events", len(got), len(want))
			}
			got = append(got, f.id)
		case <-timeout:
			t.Fatalf("the stream of a had %d of %d events after 20s", len(got), len(want))
		}
	}
	if !slices.Equal(want, got) {
		t.Errorf("the stream of a differs from the events committed, in sequence order:\nwant %v\n got %v", want, got)
	}

	// The receiver has every event of the subscribed types; an event
	// delivered twice was delivered once before the kill and once after.
	rows, err = db.Query(ctx, "SELECT id FROM events WHERE seq > $1 AND type = ANY($2) ORDER BY seq", start, hookTypes)
	if err != nil {
		t.Fatal(err)
	}
	hooked, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, 20*time.Second, "every event delivered", func() bool {
		d := rec.deliveries()
		for _, id := range hooked {
			if len(d[id]) == 0 {
				return false
			}
		}
		return true
	})
	d := rec.deliveries()
	var again int
	for _, id := range hooked {
		if ts := d[id]; len(ts) > 1 {
			again++
			before := slices.IndexFunc(ts, func(at time.Time) bool { return at.Before(killedAt) })
			after := slices.IndexFunc(ts, func(at time.Time) bool { return !at.Before(killedAt) })
			if len(ts) > 2 || before < 0 || after < 0 {
				t.Errorf("event %s delivered %d times, not once before the kill and once after: %v", id, len(ts), ts)
			}
		}
	}
	if len(d) != len(hooked) {
		t.Errorf("%d events delivered, want %d", len(d), len(hooked))
	}
	t.Logf("%d ship operations merged and deployed, %d of them c's taken over; stream of a: %d events in order; %d deliveries, %d repeated across the kill",
		len(ops), len(heldByC), len(got), len(hooked), again)
}

// mergeCommits counts the merge commits on main of the repository at dir
// by their second parent, the head merged.
func mergeCommits(t *testing.T, dir string) map[string]int {
	t.Helper()
	repo, err := git.PlainOpen(dir)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := repo.Reference(plumbing.NewBranchReferenceName("main"), true)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	commit, err := repo.CommitObject(ref.Hash())
	for err == nil {
		if commit.NumParents() == 2 {
			out[commit.ParentHashes[1].String()]++
		}
		if commit.NumParents() == 0 {
			break
		}
		var parent *object.Commit
		parent, err = commit.Parent(0) // first parents: the history of main
		commit = parent
	}
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// waitFor polls cond until it holds, failing t after timeout.
func waitFor(t *testing.T, ctx context.Context, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	testenv.WaitFor(t, timeout, what, func() bool {
		if ctx.Err() != nil {
			t.Fatalf("%s: %v", what, ctx.Err())
		}
		return cond()
	})
}
