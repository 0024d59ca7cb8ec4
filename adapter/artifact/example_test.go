package artifact_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

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

// A Deployer checks out merged commits into a directory per environment.
func ExampleDeployer() {
	dir, err := os.MkdirTemp("", "artifact-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	a, err := artifact.New(artifact.Config{Dir: filepath.Join(dir, "repos")})
	if err != nil {
		log.Fatal(err)
	}
	d, err := artifact.NewDeployer(artifact.DeployerConfig{Adapter: a, Dir: filepath.Join(dir, "deploy")})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	project := "web"
	task := lifecycle.Task{ID: "tsk_4kQ9xZ0000000000000001", Identifier: "WEB-1", Title: "Add a dark theme", Context: lifecycle.TaskContext{Project: &project}}
	pr, err := a.EnsurePullRequest(ctx, lifecycle.PullRequestRequest{Task: task, SubmissionID: "sub_1", Summary: "Added the theme."})
	if err != nil {
		log.Fatal(err)
	}
	res, err := a.Merge(ctx, lifecycle.MergeRequest{Ref: pr.PullRequestRef, ExpectedHeadSHA: pr.HeadSHA})
	if err != nil {
		log.Fatal(err)
	}

	dep, err := d.Deploy(ctx, lifecycle.DeployRequest{
		Task:        task,
		OperationID: "shp_1",
		Environment: lifecycle.EnvironmentStaging,
		PullRequest: pr.PullRequestRef,
		CommitSHA:   res.MergeCommitSHA,
	})
	if err != nil {
		log.Fatal(err)
	}
	// bc: the first two hexadecimal digits of the SHA-256 of "WEB-1".
	record, err := os.ReadFile(filepath.Join(dir, "deploy", "web", "staging", ".lifecycle", "bc", "WEB-1", "submission.json"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(dep.Environment, dep.CommitSHA == res.MergeCommitSHA, strings.Contains(string(record), `"submissionId": "sub_1"`))
	// Output:
	// staging true true
}
