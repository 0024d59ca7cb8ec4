//go:build unix

package console_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/memory"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
	"github.com/tasklifecycle/lifecycle/internal/testsupport"
	"github.com/tasklifecycle/lifecycle/store/sqlite"
)

// consoleBenchTasks is how the benchmark's 10,000 tasks are spread over
// the statuses.
var consoleBenchTasks = []struct {
	status lifecycle.Status
	n      int
}{
	{lifecycle.StatusTodo, 3000},
	{lifecycle.StatusInProgress, 2500},
	{lifecycle.StatusInReview, 2000},
	{lifecycle.StatusBlocked, 500},
	{lifecycle.StatusDone, 1500},
	{lifecycle.StatusCancelled, 500},
}

// consoleLoads is how many times the benchmark loads the page.
const consoleLoads = 5

// consoleLiveUpdates is how many changes the benchmark times, each from
// the return of its API call to its card's move on the page.
const consoleLiveUpdates = 20

// BenchmarkConsoleBoard loads the signed-in console on a board of 10,000
// tasks in headless Chromium five times and measures, in the page, the
// first render (from navigation start to the frame after the board, every column's
// count and first cards, was built; target ≤ 1 s), then the live update
// of 20 changes (from the return of the API call that starts a task, in
// Go, to the moment its card is in the in-progress column, Date.now() in
// the page, on the same clock; target p50 and max ≤ 100 ms).
//
//	go test -run '^$' -bench ConsoleBoard -benchtime 1x .
func BenchmarkConsoleBoard(b *testing.B) {
	store, err := sqlite.New(sqlite.Config{Path: filepath.Join(b.TempDir(), "console.db")})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	svc, err := lifecycle.New(lifecycle.Config{
		Store: store, BaseURL: apitest.BaseURL, Logger: slog.New(slog.DiscardHandler),
		Adapters:     []lifecycle.AdapterBinding{{Project: "web", Adapter: memory.New(memory.Config{Owner: "acme", Repo: "web"})}},
		ReviewRouter: lifecycle.ReviewRules{Default: lifecycle.ReviewPlan{Policy: lifecycle.PolicyNeverRequire}},
	})
	if err != nil {
		b.Fatal(err)
	}
	apitest.StartService(b, b.Context(), svc)
	_, admin, err := svc.CreateAPIKey(b.Context(), lifecycle.CreateAPIKeyParams{Name: "bench", Scopes: apitest.AllScopes(), Actor: lifecycle.Actor{ID: "ops", Role: lifecycle.RoleUser}})
	if err != nil {
		b.Fatal(err)
	}
	began := time.Now()
	todo := seedConsoleBench(b, svc)
	b.Logf("seeded 10,000 tasks in %s", time.Since(began).Round(time.Millisecond))

	site := serveConsole(b, svc, store)
	br := startBrowser(b)
	p := br.newPage(br.newContext())
	p.navigate(site.url())
	signInByTyping(p, admin)
	client := &http.Client{Timeout: 10 * time.Second}
	load := func() string {
		raw, _ := os.ReadFile("/proc/loadavg")
		return strings.TrimSpace(string(raw))
	}
	b.Logf("load average before: %s", load())

	var renders, reads, updates []float64 // ms
	var boardBytes float64
	for b.Loop() {
		// First render: fresh loads of the signed-in page.
		for range consoleLoads {
			p.navigate(site.url())
			p.waitFor(`performance.getEntriesByName("console:board-shown").length > 0`, testsupport.BrowserTimeout)
			renders = append(renders, value[float64](p, `performance.getEntriesByName("console:board-shown")[0].startTime`))
			reads = append(reads, value[float64](p, `(() => { const e = performance.getEntriesByType("resource").find((e) => e.name.endsWith("/board")); return e.responseEnd - e.requestStart; })()`))
			counts := value[[]string](p, `[...document.querySelectorAll(".column")].map((c) => c.querySelector(".count").textContent + "/" + c.querySelectorAll(".card").length)`)
			want := make([]string, len(consoleBenchTasks))
			for i, st := range consoleBenchTasks {
				want[i] = fmt.Sprintf("%d/%d", st.n, min(st.n, 100))
			}
			if !slices.Equal(counts, want) {
				b.Fatalf("the board's columns show count/cards %v, want %v", counts, want)
			}
		}
		boardBytes = value[float64](p, `performance.getEntriesByType("resource").find((e) => e.name.endsWith("/board")).encodedBodySize`)
		p.waitFor(`document.getElementById("live").dataset.state === "live"`, testsupport.BrowserTimeout)

		// Live updates: start a task of the todo column, one at a time.
		for range consoleLiveUpdates {
			if len(todo) == 0 {
				b.Fatal("no todo task left to start")
			}
			id := todo[0]
			todo = todo[1:]
			p.must("Runtime.evaluate", map[string]any{"expression": fmt.Sprintf(`(() => {
  window.movedAt = window.movedAt || {};
  const sel = '.column[data-status="in_progress"] .card[data-task-id=%q]';
  const obs = new MutationObserver(() => {
    if (document.querySelector(sel)) { window.movedAt[%q] = Date.now(); obs.disconnect(); }
  });
  obs.observe(document.getElementById("board"), {childList: true, subtree: true});
})()`, id, id)}, nil)
			req, _ := http.NewRequest("POST", "http://"+site.addr+"/api/tasks/"+id+"/start", nil)
			req.Header.Set("Authorization", "Bearer "+admin)
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			resp.Body.Close()
			returned := float64(time.Now().UnixMicro()) / 1000
			if resp.StatusCode != http.StatusOK {
				b.Fatalf("start %s = %d", id, resp.StatusCode)
			}
			p.waitFor(fmt.Sprintf(`window.movedAt[%q] !== undefined`, id), 10*time.Second)
			moved := value[float64](p, fmt.Sprintf(`window.movedAt[%q]`, id))
			updates = append(updates, moved-returned)
			time.Sleep(50 * time.Millisecond)
		}
	}
	b.StopTimer()
	b.Logf("load average after: %s", load())
	slices.Sort(renders)
	slices.Sort(reads)
	slices.Sort(updates)
	b.Logf("first render, ms: %.0f", renders)
	b.Logf("of which GET board (%.1f MB), request to last byte, ms: %.0f", boardBytes/1e6, reads)
	b.Logf("live updates, ms: %.1f", updates)
	p50, worst := updates[len(updates)/2], updates[len(updates)-1]
	b.ReportMetric(renders[len(renders)/2], "first-render-ms")
	b.ReportMetric(p50, "update-p50-ms")
	b.ReportMetric(worst, "update-max-ms")
	if renders[len(renders)-1] > 1000 {
		b.Errorf("first render took %.0f ms, target ≤ 1000 ms", renders[len(renders)-1])
	}
	if worst > 100 {
		b.Errorf("a live update took %.1f ms, target p50 and max ≤ 100 ms", worst)
	}
	p.checkProblems(unauthorizedAt(site)) // the sign-in probe before signing in
}

