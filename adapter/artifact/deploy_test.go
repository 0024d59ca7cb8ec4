package artifact_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/google/go-cmp/cmp"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/artifact"
	"github.com/tasklifecycle/lifecycle/internal/fakeclock"
)

// treeFiles returns the files of a commit's tree and their contents.
func treeFiles(t *testing.T, a *artifact.Adapter, repo, commit string) map[string]string {
	t.Helper()
	c, err := openRepo(t, a, repo).CommitObject(plumbing.NewHash(commit))
	if err != nil {
		t.Fatal(err)
	}
	iter, err := c.Files()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	err = iter.ForEach(func(f *object.File) error {
		s, err := f.Contents()
		out[f.Name] = s
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// dirFiles returns the files under dir and their contents.
func dirFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(dir) // an environment is a link
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	err = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		rel, _ := filepath.Rel(dir, path)
		out[filepath.ToSlash(rel)] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestDeployer(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(epoch)
	a, err := artifact.New(artifact.Config{Dir: t.TempDir(), Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	deployDir := t.TempDir()
	d, err := artifact.NewDeployer(artifact.DeployerConfig{Adapter: a, Dir: deployDir})
	if err != nil {
		t.Fatal(err)
	}
	pr1 := ensure(t, a, submission(task("web", "ENG-1"), "sub_a"))
	m1 := merge(t, a, pr1)
	deploy := func(op string, pr lifecycle.PullRequest, sha string, env lifecycle.Environment) lifecycle.Deployment {
		t.Helper()
		dep, err := d.Deploy(t.Context(), lifecycle.DeployRequest{Task: task("web", "ENG-1"), OperationID: op, Environment: env, PullRequest: pr.PullRequestRef, CommitSHA: sha})
		if err != nil {
			t.Fatalf("Deploy(%s, %s): %v", op, env, err)
		}
		return dep
	}
	staging := filepath.Join(deployDir, "web", "staging")

	dep := deploy("shp_one", pr1, m1.MergeCommitSHA, lifecycle.EnvironmentStaging)
	want := lifecycle.Deployment{ID: dep.ID, Environment: lifecycle.EnvironmentStaging, CommitSHA: m1.MergeCommitSHA, URL: "file://" + filepath.ToSlash(staging), DeployedAt: lifecycle.NewTimestamp(epoch)}
	if diff := cmp.Diff(want, dep); diff != "" || !strings.HasPrefix(dep.ID, "dep_") {
		t.Errorf("Deployment (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(treeFiles(t, a, "web", m1.MergeCommitSHA), dirFiles(t, staging)); diff != "" {
		t.Errorf("deployed files differ from the merged tree (-tree +deployed):\n%s", diff)
	}

	// Deploying the operation again is harmless: same record, same files.
	clock.Advance(time.Minute)
	if again := deploy("shp_one", pr1, m1.MergeCommitSHA, lifecycle.EnvironmentStaging); again != dep {
		t.Errorf("repeated Deploy = %+v, want the first deployment %+v", again, dep)
	}

	// A later merge replaces the deployment; the old release goes.
	pr2 := ensure(t, a, submission(task("web", "ENG-2"), "sub_b"))
	m2 := merge(t, a, pr2)
	dep2 := deploy("shp_two", pr2, m2.MergeCommitSHA, lifecycle.EnvironmentStaging)
	if dep2.ID == dep.ID || dep2.CommitSHA != m2.MergeCommitSHA || !dep2.DeployedAt.Equal(epoch.Add(time.Minute)) {
		t.Errorf("second Deploy = %+v", dep2)
	}
	if diff := cmp.Diff(treeFiles(t, a, "web", m2.MergeCommitSHA), dirFiles(t, staging)); diff != "" {
		t.Errorf("after the second deployment (-tree +deployed):\n%s", diff)
	}
	releases, err := os.ReadDir(filepath.Join(deployDir, "web", ".releases"))
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, e := range releases {
		if e.IsDir() {
			dirs = append(dirs, e.Name())
		}
	}
	if len(dirs) != 1 || dirs[0] != dep2.ID {
		t.Errorf("releases kept: %v, want only %s", dirs, dep2.ID)
	}

	// A late retry of the first operation does not roll back.
	if again := deploy("shp_one", pr1, m1.MergeCommitSHA, lifecycle.EnvironmentStaging); again != dep {
		t.Errorf("late retry of the first Deploy = %+v, want %+v", again, dep)
	}
	if _, ok := dirFiles(t, staging)[record("ENG-2", "submission.json")]; !ok {
		t.Error("a late retry of an earlier deployment rolled staging back")
	}

	// Environments are independent.
	prod := deploy("shp_one", pr1, m1.MergeCommitSHA, lifecycle.EnvironmentProduction)
	if prod.ID == dep.ID || prod.Environment != lifecycle.EnvironmentProduction {
		t.Errorf("production Deploy = %+v", prod)
	}
	if diff := cmp.Diff(treeFiles(t, a, "web", m1.MergeCommitSHA), dirFiles(t, filepath.Join(deployDir, "web", "production"))); diff != "" {
		t.Errorf("production (-tree +deployed):\n%s", diff)
	}
	if _, ok := dirFiles(t, staging)[record("ENG-2", "submission.json")]; !ok {
		t.Error("deploying production changed staging")
	}

	// A new Deployer on the same directory knows the deployments.
	d2, err := artifact.NewDeployer(artifact.DeployerConfig{Adapter: newAdapter(t, filepath.Dir(a.RepositoryDir("web"))), Dir: deployDir})
	if err != nil {
		t.Fatal(err)
	}
	again, err := d2.Deploy(t.Context(), lifecycle.DeployRequest{OperationID: "shp_two", Environment: lifecycle.EnvironmentStaging, PullRequest: pr2.PullRequestRef, CommitSHA: m2.MergeCommitSHA})
	if err != nil || again != dep2 {
		t.Errorf("Deploy from a new Deployer = %+v, %v; want %+v", again, err, dep2)
	}
}

func TestDeployerRefuses(t *testing.T) {
	t.Parallel()
	a := newAdapter(t, t.TempDir())
	d, err := artifact.NewDeployer(artifact.DeployerConfig{Adapter: a, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	pr := ensure(t, a, submission(task("web", "ENG-1"), "sub_a"))
	m := merge(t, a, pr)
	ok := lifecycle.DeployRequest{OperationID: "shp_x", Environment: lifecycle.EnvironmentStaging, PullRequest: pr.PullRequestRef, CommitSHA: m.MergeCommitSHA}
	tests := []struct {
		name     string
		edit     func(r *lifecycle.DeployRequest)
		notFound bool
	}{
		{"unknown repository", func(r *lifecycle.DeployRequest) { r.PullRequest.Repo = "api" }, true},
		{"unknown commit", func(r *lifecycle.DeployRequest) { r.CommitSHA = strings.Repeat("1", 40) }, true},
		{"not a SHA", func(r *lifecycle.DeployRequest) { r.CommitSHA = "main" }, false},
		{"environment climbs", func(r *lifecycle.DeployRequest) { r.Environment = "../x" }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			req := ok
			tt.edit(&req)
			_, err := d.Deploy(t.Context(), req)
			if err == nil || errors.Is(err, lifecycle.ErrNotFound) != tt.notFound {
				t.Errorf("Deploy(%+v) error = %v; want an error, matching ErrNotFound: %v", req, err, tt.notFound)
			}
		})
	}
	for _, cfg := range []artifact.DeployerConfig{{Dir: t.TempDir()}, {Adapter: a}} {
		if _, err := artifact.NewDeployer(cfg); err == nil || !strings.Contains(err.Error(), "DeployerConfig.") {
			t.Errorf("NewDeployer(%+v) error = %v, want one naming the missing field", cfg, err)
		}
	}
}

// TestDeployerResumes repeats a deployment that stopped after switching
// the environment but before recording it, leaving a half-written copy.
func TestDeployerResumes(t *testing.T) {
	t.Parallel()
	a := newAdapter(t, t.TempDir())
	deployDir := t.TempDir()
	d, err := artifact.NewDeployer(artifact.DeployerConfig{Adapter: a, Dir: deployDir})
	if err != nil {
		t.Fatal(err)
	}
	pr := ensure(t, a, submission(task("web", "ENG-1"), "sub_a"))
	m := merge(t, a, pr)
	req := lifecycle.DeployRequest{OperationID: "shp_x", Environment: lifecycle.EnvironmentProduction, PullRequest: pr.PullRequestRef, CommitSHA: m.MergeCommitSHA}
	dep, err := d.Deploy(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	releases := filepath.Join(deployDir, "web", ".releases")
	if err := os.Remove(filepath.Join(releases, dep.ID+".json")); err != nil {
		t.Fatal(err)
	}
	leftover := filepath.Join(releases, ".tmp-"+dep.ID+"-123")
	if err := os.MkdirAll(filepath.Join(leftover, "half"), 0o755); err != nil {
		t.Fatal(err)
	}
	again, err := d.Deploy(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if again.ID != dep.ID || again.CommitSHA != dep.CommitSHA || again.URL != dep.URL {
		t.Errorf("resumed Deploy = %+v, want %+v", again, dep)
	}
	if _, err := os.Stat(filepath.Join(releases, dep.ID+".json")); err != nil {
		t.Errorf("the resumed deployment was not recorded: %v", err)
	}
	if diff := cmp.Diff(treeFiles(t, a, "web", m.MergeCommitSHA), dirFiles(t, filepath.Join(deployDir, "web", "production"))); diff != "" {
		t.Errorf("after resuming (-tree +deployed):\n%s", diff)
	}
}
