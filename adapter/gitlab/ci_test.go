package gitlab_test

import (
	"testing"

	gl "gitlab.com/gitlab-org/api/client-go"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/gitlab/gitlabtest"
)

// A head pipeline's own status counts: one GitLab created failed with no
// jobs (an invalid .gitlab-ci.yml) is a failed check "pipeline", not CI
// pending for ever; one failed or canceled while none of its jobs failed
// adds that check too; one still to run with no jobs is pending; one that
// passed with jobs is its jobs.
func TestCIOfTheHeadPipelinesOwnStatus(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		status  string
		jobs    []*gl.CommitStatus
		pending bool
		want    map[string]lifecycle.CheckStatus
	}{
		{"failed with no jobs", "failed", nil, false, map[string]lifecycle.CheckStatus{"pipeline": lifecycle.CheckFailed}},
		{"canceled with no jobs", "canceled", nil, false, map[string]lifecycle.CheckStatus{"pipeline": lifecycle.CheckFailed}},
		{"skipped with no jobs", "skipped", nil, false, map[string]lifecycle.CheckStatus{"pipeline": lifecycle.CheckSkipped}},
		{"created with no jobs", "created", nil, true, map[string]lifecycle.CheckStatus{}},
		{"running with no jobs", "running", nil, true, map[string]lifecycle.CheckStatus{}},
		{"failed, its jobs passed", "failed", []*gl.CommitStatus{{Name: "build", Status: "success"}}, false,
			map[string]lifecycle.CheckStatus{"build": lifecycle.CheckPassed, "pipeline": lifecycle.CheckFailed}},
		{"failed, a job failed", "failed", []*gl.CommitStatus{{Name: "build", Status: "failed"}}, false,
			map[string]lifecycle.CheckStatus{"build": lifecycle.CheckFailed}},
		{"passed", "success", []*gl.CommitStatus{{Name: "build", Status: "success"}}, false,
			map[string]lifecycle.CheckStatus{"build": lifecycle.CheckPassed}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := gitlabtest.NewServer(t, gitlabtest.Options{})
			a := newAdapter(t, f)
			f.Push("lifecycle/eng-1")
			pr := ensure(t, a, lifecycle.PullRequestRequest{Task: task("ENG-1")})
			f.Pipeline(int64(pr.Number), tc.status, tc.jobs...)
			rep, err := a.Checks(t.Context(), lifecycle.CIQuery{PullRequest: pr.PullRequestRef, HeadSHA: pr.HeadSHA})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]lifecycle.CheckStatus{}
			for _, c := range rep.Checks {
				got[c.Name] = c.Status
				if c.Name == "pipeline" && c.URL == "" {
					t.Errorf("the pipeline's check has no URL")
				}
			}
			if rep.Pending != tc.pending || len(got) != len(tc.want) {
				t.Fatalf("CI = %+v, want pending %v and %v", rep, tc.pending, tc.want)
			}
			for name, st := range tc.want {
				if got[name] != st {
					t.Errorf("check %s = %s, want %s", name, got[name], st)
				}
			}
		})
	}
}
