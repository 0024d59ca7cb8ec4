package client_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/artifact"
	"github.com/tasklifecycle/lifecycle/client"
	"github.com/tasklifecycle/lifecycle/internal/testenv"
	memstore "github.com/tasklifecycle/lifecycle/store/memory"
)

// queueServer starts a Service whose ships go through its merge queue,
// on the artifact adapter, each candidate tested by check; it returns a
// client of it with every scope.
func queueServer(t *testing.T, check func(ctx context.Context, c artifact.QueueCandidate) error) (*client.Client, *lifecycle.Service) {
	t.Helper()
	a, err := artifact.New(artifact.Config{Dir: filepath.Join(t.TempDir(), "repos"), QueueCheck: check})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	store := memstore.New()
	t.Cleanup(func() { store.Close() })
	srv := httptest.NewUnstartedServer(nil)
	svc, err := lifecycle.New(lifecycle.Config{
		Store:           store,
		BaseURL:         "http://" + srv.Listener.Addr().String(),
		Logger:          slog.New(slog.NewTextHandler(io.Discard, nil)),
		Adapters:        []lifecycle.AdapterBinding{{Adapter: a}},
		ArtifactAdapter: a,
		ReviewRouter:    lifecycle.ReviewRules{Default: lifecycle.ReviewPlan{Policy: lifecycle.PolicyNeverRequire}},
		MergeQueue:      lifecycle.MergeQueueConfig{Enabled: true, PollInterval: 20 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = svc.Handler()
	srv.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := svc.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
		srv.Close()
	})
	_, key, err := svc.CreateAPIKey(t.Context(), lifecycle.CreateAPIKeyParams{Name: "admin", Scopes: allScopes(),
		Actor: lifecycle.Actor{ID: "tester", Role: lifecycle.RoleUser}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(client.Config{BaseURL: srv.URL, APIKey: key, MinBackoff: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return c, svc
}

// A ship waits in the merge queue while its candidate is tested: the
// client lists the queue and reads it with the task's entry, pauses it
// with a reason and resumes it; once the check passes, the change lands.
func TestMergeQueueThroughTheClient(t *testing.T) {
	t.Parallel()
	underTest, release := make(chan string, 10), make(chan struct{})
	c, _ := queueServer(t, func(ctx context.Context, cand artifact.QueueCandidate) error {
		underTest <- cand.SHA
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	ctx := t.Context()

	if qs, err := c.MergeQueues(ctx); err != nil || len(qs) != 0 {
		t.Fatalf("MergeQueues before any ship = %+v, %v; want none", qs, err)
	}
	task, err := c.CreateTask(ctx, taskParams("WEB-1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.StartTask(ctx, task.ID); err != nil {
		t.Fatal(err)
	}
	sub, err := c.Submit(ctx, task.ID, lifecycle.SubmitParams{Summary: "Redirect to the page the user came from."})
	if err != nil || sub.HeadSHA == nil {
		t.Fatalf("Submit = %+v, %v", sub, err)
	}
	if _, _, err := c.ReportChecks(ctx, task.ID, lifecycle.ReportChecksParams{HeadSHA: *sub.HeadSHA,
		Checks: []lifecycle.CICheck{{Name: "build", Status: lifecycle.CheckPassed}}}); err != nil {
		t.Fatal(err)
	}
	op, err := c.Ship(ctx, task.ID, lifecycle.ShipParams{Mode: lifecycle.ShipMergeOnly, TargetEnvironment: lifecycle.EnvironmentStaging,
		ExpectedHeadSHA: *sub.HeadSHA})
	if err != nil {
		t.Fatal(err)
	}
	candidate := within(t, underTest, "a candidate under test")

	qs, err := c.MergeQueues(ctx)
	if err != nil || len(qs) != 1 {
		t.Fatalf("MergeQueues = %+v, %v; want one", qs, err)
	}
	q, err := c.MergeQueue(ctx, qs[0].ID)
	if err != nil || q.ID != qs[0].ID || q.Base != "main" || len(q.Entries) != 1 {
		t.Fatalf("MergeQueue = %+v, %v", q, err)
	}
	if e := q.Entries[0]; e.TaskID != task.ID || e.OperationID != op.OperationID || e.Position != 1 || e.State != "testing" || e.CandidateID == 0 {
		t.Errorf("the entry = %+v, want the task's, first, testing in a candidate", e)
	}
	if len(q.Candidates) == 0 || q.Candidates[0].SHA != candidate {
		t.Errorf("candidates = %+v, want the one under test, %s", q.Candidates, candidate)
	}
	testenv.WaitFor(t, 10*time.Second, "the ship operation to show its merge_queue wait", func() bool {
		got, err := c.ShipOperation(ctx, op.OperationID)
		return err == nil && got.Wait != nil && got.Wait.Reason == lifecycle.WaitMergeQueue
	})

	paused, err := c.PauseMergeQueue(ctx, q.ID, "release freeze")
	if err != nil || !paused.Paused || paused.PauseReason == nil || !strings.Contains(*paused.PauseReason, "release freeze") ||
		!strings.Contains(*paused.PauseReason, "tester") {
		t.Fatalf("PauseMergeQueue = %+v, %v; want paused by tester for the release freeze", paused, err)
	}
	if again, err := c.PauseMergeQueue(ctx, q.ID, ""); err != nil || !again.Paused {
		t.Fatalf("PauseMergeQueue of a paused queue = %+v, %v", again, err)
	}
	resumed, err := c.ResumeMergeQueue(ctx, q.ID)
	if err != nil || resumed.Paused || resumed.PauseReason != nil {
		t.Fatalf("ResumeMergeQueue = %+v, %v", resumed, err)
	}
	close(release)
	testenv.WaitFor(t, 10*time.Second, "the change to land", func() bool {
		got, err := c.ShipOperation(ctx, op.OperationID)
		if err != nil || got.Status == lifecycle.ShipFailed {
			t.Fatalf("ShipOperation = %+v, %v", got, err)
		}
		return got.Status == lifecycle.ShipSucceeded
	})
	if q, err = c.MergeQueue(ctx, q.ID); err != nil || len(q.Entries) != 0 || q.Stats.Landed != 1 {
		t.Errorf("the queue after landing = %+v, %v; want empty, one landed", q, err)
	}
}

// The merge queue's refusals come back typed: an unknown queue is
// not_found, a reason longer than 1000 bytes validation_error.
func TestMergeQueueErrors(t *testing.T) {
	t.Parallel()
	c, _ := queueServer(t, nil)
	ctx := t.Context()
	if _, err := c.MergeQueue(ctx, "mq_none"); !errors.Is(err, lifecycle.ErrNotFound) {
		t.Errorf("MergeQueue(mq_none): %v, want ErrNotFound", err)
	}
	if _, err := c.PauseMergeQueue(ctx, "mq_none", "why"); !errors.Is(err, lifecycle.ErrNotFound) {
		t.Errorf("PauseMergeQueue(mq_none): %v, want ErrNotFound", err)
	}
	if _, err := c.ResumeMergeQueue(ctx, "mq_none"); !errors.Is(err, lifecycle.ErrNotFound) {
		t.Errorf("ResumeMergeQueue(mq_none): %v, want ErrNotFound", err)
	}
	var apiErr *client.Error
	_, err := c.PauseMergeQueue(ctx, "mq_none", strings.Repeat("x", 1001))
	if !errors.As(err, &apiErr) || apiErr.Code != "validation_error" || len(apiErr.Fields) != 1 || apiErr.Fields[0].Field != "reason" {
		t.Errorf("PauseMergeQueue with 1001 bytes of reason: %#v, want validation_error of reason", err)
	}
}

// within returns what ch receives, failing t after 10 seconds.
func within[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s within 10s", what)
		var zero T
		return zero
	}
}
