package gitlab_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	gl "gitlab.com/gitlab-org/api/client-go"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/gitlab/gitlabtest"
)

// A failed job's failure is the end of its log, stripped; a status of
// another CI system gives its description.
func TestCIFailureFromJobLog(t *testing.T) {
	t.Parallel()
	f := gitlabtest.NewServer(t, gitlabtest.Options{})
	a := newAdapter(t, f)
	f.Push("lifecycle/eng-1")
	pr := ensure(t, a, lifecycle.PullRequestRequest{Task: task("ENG-1")})
	job := &gl.CommitStatus{Name: "test", Status: "failed"}
	pipeline := f.Pipeline(int64(pr.Number), "", job)
	_, _, jobs := f.HeadPipeline(int64(pr.Number))
	id := jobs[0].ID
	f.SetTrace(id, strings.Repeat("\x1b[32mok\x1b[0m   pkg/a 0.01s\n", 5000)+
		"\x1b[0Ksection_start:1560896352:step_script\r\x1b[0K--- FAIL: TestParse (0.00s)\n    parse_test.go:12: expected 2, got 3\n"+
		"\x1b[31;1mERROR: Job failed: exit code 1\x1b[0;m\n")
	web := fmt.Sprintf("%s/acme/web/-/jobs/%d", f.URL, id)
	ctx := t.Context()
	got, err := a.CIFailure(ctx, lifecycle.CIFailureQuery{HeadSHA: pr.HeadSHA, Check: lifecycle.CICheck{Name: "test", Status: lifecycle.CheckFailed, URL: web}, MaxBytes: 120})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(got.Excerpt, "--- FAIL: TestParse (0.00s)\n    parse_test.go:12: expected 2, got 3\nERROR: Job failed: exit code 1\n") ||
		len(got.Excerpt) > 120 || strings.ContainsAny(got.Excerpt, "\x1b\r") || strings.Contains(got.Excerpt, "section_start") || !got.Truncated {
		t.Errorf("excerpt = %q (truncated %v)", got.Excerpt, got.Truncated)
	}
	if got.LogURL == nil || *got.LogURL != web {
		t.Errorf("log URL = %v, want %s", got.LogURL, web)
	}
	// Named by its status only: read by name first.
	before := f.Calls(gitlabtest.RouteStatuses)
	byName, err := a.CIFailure(ctx, lifecycle.CIFailureQuery{HeadSHA: pr.HeadSHA, Check: lifecycle.CICheck{Name: "test", Status: lifecycle.CheckFailed}, MaxBytes: 120})
	if err != nil || byName.Excerpt != got.Excerpt || f.Calls(gitlabtest.RouteStatuses) != before+1 {
		t.Errorf("by name: %+v, %v, %d statuses read", byName, err, f.Calls(gitlabtest.RouteStatuses)-before)
	}
	// Another CI system's status: its description.
	f.AddStatus(&gl.CommitStatus{SHA: pr.HeadSHA, Name: "jenkins", Status: "failed", Description: "2 tests failed", TargetURL: "https://jenkins.example.com/job/7", PipelineID: pipeline})
	ext, err := a.CIFailure(ctx, lifecycle.CIFailureQuery{HeadSHA: pr.HeadSHA, Check: lifecycle.CICheck{Name: "jenkins", Status: lifecycle.CheckFailed, URL: "https://jenkins.example.com/job/7"}})
	if err != nil || ext.Summary != "2 tests failed" || ext.Excerpt != "" || ext.LogURL == nil {
		t.Errorf("an external status: %+v, %v", ext, err)
	}
	if _, err := a.CIFailure(ctx, lifecycle.CIFailureQuery{HeadSHA: pr.HeadSHA, Check: lifecycle.CICheck{Name: "nope", Status: lifecycle.CheckFailed}}); !errors.Is(err, lifecycle.ErrNotFound) {
		t.Errorf("an unknown check: %v, want ErrNotFound", err)
	}
}
