package gitlab_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/gitlab/gitlabtest"
)

// A resubmission applies a title only when it gives one, and never makes
// a draft ready: a title edited at GitLab stays, and so does its Draft:
// prefix; asking for a draft adds the prefix to whatever title the merge
// request has.
func TestResubmitKeepsTitleAndDraft(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		draft     bool   // the first submission asks for a draft
		edited    string // the title a person gives it at GitLab, or ""
		req       lifecycle.PullRequestRequest
		wantTitle string
		wantDraft bool
	}{
		{"no title: the edited one stays", false, "Fix the login redirect for SSO users",
			lifecycle.PullRequestRequest{}, "Fix the login redirect for SSO users", false},
		{"no title: a draft's edited title stays a draft", true, "Draft: Fix SSO redirects",
			lifecycle.PullRequestRequest{}, "Draft: Fix SSO redirects", true},
		{"no title, not a draft any more: asking nothing keeps it ready", true, "Fix SSO redirects",
			lifecycle.PullRequestRequest{}, "Fix SSO redirects", false},
		{"a title given replaces it", false, "Edited at GitLab",
			lifecycle.PullRequestRequest{Title: "ENG-1: Fix the redirect, take two"}, "ENG-1: Fix the redirect, take two", false},
		{"a title given to a draft keeps the prefix", true, "",
			lifecycle.PullRequestRequest{Title: "ENG-1: Take two"}, "Draft: ENG-1: Take two", true},
		{"a title with its own prefix gets one", true, "",
			lifecycle.PullRequestRequest{Title: "[Draft] ENG-1: Take two"}, "Draft: ENG-1: Take two", true},
		{"asking for a draft prefixes the edited title", false, "Fix SSO redirects",
			lifecycle.PullRequestRequest{Draft: true}, "Draft: Fix SSO redirects", true},
		{"asking for a draft of a draft changes nothing", true, "(Draft) Fix SSO redirects",
			lifecycle.PullRequestRequest{Draft: true}, "(Draft) Fix SSO redirects", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := gitlabtest.NewServer(t, gitlabtest.Options{})
			a := newAdapter(t, f)
			f.Push("lifecycle/eng-1")
			first := ensure(t, a, lifecycle.PullRequestRequest{Task: task("ENG-1"), Draft: tt.draft})
			if tt.edited != "" {
				f.SetTitle(int64(first.Number), tt.edited)
			}
			req := tt.req
			req.Task = task("ENG-1")
			before, updates := f.MergeRequest(int64(first.Number)).Title, f.Calls(gitlabtest.RouteUpdateMR)
			again := ensure(t, a, req)
			mr := f.MergeRequest(int64(first.Number))
			if again.Created || again.Number != first.Number || mr.Title != tt.wantTitle || again.Draft != tt.wantDraft {
				t.Errorf("resubmitted: #%d created %v, title %q, draft %v; want #%d, title %q, draft %v",
					again.Number, again.Created, mr.Title, again.Draft, first.Number, tt.wantTitle, tt.wantDraft)
			}
			want := 0
			if before != tt.wantTitle {
				want = 1
			}
			if n := f.Calls(gitlabtest.RouteUpdateMR) - updates; n != want {
				t.Errorf("%d updates sent, want %d", n, want)
			}
		})
	}
}

