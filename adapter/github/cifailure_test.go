package github

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	gh "github.com/google/go-github/v60/github"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/github/githubtest"
)

// post delivers a signed webhook to e's /hooks/github, which applies it
// before answering, and fails t unless it is answered 200.
func (e *env) post(t testing.TB, event, id string, payload []byte) {
	t.Helper()
	req := signedDelivery(t, event, id, payload)
	req.RequestURI = ""
	req.URL.Scheme, req.URL.Host = "http", strings.TrimPrefix(e.srv.URL, "http://")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s delivery answered %d", event, resp.StatusCode)
	}
}

// checkOf returns the check of task named name as the CI status serves
// it, and whether there is one.
func (e *env) checkOf(t testing.TB, taskID, name string) (lifecycle.Check, bool) {
	t.Helper()
	ci, _, err := e.svc.CIStatus(context.Background(), taskID)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range ci.Checks {
		if c.Name == name {
			return c, true
		}
	}
	return lifecycle.Check{}, false
}

// A failed check run's summary and first annotation reach the CI status
// within a second of its check_run webhook, at the cost of one host
// request more than the reading of the task the webhook causes anyway:
// its annotations (the output comes with the webhook). A run without
// annotations costs none more.
func TestFailedCheckWithinASecond(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil, nil)
	// The cost of a check run's webhook when it passes.
	passed, psub := e.submitted(t)
	e.f.CheckRun(*psub.HeadSHA, "build", "success")
	before := e.f.Calls("")
	e.post(t, "check_run", "d-pass", e.f.CheckRunPayload(*psub.HeadSHA, "build", "success"))
	waitUntil(t, time.Second, "the passed check", func() bool { c, ok := e.checkOf(t, passed.ID, "build"); return ok && c.Status == lifecycle.CheckPassed })
	base := e.f.Calls("") - before

	for _, tc := range []struct {
		name        string
		annotations []*gh.CheckRunAnnotation
		extra       int64
	}{
		{"bare", nil, 0},
		{"annotated", []*gh.CheckRunAnnotation{
			{Path: gh.String("parse_test.go"), StartLine: gh.Int(12), EndLine: gh.Int(14), AnnotationLevel: gh.String("failure"), Message: gh.String("expected 2, got 3"), Title: gh.String("TestParse")},
			{Path: gh.String("parse.go"), StartLine: gh.Int(3), EndLine: gh.Int(3), AnnotationLevel: gh.String("warning"), Message: gh.String("unused variable")},
		}, 1},
	} {
		task, sub := e.submitted(t)
		sha := *sub.HeadSHA
		e.f.CheckRun(sha, "build", "failure")
		if !e.f.CheckRunOutput(sha, "build", "1 test failed", "TestParse: expected 2, got 3", "--- FAIL: TestParse (0.00s)\n    parse_test.go:12: expected 2, got 3\n", tc.annotations...) {
			t.Fatal("no check run to give an output")
		}
		annotations, before := e.f.Calls(githubtest.RouteCheckRunAnnotations), e.f.Calls("")
		start := time.Now()
		e.post(t, "check_run", "d-fail-"+tc.name, e.f.CheckRunPayload(sha, "build", "failure"))
		waitUntil(t, time.Second, tc.name+": the failure's details on the CI status", func() bool {
			c, ok := e.checkOf(t, task.ID, "build")
			return ok && c.Failure != nil
		})
		took := time.Since(start)
		c, _ := e.checkOf(t, task.ID, "build")
		f := c.Failure
		if f.Title != "1 test failed" || f.Summary != "TestParse: expected 2, got 3" || !strings.Contains(f.Excerpt, "--- FAIL: TestParse") ||
			f.LogURL == nil || !strings.Contains(*f.LogURL, "/runs/") {
			t.Errorf("%s: failure = %+v", tc.name, f)
		}
		if len(tc.annotations) > 0 {
			want := lifecycle.CIAnnotation{Path: "parse_test.go", StartLine: 12, EndLine: 14, Level: lifecycle.AnnotationFailure, Message: "expected 2, got 3"}
			if len(f.Annotations) != 2 || f.Annotations[0] != want {
				t.Errorf("%s: annotations = %+v, want %+v first", tc.name, f.Annotations, want)
			}
		}
		if n := e.f.Calls(githubtest.RouteCheckRunAnnotations) - annotations; n != tc.extra {
			t.Errorf("%s: %d requests of annotations, want %d", tc.name, n, tc.extra)
		}
		n := e.f.Calls("") - before
		if n > base+tc.extra {
			t.Errorf("%s: the failed check cost %d requests, a passed one %d: more than %d extra", tc.name, n, base, tc.extra)
		}
		t.Logf("%s: webhook to failure details on the CI status: %v; %d host requests (the reading before: %d)", tc.name, took, n, base)
		base = n - tc.extra // what the reading of a failed check costs
	}
}