// seedConsoleBench creates the benchmark's 10,000 tasks through the Go API
// from four goroutines and returns the IDs of the todo ones.
func seedConsoleBench(b *testing.B, svc *lifecycle.Service) []string {
	b.Helper()
	ctx := b.Context()
	type job struct {
		i      int
		status lifecycle.Status
	}
	jobs := make(chan job)
	var (
		mu   sync.Mutex
		todo []string
		ops  []string
		errs []error
	)
	agent := lifecycle.Actor{ID: "bench-agent", Role: lifecycle.RoleAgent}
	project := "web"
	work := func(j job) error {
		p := lifecycle.CreateTaskParams{
			Identifier: fmt.Sprintf("BIG-%d", j.i), Title: fmt.Sprintf("Task %d of the big board: tidy the module %d", j.i, j.i%97),
			Links:           lifecycle.TaskLinks{Issue: fmt.Sprintf("https://issues.example.com/BIG-%d", j.i)},
			Context:         lifecycle.TaskContext{Project: &project},
			AssigneeAgentID: fmt.Sprintf("agent-%d", j.i%12),
		}
		t, err := svc.CreateTask(ctx, p)
		if err != nil {
			return err
		}
		switch j.status {
		case lifecycle.StatusTodo:
			mu.Lock()
			todo = append(todo, t.ID)
			mu.Unlock()
			return nil
		case lifecycle.StatusCancelled:
			_, err := svc.CancelTask(ctx, t.ID, lifecycle.CancelTaskParams{Reason: "not needed"})
			return err
		}
		if _, err := svc.StartTask(ctx, t.ID, lifecycle.StartTaskParams{Actor: agent}); err != nil {
			return err
		}
		switch j.status {
		case lifecycle.StatusBlocked:
			_, err := svc.RecordBlocker(ctx, t.ID, lifecycle.RecordBlockerParams{Reason: "missing_credentials", ActionRequired: "Add the secret.", Actor: agent})
			return err
		case lifecycle.StatusInProgress:
			return nil
		}
		sub, err := svc.Submit(ctx, t.ID, lifecycle.SubmitParams{Summary: "Done.", IdempotencyKey: "bench-submit-" + t.ID, Actor: agent})
		if err != nil || j.status == lifecycle.StatusInReview {
			return err
		}
		if _, _, err := svc.ReportChecks(ctx, t.ID, lifecycle.ReportChecksParams{HeadSHA: *sub.HeadSHA,
			Checks: []lifecycle.CICheck{{Name: "build", Status: lifecycle.CheckPassed}}}); err != nil {
			return err
		}
		op, err := svc.Ship(ctx, t.ID, lifecycle.ShipParams{Mode: lifecycle.ShipMergeOnly, TargetEnvironment: lifecycle.EnvironmentStaging,
			ExpectedHeadSHA: *sub.HeadSHA, IdempotencyKey: "bench-ship-" + t.ID})
		if err != nil {
			return err
		}
		mu.Lock()
		ops = append(ops, op.OperationID)
		mu.Unlock()
		return nil
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for j := range jobs {
				if err := work(j); err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("task %d (%s): %w", j.i, j.status, err))
					mu.Unlock()
				}
			}
		})
	}
	i := 0
	for _, st := range consoleBenchTasks {
		for range st.n {
			jobs <- job{i, st.status}
			i++
		}
	}
	close(jobs)
	wg.Wait()
	if len(errs) > 0 {
		b.Fatalf("seeding failed %d times, first: %v", len(errs), errs[0])
	}
	deadline := time.Now().Add(2 * time.Minute)
	for _, id := range ops {
		for {
			op, err := svc.ShipOperation(ctx, id)
			if err != nil {
				b.Fatal(err)
			}
			if op.Status == lifecycle.ShipSucceeded {
				break
			}
			if op.Status == lifecycle.ShipFailed || time.Now().After(deadline) {
				b.Fatalf("ship operation %s is %s", id, op.Status)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	// The todo tasks are started newest first, as the board lists them.
	slices.Reverse(todo)
	return todo
}