// Mergeability from detailed_merge_status: GitLab working it out is
// unknown; a conflict is conflicting; a fast-forward project whose
// target moved on is behind; approvals, requested changes, drafts and
// pipelines, which the lifecycle judges itself, leave it mergeable;
// GitLab's own requirements that the lifecycle does not model
// (discussions, dependencies, external status checks, Jira, locked
// paths, security policies, a merge time, values GitLab may add) make it
// blocked, with GitLab's reason in words; a closed one says nothing.
func TestMergeability(t *testing.T) {
	t.Parallel()
	f := gitlabtest.NewServer(t, gitlabtest.Options{ApprovalsRequired: 1})
	a := newAdapter(t, f)
	f.Push("lifecycle/eng-1")
	pr := ensure(t, a, lifecycle.PullRequestRequest{Task: task("ENG-1")})
	iid := int64(pr.Number)
	read := func(step string, want lifecycle.Mergeability, reason ...string) {
		t.Helper()
		got, err := a.PullRequest(t.Context(), pr.PullRequestRef)
		if err != nil {
			t.Fatal(err)
		}
		if got.Mergeable != want {
			t.Errorf("%s: Mergeable %q, want %q", step, got.Mergeable, want)
		}
		if wantReason := strings.Join(reason, ""); got.BlockedReason != wantReason {
			t.Errorf("%s: BlockedReason %q, want %q", step, got.BlockedReason, wantReason)
		}
	}
	read("a new merge request, checked as it is read", lifecycle.MergeabilityUnknown)
	read("once checked (not approved yet)", lifecycle.MergeabilityMergeable)
	f.Push("main")
	f.SetConflicts(iid, true)
	read("the target moved: GitLab checks again", lifecycle.MergeabilityUnknown)
	read("a conflict", lifecycle.MergeabilityConflicting)
	f.Push("lifecycle/eng-1")
	f.SettleMergeability()
	read("resolved", lifecycle.MergeabilityMergeable)
	for status, want := range map[string]lifecycle.Mergeability{
		"approvals_syncing": lifecycle.MergeabilityUnknown, "preparing": lifecycle.MergeabilityUnknown,
		"ci_must_pass": lifecycle.MergeabilityMergeable, "ci_still_running": lifecycle.MergeabilityMergeable,
		"draft_status": lifecycle.MergeabilityMergeable, "requested_changes": lifecycle.MergeabilityMergeable,
		"not_approved": lifecycle.MergeabilityMergeable, "mergeable": lifecycle.MergeabilityMergeable,
		"conflict": lifecycle.MergeabilityConflicting, "need_rebase": lifecycle.MergeabilityBehind,
	} {
		f.SetDetailedMergeStatus(iid, status)
		read(status, want)
	}
	for status, reason := range map[string]string{
		"discussions_not_resolved":   "GitLab: all threads must be resolved before it is merged",
		"merge_request_blocked":      "GitLab: another merge request it depends on must be merged first",
		"blocked_status":             "GitLab: another merge request it depends on must be merged first",
		"status_checks_must_pass":    "GitLab: its external status checks must pass",
		"external_status_checks":     "GitLab: its external status checks must pass",
		"jira_association_missing":   "GitLab: the title or description must name a Jira issue",
		"locked_paths":               "GitLab: paths it changes are locked by other users",
		"locked_lfs_files":           "GitLab: LFS files it changes are locked by other users",
		"security_policy_violations": "GitLab: its security policies must be satisfied",
		"merge_time":                 "GitLab: it may not be merged before the time set for it",
		"title_regex":                "GitLab: its title must match the project's required pattern",
		"commits_status":             "GitLab: the source branch must exist and hold commits",
		"a_check_gitlab_adds":        "GitLab will not merge it: its detailed_merge_status is a_check_gitlab_adds",
	} {
		f.SetDetailedMergeStatus(iid, status)
		read(status, lifecycle.MergeabilityBlocked, reason)
	}
	f.Close(iid)
	read("closed", "")

	ff := gitlabtest.NewServer(t, gitlabtest.Options{MergeMethod: "ff"})
	a = newAdapter(t, ff)
	ff.Push("lifecycle/eng-1")
	pr = ensure(t, a, lifecycle.PullRequestRequest{Task: task("ENG-1")})
	ff.Push("main")
	ff.SettleMergeability()
	read("fast-forward, the target moved on", lifecycle.MergeabilityBehind)
}

// A merge GitLab refuses for what someone must do first stays a
// RefusedError in GitLab's words, naming the reason GitLab gives: its
// approval rules, a conflict, a rebase a fast-forward project needs, a
// draft. Nothing is merged.
func TestMergeRefusedForGitLabsReasons(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		opts   gitlabtest.Options
		setup  func(f *gitlabtest.Server, iid int64)
		reason string
	}{
		{"approvals missing", gitlabtest.Options{ApprovalsRequired: 1}, func(*gitlabtest.Server, int64) {},
			"not_approved: the approvals required are missing"},
		{"a conflict", gitlabtest.Options{}, func(f *gitlabtest.Server, iid int64) { f.Push("main"); f.SetConflicts(iid, true) },
			"conflict: the source branch conflicts with the target"},
		{"behind, fast-forward", gitlabtest.Options{MergeMethod: "ff"}, func(f *gitlabtest.Server, _ int64) { f.Push("main") },
			"need_rebase: the source branch must be rebased"},
		{"a draft", gitlabtest.Options{}, func(f *gitlabtest.Server, iid int64) { f.SetTitle(iid, "Draft: not yet") },
			"draft_status: the merge request is a draft"},
		{"changes requested", gitlabtest.Options{}, func(f *gitlabtest.Server, iid int64) { f.SetDetailedMergeStatus(iid, "requested_changes") },
			"requested_changes: a reviewer requested changes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := gitlabtest.NewServer(t, tt.opts)
			a := newAdapter(t, f)
			f.Push("lifecycle/eng-1")
			pr := ensure(t, a, lifecycle.PullRequestRequest{Task: task("ENG-1")})
			tt.setup(f, int64(pr.Number))
			_, err := a.Merge(t.Context(), lifecycle.MergeRequest{Ref: pr.PullRequestRef, ExpectedHeadSHA: pr.HeadSHA})
			var refused *lifecycle.RefusedError
			if !errors.As(err, &refused) || errors.Is(err, lifecycle.ErrTemporary) || !strings.Contains(refused.Message, tt.reason) {
				t.Errorf("Merge: %v; want a RefusedError naming %q", err, tt.reason)
			}
			if st := f.MergeRequest(int64(pr.Number)).State; st != "opened" {
				t.Errorf("the merge request is %s", st)
			}
		})
	}
}