// Without a webhook that carried its output (the reconciler found the
// failure), a check run's output is read by name, then its annotations.
func TestCIFailureReadWithoutWebhook(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil, nil)
	_, sub := e.submitted(t)
	sha := *sub.HeadSHA
	e.f.CheckRun(sha, "build", "failure")
	e.f.CheckRunOutput(sha, "build", "Lint failed", "2 problems", strings.Repeat("x", 100)+"END",
		&gh.CheckRunAnnotation{Path: gh.String("a.go"), StartLine: gh.Int(1), EndLine: gh.Int(1), AnnotationLevel: gh.String("notice"), Message: gh.String("m")})
	e.f.Status(sha, "ci/jenkins", "failure")
	ctx := context.Background()
	f, err := e.a.CIFailure(ctx, lifecycle.CIFailureQuery{HeadSHA: sha, Check: lifecycle.CICheck{Name: "build", Status: lifecycle.CheckFailed}, MaxBytes: 10})
	if err != nil {
		t.Fatal(err)
	}
	if f.Title != "Lint failed" || f.Summary != "2 problems" || f.Excerpt != "xxxxxxxEND" || !f.Truncated || len(f.Annotations) != 1 {
		t.Errorf("failure read by name = %+v", f)
	}
	st, err := e.a.CIFailure(ctx, lifecycle.CIFailureQuery{HeadSHA: sha, Check: lifecycle.CICheck{Name: "ci/jenkins", Status: lifecycle.CheckFailed}, MaxBytes: 10})
	if err != nil || st.LogURL == nil || *st.LogURL != "https://ci.example.com/ci/jenkins" {
		t.Errorf("commit status's failure = %+v, %v", st, err)
	}
	if _, err := e.a.CIFailure(ctx, lifecycle.CIFailureQuery{HeadSHA: sha, Check: lifecycle.CICheck{Name: "nope", Status: lifecycle.CheckFailed}}); !errorsIsNotFound(err) {
		t.Errorf("an unknown check: %v, want ErrNotFound", err)
	}
}

// errorsIsNotFound reports whether err matches lifecycle.ErrNotFound.
func errorsIsNotFound(err error) bool { return errors.Is(err, lifecycle.ErrNotFound) }

