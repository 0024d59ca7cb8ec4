package client_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/tasklifecycle/lifecycle"
)

// A reported check's failure goes through the client and comes back on
// the CI status, with the Service's fetchedAt.
func TestCIFailureThroughTheClient(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	c := s.client(t, s.admin)
	ctx := t.Context()
	task, err := c.CreateTask(ctx, taskParams("WEB-9"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.StartTask(ctx, task.ID); err != nil {
		t.Fatal(err)
	}
	sub, err := c.Submit(ctx, task.ID, lifecycle.SubmitParams{Summary: "Redirect to the page the user came from."})
	if err != nil {
		t.Fatal(err)
	}
	log := "https://ci.example.com/7/log"
	failure := &lifecycle.CIFailure{Title: "1 test failed", Summary: "TestRedirect", Excerpt: "--- FAIL: TestRedirect\n", LogURL: &log,
		Annotations: []lifecycle.CIAnnotation{{Path: "redirect_test.go", StartLine: 9, EndLine: 9, Level: lifecycle.AnnotationFailure, Message: "want /orders"}}}
	st, _, err := c.ReportChecks(ctx, task.ID, lifecycle.ReportChecksParams{HeadSHA: *sub.HeadSHA,
		Checks: []lifecycle.CICheck{{Name: "build", Status: lifecycle.CheckFailed, Failure: failure}}})
	if err != nil || st.Overall != lifecycle.CIFailed {
		t.Fatalf("ReportChecks = %+v, %v", st, err)
	}
	if st, _, err = c.CIStatus(ctx, task.ID); err != nil {
		t.Fatal(err)
	}
	var got *lifecycle.CIFailure
	for _, ch := range st.Checks {
		if ch.Name == "build" {
			got = ch.Failure
		}
	}
	if got == nil || got.FetchedAt.IsZero() {
		t.Fatalf("failure read back = %+v", got)
	}
	if diff := cmp.Diff(failure, got, cmpopts.IgnoreFields(lifecycle.CIFailure{}, "FetchedAt")); diff != "" {
		t.Errorf("failure read back (-want +got):\n%s", diff)
	}
}
