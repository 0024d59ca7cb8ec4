package artifact_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/artifact"
)

// A submission becomes a commit on the task's branch and a pull request;
// merging it makes a merge commit on main.
func Example() {
	dir, err := os.MkdirTemp("", "artifact-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	a, err := artifact.New(artifact.Config{Dir: dir})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	project := "web"
	task := lifecycle.Task{ID: "tsk_4kQ9xZ0000000000000001", Identifier: "WEB-1", Title: "Add a dark theme", Context: lifecycle.TaskContext{Project: &project}}

	pr, err := a.EnsurePullRequest(ctx, lifecycle.PullRequestRequest{
		Task:         task,
		SubmissionID: "sub_1",
		Summary:      "Added the theme; it follows the OS setting.",
		Checks:       []lifecycle.SubmittedCheck{{Name: "unit", Status: lifecycle.CheckPassed}},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(pr.PullRequestRef, pr.Head, "->", pr.Base, "created:", pr.Created)

	res, err := a.Merge(ctx, lifecycle.MergeRequest{Ref: pr.PullRequestRef, ExpectedHeadSHA: pr.HeadSHA})
	if err != nil {
		log.Fatal(err)
	}
	merged, err := a.PullRequest(ctx, pr.PullRequestRef)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(merged.State, merged.MergeCommitSHA == res.MergeCommitSHA)
	// Output:
	// local/web#1 lifecycle/web-1 -> main created: true
	// merged true
}