// BenchmarkFailedCheckDetails measures a failed check run, from its
// check_run webhook to its failure's details on the CI status (the
// webhook applied, the host read, the details fetched in the background
// and stored), and the host requests it costs (req/op).
func BenchmarkFailedCheckDetails(b *testing.B) {
	e := newEnv(b, nil, nil)
	var requests int64
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		task, sub := e.submitted(b)
		sha := *sub.HeadSHA
		e.f.CheckRun(sha, "build", "failure")
		e.f.CheckRunOutput(sha, "build", "1 test failed", "TestParse: expected 2, got 3", "--- FAIL: TestParse\n",
			&gh.CheckRunAnnotation{Path: gh.String("parse_test.go"), StartLine: gh.Int(12), EndLine: gh.Int(12), AnnotationLevel: gh.String("failure"), Message: gh.String("expected 2, got 3")})
		payload := e.f.CheckRunPayload(sha, "build", "failure")
		before := e.f.Calls("")
		b.StartTimer()
		e.post(b, "check_run", fmt.Sprintf("d-bench-%d", i), payload)
		waitUntil(b, 5*time.Second, "the failure's details", func() bool {
			c, ok := e.checkOf(b, task.ID, "build")
			return ok && c.Failure != nil
		})
		requests += e.f.Calls("") - before
	}
	b.ReportMetric(float64(requests)/float64(b.N), "req/op")
}

// The notes webhooks leave are a cache of what GitHub says of a failure:
// on random outputs, annotations and bounds, what CIFailure answers from
// a check_run or status webhook's note equals what it answers reading
// GitHub with no note.
func TestCIFailureNotesAgreeWithReading(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil, nil)
	_, sub := e.submitted(t)
	sha := *sub.HeadSHA
	rng := rand.New(rand.NewPCG(34, 1))
	words := []string{"", "build", "FAIL", "ünïcode", "日本語", "x\ny", strings.Repeat("long ", 40)}
	text := func() string {
		var b strings.Builder
		for range rng.IntN(4) {
			b.WriteString(words[rng.IntN(len(words))])
		}
		return b.String()
	}
	levels := []string{"notice", "warning", "failure"}
	ctx := context.Background()
	for i := range 60 {
		name := fmt.Sprintf("check-%d", i)
		var body []byte
		event := "check_run"
		if rng.IntN(4) == 0 {
			event = "status"
			e.f.Status(sha, name, []string{"failure", "error"}[rng.IntN(2)])
			body = e.f.StatusPayload(sha, name, "failure")
		} else {
			e.f.CheckRun(sha, name, []string{"failure", "timed_out", "cancelled"}[rng.IntN(3)])
			var notes []*gh.CheckRunAnnotation
			for range rng.IntN(4) {
				start := 1 + rng.IntN(50)
				notes = append(notes, &gh.CheckRunAnnotation{Path: gh.String(text() + ".go"), StartLine: gh.Int(start), EndLine: gh.Int(start + rng.IntN(3)),
					AnnotationLevel: gh.String(levels[rng.IntN(3)]), Message: gh.String("m" + text())})
			}
			e.f.CheckRunOutput(sha, name, text(), text(), text(), notes...)
			body = e.f.CheckRunPayload(sha, name, "failure")
		}
		q := lifecycle.CIFailureQuery{HeadSHA: sha, Check: lifecycle.CICheck{Name: name, Status: lifecycle.CheckFailed}, MaxBytes: rng.IntN(300)}

		e.a.notes = failureNotes{} // no webhook: GitHub read
		slow, slowErr := e.a.CIFailure(ctx, q)
		var p payload
		if err := json.Unmarshal(body, &p); err != nil {
			t.Fatal(err)
		}
		if event == "check_run" {
			e.a.noteCheckRun(p.CheckRun)
		} else {
			p.SHA, p.Context = sha, name
			e.a.noteStatus(&p)
		}
		if _, ok := e.a.notes.get(noteKey{strings.ToLower(sha), name}); !ok {
			t.Fatalf("%s %s: the webhook left no note", event, name)
		}
		fast, fastErr := e.a.CIFailure(ctx, q)
		if (slowErr == nil) != (fastErr == nil) {
			t.Fatalf("%s %s: read %v, from the note %v", event, name, slowErr, fastErr)
		}
		if diff := cmp.Diff(slow, fast); diff != "" {
			t.Errorf("%s %s (max %d): the note's answer differs from GitHub's (-read +note):\n%s", event, name, q.MaxBytes, diff)
		}
	}
}
