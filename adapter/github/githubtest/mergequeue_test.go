package githubtest

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
)

const (
	queueRule = `{"type":"merge_queue","parameters":{"check_response_timeout_minutes":60,"grouping_strategy":"ALLGREEN","max_entries_to_build":5,"max_entries_to_merge":5,"merge_method":"MERGE","min_entries_to_merge":1,"min_entries_to_merge_wait_minutes":5}}`
	buildRule = `{"type":"required_status_checks","parameters":{"strict_required_status_checks_policy":false,"required_status_checks":[{"context":"build"}]}}`
)

// enqueue adds pull request n to the queue through GraphQL and returns
// the answer's errors.
func enqueue(t *testing.T, s *Server, n int, head string) []any {
	t.Helper()
	_, _, out := post(t, s, "/graphql", `mutation($id: ID!, $oid: GitObjectID) {
		enqueuePullRequest(input: {pullRequestId: $id, expectedHeadOid: $oid}) { mergeQueueEntry { position state } } }`,
		map[string]any{"id": fmt.Sprintf("PR_kwDOAAAAKs%d", n), "oid": head})
	errs, _ := out["errors"].([]any)
	return errs
}

// TestMergeQueue: entries, merge groups on gh-readonly-queue branches,
// QUEUED beyond the five built, merges in order once the groups' required
// checks pass, a failed group removed and those behind it built anew, a
// push removing its entry, and the queue as GraphQL reads it.
func TestMergeQueue(t *testing.T) {
	t.Parallel()
	s := NewServer(t, Options{EnforceBranchProtection: true})
	s.SetRulesJSON("main", queueRule, buildRule)
	var nums []int
	for i := range 7 {
		n := newPull(t, s, fmt.Sprintf("feature-%d", i))
		p, _ := s.PullRequest(n)
		s.CheckRun(p.HeadSHA, "build", "success")
		if errs := enqueue(t, s, n, p.HeadSHA); len(errs) > 0 {
			t.Fatalf("enqueue #%d: %v", n, errs)
		}
		nums = append(nums, n)
	}
	p, _ := s.PullRequest(nums[0])
	if errs := enqueue(t, s, nums[0], p.HeadSHA); len(errs) == 0 {
		t.Error("a pull request queued twice")
	}
	for i, n := range nums {
		pos, state, ok := s.QueueEntry(n)
		want := "AWAITING_CHECKS"
		if i >= maxEntriesToBuild {
			want = "QUEUED"
		}
		if !ok || pos != i+1 || state != want {
			t.Errorf("#%d: %d %q %v, want %d %q", n, pos, state, ok, i+1, want)
		}
	}
	// The second group fails: removed; the third is built anew on the first.
	_, g2, _ := s.MergeGroup(nums[1])
	_, g3, _ := s.MergeGroup(nums[2])
	s.CheckRun(g2, "build", "failure")
	if r := s.Removals(nums[1]); !slices.Equal(r, []string{ReasonChecksFailed}) {
		t.Errorf("removals %v", r)
	}
	if _, g3b, _ := s.MergeGroup(nums[2]); g3b == g3 {
		t.Error("the group behind a removed one was not built anew")
	}
	if _, state, _ := s.QueueEntry(nums[5]); state != "AWAITING_CHECKS" {
		t.Errorf("sixth entry %q, want built once the queue shrank", state)
	}
	// A push to the fourth's head removes it.
	p4, _ := s.PullRequest(nums[3])
	s.Push(p4.Head)
	if r := s.Removals(nums[3]); !slices.Equal(r, []string{ReasonHeadChanged}) {
		t.Errorf("removals %v", r)
	}
	// The first passes: merged as its group's commit, the base moved to it.
	branch, g1, _ := s.MergeGroup(nums[0])
	if branch != fmt.Sprintf("gh-readonly-queue/main/pr-%d-%s", nums[0], p.HeadSHA) {
		t.Errorf("group branch %q", branch)
	}
	s.CheckRun(g1, "build", "success")
	if p1, _ := s.PullRequest(nums[0]); !p1.Merged || p1.MergeCommitSHA != g1 {
		t.Errorf("first: merged %v at %s, want at its group %s", p1.Merged, p1.MergeCommitSHA, g1)
	}
	// GraphQL reads the queue: the third is now first.
	_, _, out := post(t, s, "/graphql", `{ repository(owner: "acme", name: "widgets") { mergeQueue(branch: "main") {
		entries(first: 100) { totalCount nodes { position state pullRequest { number } } } } } }`, nil)
	var got struct {
		Data struct {
			Repository struct {
				MergeQueue struct {
					Entries struct {
						TotalCount int
						Nodes      []struct {
							Position    int
							State       string
							PullRequest struct{ Number int }
						}
					}
				}
			}
		}
	}
	b, _ := json.Marshal(out)
	json.Unmarshal(b, &got)
	e := got.Data.Repository.MergeQueue.Entries
	if e.TotalCount != 4 || len(e.Nodes) != 4 || e.Nodes[0].PullRequest.Number != nums[2] || e.Nodes[0].Position != 1 || e.Nodes[0].State != "AWAITING_CHECKS" {
		t.Errorf("queue as read: %+v (%v)", e, out["errors"])
	}
	// Webhooks of the merge group and the removal.
	if pl, ok := s.MergeGroupPayload(nums[1], "destroyed", "dequeued"); !ok {
		t.Error("no merge_group payload")
	} else {
		var ev struct {
			Action, Reason string
			MergeGroup     struct {
				HeadSHA string `json:"head_sha"`
				HeadRef string `json:"head_ref"`
			} `json:"merge_group"`
		}
		json.Unmarshal(pl, &ev)
		if ev.Action != "destroyed" || ev.Reason != "dequeued" || ev.MergeGroup.HeadSHA != g2 {
			t.Errorf("merge_group payload %+v", ev)
		}
	}
	var dq struct{ Action, Reason string }
	json.Unmarshal(s.DequeuedPayload(nums[1]), &dq)
	if dq.Action != "dequeued" || dq.Reason != ReasonChecksFailed {
		t.Errorf("dequeued payload %+v", dq)
	}
}

// TestEnqueueRefusals: another head, a base without a queue.
func TestEnqueueRefusals(t *testing.T) {
	t.Parallel()
	s := NewServer(t, Options{})
	n := newPull(t, s, "feature")
	p, _ := s.PullRequest(n)
	if errs := enqueue(t, s, n, p.HeadSHA); len(errs) == 0 {
		t.Error("enqueued into a base without a merge queue")
	}
	s.SetRulesJSON("main", queueRule)
	if errs := enqueue(t, s, n, NewSHA()); len(errs) == 0 {
		t.Error("enqueued at another head")
	}
	if errs := enqueue(t, s, n, p.HeadSHA); len(errs) > 0 {
		t.Errorf("enqueue: %v", errs)
	}
	// No required checks: GitHub merges the group at once.
	if p, _ := s.PullRequest(n); !p.Merged {
		t.Error("not merged")
	}
}
