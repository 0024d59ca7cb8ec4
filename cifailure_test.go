package lifecycle_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/memory"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
	"github.com/tasklifecycle/lifecycle/internal/testenv"
)

// ciFailedEvents returns the data of the task.ci_failed events of a task.
func ciFailedEvents(e *env, taskID string) []lifecycle.TaskCIFailedData {
	e.T.Helper()
	evs, err := e.Store.Events(e.T.Context(), lifecycle.EventFilter{TaskID: taskID, Types: []lifecycle.EventType{lifecycle.EventTaskCIFailed}, Limit: 100})
	if err != nil {
		e.T.Fatal(err)
	}
	out := []lifecycle.TaskCIFailedData{}
	for _, ev := range evs {
		var d lifecycle.TaskCIFailedData
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			e.T.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

// ciStatus reads a task's CI status through the API as e's admin.
func (e *env) ciStatus(id string) lifecycle.CIStatus {
	e.T.Helper()
	return apitest.CallData[lifecycle.CIStatus](e.Env, apitest.Request{Method: "GET", Path: "/tasks/" + id + "/ci-status", Key: e.Admin}, http.StatusOK)
}

// checkNamed returns the check of st named name, failing the test when
// there is none.
func checkNamed(t *testing.T, st lifecycle.CIStatus, source lifecycle.CheckSource, name string) lifecycle.Check {
	t.Helper()
	for _, c := range st.Checks {
		if c.Name == name && c.Source == source {
			return c
		}
	}
	t.Fatalf("no %s check %s in %+v", source, name, st.Checks)
	return lifecycle.Check{}
}

// A provider check that fails has its details fetched once, in the
// background, and served by the CI status; the task's CI failing is
// announced once per head commit.
func TestCIFailureFetchedOnce(t *testing.T) {
	t.Parallel()
	e, a := newSubmitEnv(t)
	e.Start()
	id := e.startedTask("ENG-1")
	sha := headOf(t, e.submitOK(id, "ci-fail-1", apitest.SubmitBody()))
	failure := lifecycle.CIFailure{
		Title: "1 test failed", Summary: "TestParse: expected 2, got 3", Excerpt: "--- FAIL: TestParse (0.00s)\n",
		LogURL:      ptr("https://ci.example.com/b/log"),
		Annotations: []lifecycle.CIAnnotation{{Path: "parse_test.go", StartLine: 12, EndLine: 12, Level: lifecycle.AnnotationFailure, Message: "expected 2, got 3"}},
	}
	a.web.SetFailure(sha, "build", failure)
	a.web.SetChecks(sha, lifecycle.CIReport{Checks: []lifecycle.CICheck{
		{Name: "build", Status: lifecycle.CheckFailed, URL: "https://ci.example.com/b"},
		{Name: "lint", Status: lifecycle.CheckPassed},
	}})
	e.reconcile(id)

	testenv.WaitFor(t, 5*time.Second, "the failure's details", func() bool {
		return checkNamed(t, e.ciStatus(id), lifecycle.SourceProvider, "build").Failure != nil
	})
	st := e.ciStatus(id)
	got := checkNamed(t, st, lifecycle.SourceProvider, "build").Failure
	want := failure
	want.FetchedAt = lifecycle.NewTimestamp(e.Clock.Now())
	if diff := cmp.Diff(&want, got); diff != "" {
		t.Errorf("failure served (-want +got):\n%s", diff)
	}
	if f := checkNamed(t, st, lifecycle.SourceProvider, "lint").Failure; f != nil {
		t.Errorf("a passed check has failure %+v, want nil", f)
	}
	// Read again and again, and the host read again: not fetched again.
	e.ciStatus(id)
	e.reconcile(id)
	e.Svc.FetchCIFailuresForTest(t.Context())
	if n := a.web.Calls(memory.OpCIFailure); n != 1 {
		t.Errorf("the host was asked %d times for the failure, want once", n)
	}
	// A second check failing on the same head: fetched too, and the
	// failure is not announced again.
	a.web.SetCheck(sha, lifecycle.CICheck{Name: "lint", Status: lifecycle.CheckFailed})
	e.reconcile(id)
	e.Svc.FetchCIFailuresForTest(t.Context())
	// The Service's own fetcher, woken by the reconcile, may have claimed
	// lint's failure first and still be asking: wait for it.
	testenv.WaitFor(t, 5*time.Second, "lint's failure asked for", func() bool { return a.web.Calls(memory.OpCIFailure) >= 2 })
	if n := a.web.Calls(memory.OpCIFailure); n != 2 {
		t.Errorf("the host was asked %d times, want twice (build, then lint, which has no details)", n)
	}
	if f := checkNamed(t, e.ciStatus(id), lifecycle.SourceProvider, "lint").Failure; f != nil {
		t.Errorf("lint, of which the host has no details, has failure %+v, want nil", f)
	}
	evs := ciFailedEvents(e, id)
	if len(evs) != 1 {
		t.Fatalf("%d task.ci_failed events, want 1: %+v", len(evs), evs)
	}
	wantChecks := []lifecycle.FailedCheck{{Name: "build", URL: ptr("https://ci.example.com/b"), Source: lifecycle.SourceProvider}}
	if diff := cmp.Diff(wantChecks, evs[0].FailedChecks); diff != "" || evs[0].HeadSHA != sha {
		t.Errorf("task.ci_failed of %s: head %s, failed checks (-want +got):\n%s", sha, evs[0].HeadSHA, diff)
	}
	if !strings.Contains(evs[0].Summary, "failed") || evs[0].Status != lifecycle.StatusInReview {
		t.Errorf("task.ci_failed says %q in %s", evs[0].Summary, evs[0].Status)
	}
}

// A host that fails is asked again after a wait that doubles; one that
// fails every time is given up on.
func TestCIFailureRetried(t *testing.T) {
	t.Parallel()
	e, a := newSubmitEnv(t)
	id := e.startedTask("ENG-1")
	sha := headOf(t, e.submitOK(id, "ci-fail-2", apitest.SubmitBody()))
	a.web.SetFailure(sha, "build", lifecycle.CIFailure{Title: "broken"})
	a.web.SetChecks(sha, lifecycle.CIReport{Checks: []lifecycle.CICheck{{Name: "build", Status: lifecycle.CheckFailed}}})
	e.reconcile(id)
	a.web.FailNext(memory.OpCIFailure, errNetwork)
	e.Svc.FetchCIFailuresForTest(t.Context())
	if f := checkNamed(t, e.ciStatus(id), lifecycle.SourceProvider, "build").Failure; f != nil {
		t.Fatalf("failure after the host failed = %+v, want none yet", f)
	}
	e.Svc.FetchCIFailuresForTest(t.Context()) // not due yet
	if n := a.web.Calls(memory.OpCIFailure); n != 1 {
		t.Fatalf("asked %d times before the retry was due, want 1", n)
	}
	e.Clock.Advance(2 * time.Second)
	e.Svc.FetchCIFailuresForTest(t.Context())
	if f := checkNamed(t, e.ciStatus(id), lifecycle.SourceProvider, "build").Failure; f == nil || f.Title != "broken" {
		t.Fatalf("failure after the retry = %+v, want the host's", f)
	}

	// A host that always fails: six tries, then none.
	id2 := e.startedTask("ENG-2")
	sha2 := headOf(t, e.submitOK(id2, "ci-fail-3", apitest.SubmitBody()))
	a.web.SetChecks(sha2, lifecycle.CIReport{Checks: []lifecycle.CICheck{{Name: "build", Status: lifecycle.CheckFailed}}})
	e.reconcile(id2)
	before := a.web.Calls(memory.OpCIFailure)
	for range 10 {
		a.web.FailNext(memory.OpCIFailure, errNetwork)
		e.Svc.FetchCIFailuresForTest(t.Context())
		e.Clock.Advance(10 * time.Minute)
	}
	if n := a.web.Calls(memory.OpCIFailure) - before; n != 6 {
		t.Errorf("a failing host was asked %d times, want 6", n)
	}
}

// A check that is no longer the head's failed check is not asked about.
func TestCIFailureHeadMoved(t *testing.T) {
	t.Parallel()
	e, a := newSubmitEnv(t)
	id := e.startedTask("ENG-1")
	sha := headOf(t, e.submitOK(id, "ci-fail-4", apitest.SubmitBody()))
	a.web.SetChecks(sha, lifecycle.CIReport{Checks: []lifecycle.CICheck{{Name: "build", Status: lifecycle.CheckFailed}}})
	e.reconcile(id)
	a.web.Push(1)
	e.reconcile(id)
	e.Svc.FetchCIFailuresForTest(t.Context())
	if n := a.web.Calls(memory.OpCIFailure); n != 0 {
		t.Errorf("asked %d times about the failure of a commit no longer the head, want 0", n)
	}
}

// Reported checks carry their failure: refused when malformed, cut to the
// Service's bounds when long, announced with the failure.
func TestReportedCIFailure(t *testing.T) {
	t.Parallel()
	e, _ := newSubmitEnv(t, func(c *lifecycle.Config) {
		c.CIFailureExcerptBytes = 64
		c.CIFailureTaskBytes = 100
	})
	id := e.startedTask("ENG-1")
	sha := headOf(t, e.submitOK(id, "ci-fail-5", apitest.SubmitBody()))
	ci := e.Key(lifecycle.ScopeCIWrite)
	report := func(status int, checks ...map[string]any) map[string]any {
		return e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/checks", Key: ci, Body: map[string]any{"headSha": sha, "checks": checks}}, status)
	}
	for _, tc := range []struct {
		name  string
		check map[string]any
		field string
	}{
		{"on a passed check", map[string]any{"name": "unit", "status": "passed", "failure": map[string]any{"title": "x"}}, "checks[0].failure"},
		{"bad level", map[string]any{"name": "unit", "status": "failed", "failure": map[string]any{"annotations": []any{
			map[string]any{"path": "a.go", "startLine": 1, "endLine": 1, "level": "fatal", "message": "m"}}}}, "checks[0].failure.annotations[0].level"},
		{"lines backwards", map[string]any{"name": "unit", "status": "failed", "failure": map[string]any{"annotations": []any{
			map[string]any{"path": "a.go", "startLine": 5, "endLine": 4, "level": "failure", "message": "m"}}}}, "checks[0].failure.annotations[0].endLine"},
		{"log not a URL", map[string]any{"name": "unit", "status": "failed", "failure": map[string]any{"logUrl": "ftp://x"}}, "checks[0].failure.logUrl"},
		{"title too long", map[string]any{"name": "unit", "status": "failed", "failure": map[string]any{"title": strings.Repeat("t", 1001)}}, "checks[0].failure.title"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := report(http.StatusBadRequest, tc.check)
			if !strings.Contains(mustJSON(t, got), tc.field) {
				t.Errorf("400 %v does not name %s", got, tc.field)
			}
		})
	}
	// Long, well-formed details are cut: the end of the excerpt is kept,
	// on a UTF-8 boundary.
	excerpt := strings.Repeat("é", 100) + "FAIL at the end"
	report(http.StatusOK,
		map[string]any{"name": "unit", "status": "failed", "failure": map[string]any{"title": "Unit tests", "summary": "3 failed", "excerpt": excerpt}},
		map[string]any{"name": "lint", "status": "failed", "failure": map[string]any{"summary": strings.Repeat("s", 80), "logUrl": "https://ci.example.com/lint"}},
	)
	st := e.ciStatus(id)
	unit := checkNamed(t, st, lifecycle.SourceReported, "unit").Failure
	lint := checkNamed(t, st, lifecycle.SourceReported, "lint").Failure
	if unit == nil || lint == nil {
		t.Fatalf("failures served: unit %+v, lint %+v", unit, lint)
	}
	if unit.Title != "Unit tests" || unit.Summary != "3 failed" || !unit.Truncated ||
		!strings.HasSuffix(unit.Excerpt, "FAIL at the end") || !utf8.ValidString(unit.Excerpt) || len(unit.Title)+len(unit.Summary)+len(unit.Excerpt) > 64 {
		t.Errorf("unit's failure, cut to 64 bytes = %+v", unit)
	}
	// lint is reported after unit (by name, lint comes first): whichever
	// came second had only what the task's 100 bytes left.
	if total := len(unit.Title) + len(unit.Summary) + len(unit.Excerpt) + len(lint.Summary); total > 100 {
		t.Errorf("the task's failures weigh %d bytes, want at most 100", total)
	}
	if lint.LogURL == nil || *lint.LogURL != "https://ci.example.com/lint" || !lint.Truncated {
		t.Errorf("lint's failure = %+v, want its log link kept and truncated set", lint)
	}
	evs := ciFailedEvents(e, id)
	if len(evs) != 1 {
		t.Fatalf("%d task.ci_failed events, want 1", len(evs))
	}
	var titles []string
	for _, c := range evs[0].FailedChecks {
		titles = append(titles, c.Name+":"+c.Title)
	}
	if diff := cmp.Diff([]string{"lint:", "unit:Unit tests"}, titles); diff != "" {
		t.Errorf("task.ci_failed checks (-want +got):\n%s", diff)
	}
}

// mustJSON encodes v.
func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// ptr returns a pointer to v.
func ptr[T any](v T) *T { return &v }

// A submission's self-reported checks carry their failure: kept, and
// announced where they count (the artifact CI trusts them); refused when
// malformed.
func TestSelfReportedCIFailure(t *testing.T) {
	t.Parallel()
	e, _ := newSubmitEnv(t)
	id := e.startedTask("ENG-1")
	bad := withMember(apitest.SubmitBody(), "checks", []map[string]any{{"name": "unit", "status": "passed", "failure": map[string]any{"title": "x"}}})
	rec := e.Submit(id, "self-bad-key", bad)
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "checks[0].failure") {
		t.Errorf("a failure on a passed check: %d %s", rec.Code, rec.Body)
	}
	body := withMember(withMember(apitest.SubmitBody(), "mode", "artifact"), "checks", []map[string]any{
		{"name": "unit", "status": "failed", "failure": map[string]any{"title": "2 tests failed", "summary": "TestA, TestB", "excerpt": "--- FAIL: TestA\n",
			"annotations": []any{map[string]any{"path": "a_test.go", "startLine": 3, "endLine": 3, "level": "failure", "message": "want 1"}}}},
	})
	sha := headOf(t, e.submitOK(id, "self-ok-key", body))
	f := checkNamed(t, e.ciStatus(id), lifecycle.SourceSelfReported, "unit").Failure
	if f == nil || f.Title != "2 tests failed" || len(f.Annotations) != 1 || f.Annotations[0].Message != "want 1" {
		t.Fatalf("self-reported failure = %+v", f)
	}
	evs := ciFailedEvents(e, id)
	if len(evs) != 1 || evs[0].HeadSHA != sha || len(evs[0].FailedChecks) != 1 || evs[0].FailedChecks[0].Summary != "TestA, TestB" {
		t.Errorf("task.ci_failed of the submission = %+v", evs)
	}
}

