package artifact_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/artifact"
)

// newQueueAdapter returns an Adapter on a fresh directory configured by
// cfg (Dir and Now are set here) and the tip of main of its repository
// "web", made by a first submission.
func newQueueAdapter(t *testing.T, cfg artifact.Config) (*artifact.Adapter, string) {
	t.Helper()
	cfg.Dir = t.TempDir()
	cfg.Now = func() time.Time { return epoch }
	a, err := artifact.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	ensure(t, a, submission(task("web", "ENG-1"), "sub_a"))
	base, err := a.BranchHead(t.Context(), webRepo, "main")
	if err != nil {
		t.Fatal(err)
	}
	return a, base
}

// candidate builds, on queue branch n, a candidate of main with one head
// that writes files, and returns the query of its checks.
func candidate(t *testing.T, a *artifact.Adapter, base string, n int, files map[string]string) lifecycle.CIQuery {
	t.Helper()
	head := commitFiles(t, a, "web", base, files)
	req := lifecycle.CandidateRequest{
		Repo:   webRepo,
		Base:   "main",
		Branch: fmt.Sprintf("lifecycle-queue/main/%d", n),
		Parent: base,
		Heads:  []lifecycle.CandidateHead{{PullRequest: lifecycle.PullRequestRef{Owner: "local", Repo: "web", Number: n}, SHA: head}},
	}
	sha, err := a.BuildCandidate(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	return lifecycle.CIQuery{PullRequest: req.Heads[0].PullRequest, HeadSHA: sha, Candidate: &req}
}

// report returns the checks of q.
func report(t *testing.T, a *artifact.Adapter, q lifecycle.CIQuery) lifecycle.CIReport {
	t.Helper()
	rep, err := a.Checks(t.Context(), q)
	if err != nil {
		t.Fatalf("Checks(%s): %v", q.HeadSHA, err)
	}
	return rep
}

// wantReport fails the test unless rep is pending as said with one check
// of that name and status, or no check when status is "".
func wantReport(t *testing.T, what string, rep lifecycle.CIReport, pending bool, name string, status lifecycle.CheckStatus) {
	t.Helper()
	var want []lifecycle.CICheck
	if status != "" {
		want = []lifecycle.CICheck{{Name: name, Status: status}}
	}
	if rep.Pending != pending || len(rep.Checks) != len(want) || len(want) == 1 && rep.Checks[0] != want[0] || rep.Checks == nil {
		t.Errorf("%s: Checks = %+v, want Pending %v with checks %+v", what, rep, pending, want)
	}
}

// finish waits for the check of q to finish.
func finish(t *testing.T, a *artifact.Adapter, q lifecycle.CIQuery) {
	t.Helper()
	done := a.QueueCheckDone("web", q.HeadSHA)
	if done == nil {
		t.Fatalf("no check of %s was started", q.HeadSHA)
	}
	<-done
}

func TestCandidateWithoutCheck(t *testing.T) {
	t.Parallel()
	a, base := newQueueAdapter(t, artifact.Config{})
	q := candidate(t, a, base, 1, map[string]string{"a.txt": "a"})
	wantReport(t, "no check configured", report(t, a, q), false, "", "")
	if a.QueueCheckDone("web", q.HeadSHA) != nil {
		t.Error("a check was started with none configured")
	}
}

func TestQueueCheck(t *testing.T) {
	t.Parallel()
	var (
		mu    sync.Mutex
		calls = map[string]int{}
		seen  []artifact.QueueCandidate
		// proceed lets a check end, once its first report has been read.
		proceed = make(chan struct{}, 2)
	)
	a, base := newQueueAdapter(t, artifact.Config{QueueCheck: func(ctx context.Context, c artifact.QueueCandidate) error {
		mu.Lock()
		calls[c.SHA]++
		seen = append(seen, c)
		mu.Unlock()
		select {
		case <-proceed:
		case <-ctx.Done():
			return ctx.Err()
		}
		if strings.HasSuffix(c.Branch, "/2") {
			return errors.New("TestLogin failed: want 302, got 200")
		}
		return nil
	}})
	pass := candidate(t, a, base, 1, map[string]string{"a.txt": "a"})
	fail := candidate(t, a, base, 2, map[string]string{"b.txt": "b"})
	for _, q := range []lifecycle.CIQuery{pass, fail} {
		rep := report(t, a, q)
		if !rep.Pending {
			t.Errorf("the first Checks of a candidate = %+v, want Pending", rep)
		}
		proceed <- struct{}{}
		finish(t, a, q)
	}
	// Asked again, and a rebuilt candidate of the same commit: not run again.
	for range 3 {
		wantReport(t, "passing candidate", report(t, a, pass), false, "queue-check", lifecycle.CheckPassed)
		wantReport(t, "failing candidate", report(t, a, fail), false, "queue-check", lifecycle.CheckFailed)
	}
	if again, err := a.BuildCandidate(t.Context(), *pass.Candidate); err != nil || again != pass.HeadSHA {
		t.Fatalf("rebuilt candidate = %s, %v; want %s", again, err, pass.HeadSHA)
	}
	wantReport(t, "rebuilt candidate", report(t, a, pass), false, "queue-check", lifecycle.CheckPassed)
	mu.Lock()
	if calls[pass.HeadSHA] != 1 || calls[fail.HeadSHA] != 1 || len(calls) != 2 {
		t.Errorf("QueueCheck calls by commit = %v, want one for each candidate", calls)
	}
	for _, c := range seen {
		if c.Repo != webRepo || c.Base != "main" || !strings.HasPrefix(c.Branch, "lifecycle-queue/main/") || c.Dir != "" || c.GitDir == "" {
			t.Errorf("QueueCheck got %+v", c)
		}
	}
	mu.Unlock()
	if out, ok := a.QueueCheckOutput(webRepo, fail.HeadSHA); !ok || out != "TestLogin failed: want 302, got 200" {
		t.Errorf("QueueCheckOutput of the failed candidate = %q, %v; want the error's text", out, ok)
	}
	if out, ok := a.QueueCheckOutput(webRepo, pass.HeadSHA); !ok || out != "" {
		t.Errorf("QueueCheckOutput of the passed candidate = %q, %v; want \"\", true", out, ok)
	}
	// A pull request's head is not a candidate: Checks is as without a
	// QueueCheck.
	pr := ensure(t, a, submission(task("web", "ENG-9"), "sub_z"))
	wantReport(t, "a pull request's head", report(t, a, lifecycle.CIQuery{PullRequest: pr.PullRequestRef, HeadSHA: pr.HeadSHA}), false, "", "")
	if a.QueueCheckDone("web", pr.HeadSHA) != nil {
		t.Error("a pull request's head was tested as a candidate")
	}
}

// TestQueueCheckPendingWhileRunning drives checks that block: a running
// check is reported running, at most two run at once, the others are
// pending with no check until they start.
func TestQueueCheckPendingWhileRunning(t *testing.T) {
	t.Parallel()
	entered := make(chan string, 3)
	release := make(chan struct{})
	a, base := newQueueAdapter(t, artifact.Config{QueueCheck: func(ctx context.Context, c artifact.QueueCandidate) error {
		entered <- c.SHA
		<-release
		return nil
	}})
	qs := map[string]lifecycle.CIQuery{}
	for n := range 3 {
		q := candidate(t, a, base, n+1, map[string]string{fmt.Sprintf("f%d.txt", n): "x"})
		qs[q.HeadSHA] = q
		if rep := report(t, a, q); !rep.Pending {
			t.Errorf("Checks of a new candidate = %+v, want Pending", rep)
		}
	}
	running := map[string]bool{<-entered: true, <-entered: true}
	for sha, q := range qs {
		rep := report(t, a, q)
		if running[sha] {
			wantReport(t, "running candidate", rep, true, "queue-check", lifecycle.CheckRunning)
		} else {
			wantReport(t, "candidate waiting for a slot", rep, true, "", "")
		}
	}
	select {
	case sha := <-entered:
		t.Fatalf("a third check (%s) runs while two do", sha)
	default:
	}
	close(release)
	third := <-entered
	if running[third] {
		t.Fatalf("candidate %s was tested twice", third)
	}
	for sha, q := range qs {
		finish(t, a, q)
		wantReport(t, "finished candidate "+sha, report(t, a, q), false, "queue-check", lifecycle.CheckPassed)
	}
}

// TestQueueCheckStoppedByClose: Close ends the context of a running check
// and waits for it; Checks then fails with ErrClosed.
func TestQueueCheckStoppedByClose(t *testing.T) {
	t.Parallel()
	entered := make(chan struct{})
	a, base := newQueueAdapter(t, artifact.Config{QueueCheck: func(ctx context.Context, c artifact.QueueCandidate) error {
		close(entered)
		<-ctx.Done()
		return ctx.Err()
	}})
	q := candidate(t, a, base, 1, map[string]string{"a.txt": "a"})
	report(t, a, q)
	<-entered
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Checks(t.Context(), q); !errors.Is(err, lifecycle.ErrClosed) {
		t.Errorf("Checks after Close: error = %v, want ErrClosed", err)
	}
}

func TestQueueCommand(t *testing.T) {
	t.Parallel()
	script := `echo "testing $LIFECYCLE_CANDIDATE_SHA of $LIFECYCLE_CANDIDATE_REPO into $LIFECYCLE_CANDIDATE_BASE on $LIFECYCLE_CANDIDATE_BRANCH in $(pwd)"
test -f README.md || { echo "no README.md" >&2; exit 2; }
r=$(cat ci/result)
echo "result $r" >&2
if [ "$r" = noisy ]; then i=0; while [ $i -lt 3000 ]; do echo "line $i of noise"; i=$((i+1)); done; exit 1; fi
test "$r" = pass`
	a, base := newQueueAdapter(t, artifact.Config{QueueCommand: []string{"sh", "-c", script}})
	for n, tc := range []struct {
		result string
		status lifecycle.CheckStatus
	}{
		{"pass", lifecycle.CheckPassed},
		{"fail", lifecycle.CheckFailed},
		{"noisy", lifecycle.CheckFailed},
	} {
		q := candidate(t, a, base, n+1, map[string]string{"ci/result": tc.result})
		if rep := report(t, a, q); !rep.Pending {
			t.Errorf("%s: the first Checks = %+v, want Pending", tc.result, rep)
		}
		finish(t, a, q)
		wantReport(t, tc.result, report(t, a, q), false, "queue-command", tc.status)
		out, ok := a.QueueCheckOutput(webRepo, q.HeadSHA)
		if !ok {
			t.Fatalf("%s: no output kept", tc.result)
		}
		if len(out) > 8<<10 {
			t.Errorf("%s: %d bytes of output kept, want at most 8 KiB", tc.result, len(out))
		}
		if tc.result == "noisy" {
			if !strings.Contains(out, "line 2999 of noise") || strings.Contains(out, "testing ") {
				t.Errorf("noisy: output does not keep the end alone: %q", out)
			}
			continue
		}
		want := fmt.Sprintf("testing %s of web into main on lifecycle-queue/main/%d in ", q.HeadSHA, n+1)
		if !strings.Contains(out, want) || !strings.Contains(out, "result "+tc.result) {
			t.Errorf("%s: output %q, want %q and the result", tc.result, out, want)
		}
		if tc.status == lifecycle.CheckFailed && !strings.Contains(out, "exit status 1") {
			t.Errorf("%s: output %q does not say how the command ended", tc.result, out)
		}
		// The checkout is gone.
		_, dir, _ := strings.Cut(out, " in ")
		dir, _, _ = strings.Cut(dir, "\n")
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: the candidate's directory %q is left: %v", tc.result, dir, err)
		}
	}
}

func TestQueueConfigRefused(t *testing.T) {
	t.Parallel()
	check := func(context.Context, artifact.QueueCandidate) error { return nil }
	for _, cfg := range []artifact.Config{
		{QueueCheck: check, QueueCommand: []string{"true"}},
		{QueueCommand: []string{""}},
	} {
		cfg.Dir = t.TempDir()
		if a, err := artifact.New(cfg); err == nil {
			a.Close()
			t.Errorf("New(%+v) succeeded", cfg)
		}
	}
}