// A failure marked due by a process that stopped before fetching it is
// fetched by the next Service to start on the Store.
func TestCIFailureDueSurvivesARestart(t *testing.T) {
	t.Parallel()
	e, a := newSubmitEnv(t) // never started: it dies with the failure due
	id := e.startedTask("ENG-1")
	sha := headOf(t, e.submitOK(id, "ci-restart", apitest.SubmitBody()))
	a.web.SetFailure(sha, "build", lifecycle.CIFailure{Title: "broken build"})
	a.web.SetChecks(sha, lifecycle.CIReport{Checks: []lifecycle.CICheck{{Name: "build", Status: lifecycle.CheckFailed}}})
	e.reconcile(id)
	next, err := lifecycle.New(lifecycle.Config{Store: e.Served, BaseURL: apitest.BaseURL, Clock: e.Clock,
		Adapters: []lifecycle.AdapterBinding{{Project: "web", Adapter: a.web}}})
	if err != nil {
		t.Fatal(err)
	}
	apitest.StartService(t, t.Context(), next)
	testenv.WaitFor(t, 5*time.Second, "the failure fetched by the next Service", func() bool {
		st, _, err := next.CIStatus(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		f := checkNamed(t, st, lifecycle.SourceProvider, "build").Failure
		return f != nil && f.Title == "broken build"
	})
}
