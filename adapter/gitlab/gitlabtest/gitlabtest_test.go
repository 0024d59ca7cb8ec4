package gitlabtest_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go"

	"github.com/tasklifecycle/lifecycle/adapter/gitlab/gitlabtest"
	"github.com/tasklifecycle/lifecycle/internal/fakeclock"
)

var start = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// fake starts a fake GitLab on a fake clock.
func fake(t *testing.T, opts gitlabtest.Options) (*gitlabtest.Server, *fakeclock.Clock) {
	t.Helper()
	clock := fakeclock.New(start)
	opts.Now = clock.Now
	return gitlabtest.NewServer(t, opts), clock
}

// addCar adds merge request iid to its merge train (POST
// .../merge_trains/merge_requests/:iid, with sha unless it is empty) and
// returns the answer's status.
func addCar(t *testing.T, f *gitlabtest.Server, iid int64, sha string) int {
	t.Helper()
	body := "{}"
	if sha != "" {
		body = fmt.Sprintf(`{"sha":%q}`, sha)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, fmt.Sprintf("%s/api/v4/projects/%d/merge_trains/merge_requests/%d", f.URL, gitlabtest.ProjectID, iid),
		strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Private-Token", "glpat-test")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// get sends GET path (under /api/v4/projects/3) with a token and decodes
// the answer's JSON into out, unless out is nil.
func get(t *testing.T, f *gitlabtest.Server, path string, out any) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, fmt.Sprintf("%s/api/v4/projects/%d%s", f.URL, gitlabtest.ProjectID, path), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Private-Token", "glpat-test")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(body, out); err != nil {
			t.Fatalf("GET %s: %v in %s", path, err, body)
		}
	}
	return resp
}

// open opens a merge request from a pushed branch through the API, as
// the adapter does, and returns its IID.
func open(t *testing.T, f *gitlabtest.Server, branch string) int64 {
	t.Helper()
	f.Push(branch)
	body := strings.NewReader(fmt.Sprintf(`{"source_branch":%q,"target_branch":"main","title":"Work on %s"}`, branch, branch))
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, fmt.Sprintf("%s/api/v4/projects/%d/merge_requests", f.URL, gitlabtest.ProjectID), body)
	req.Header.Set("Private-Token", "glpat-test")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var mr gl.MergeRequest
	if err := json.NewDecoder(resp.Body).Decode(&mr); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %s, %v", resp.Status, err)
	}
	return mr.IID
}

// A merge request's updated_at moves when its row changes (an edit, a
// close, a reopen, a merge) and, at most once a minute, for the changes
// GitLab makes known through system notes (a push, an approval, a
// review); its mergeability being worked out again leaves it.
func TestUpdatedAt(t *testing.T) {
	t.Parallel()
	f, clock := fake(t, gitlabtest.Options{})
	iid := open(t, f, "feature")
	updated := func() time.Time { return f.MergeRequest(iid).UpdatedAt }
	if got := updated(); !got.Equal(start) || !f.MergeRequest(iid).CreatedAt.Equal(start) {
		t.Fatalf("a new merge request: updated_at %s, want %s", got, start)
	}
	steps := []struct {
		name    string
		advance time.Duration
		do      func()
		moves   bool
	}{
		{"a push two minutes on", 2 * time.Minute, func() { f.Push("feature") }, true},
		{"an approval 30s after it", 30 * time.Second, func() { f.Approve(iid, "alice") }, false},
		{"a review 31s after that", 31 * time.Second, func() { f.SetReviewerState(iid, "bob", "requested_changes") }, true},
		{"an approval taken back 61s after", 61 * time.Second, func() { f.Unapprove(iid, "alice") }, true},
		{"a conflict found", time.Minute, func() { f.SetConflicts(iid, true) }, false},
		{"the target branch moving", time.Minute, func() { f.Push("main") }, false},
		{"a title edited 1s after", time.Second, func() { f.SetTitle(iid, "Better title") }, true},
		{"labels edited 1s after", time.Second, func() { f.SetLabels(iid, "bug") }, true},
		{"reviewers edited 1s after", time.Second, func() { f.SetReviewers(iid, "carol") }, true},
		{"a pipeline and its jobs", time.Second, func() { f.Pipeline(iid, "", &gl.CommitStatus{Name: "build", Status: "running"}) }, false},
		{"a conflicting push to the target", time.Second, func() { f.PushConflicting("main", iid) }, false},
		{"a retarget 1s after", time.Second, func() { f.Push("release"); f.Retarget(iid, "release") }, true},
		{"a close", time.Second, func() { f.Close(iid) }, true},
		{"a reopen", time.Second, func() { f.Reopen(iid) }, true},
		{"a merge by hand", time.Second, func() { f.MergeByHand(iid) }, true},
	}
	for _, s := range steps {
		before := updated()
		clock.Advance(s.advance)
		s.do()
		if got := updated(); got.Equal(clock.Now()) != s.moves || (!s.moves && !got.Equal(before)) {
			t.Errorf("%s: updated_at %s (was %s, now is %s); want it moved: %v", s.name, got, before, clock.Now(), s.moves)
		}
	}
}

// The list of merge requests filters on updated_after (inclusive), orders
// by updated_at and paginates as GitLab does; each listed merge request
// has the members of the recorded list.
func TestListMergeRequestsUpdatedAfter(t *testing.T) {
	t.Parallel()
	f, clock := fake(t, gitlabtest.Options{})
	for i := range 5 {
		open(t, f, fmt.Sprintf("b%d", i))
		clock.Advance(10 * time.Minute)
	}
	// !1 opened at 12:00 ... !5 at 12:40; !2 is edited at 12:50.
	f.SetTitle(2, "Edited")
	q := url.Values{"updated_after": {start.Add(20 * time.Minute).Format(time.RFC3339)}, "order_by": {"updated_at"}, "per_page": {"2"}, "state": {"all"}}
	var page1 []map[string]any
	resp := get(t, f, "/merge_requests?"+q.Encode(), &page1)
	if got := iids(page1); !slices.Equal(got, []int64{2, 5}) {
		t.Errorf("page 1 = %v, want [2 5] (updated_at, newest first)", got)
	}
	if resp.Header.Get("X-Next-Page") != "2" || resp.Header.Get("X-Total") != "4" || resp.Header.Get("X-Total-Pages") != "2" || !strings.Contains(resp.Header.Get("Link"), `rel="next"`) {
		t.Errorf("pagination headers = %v", resp.Header)
	}
	q.Set("page", "2")
	var page2 []map[string]any
	resp = get(t, f, "/merge_requests?"+q.Encode(), &page2)
	if got := iids(page2); !slices.Equal(got, []int64{4, 3}) {
		t.Errorf("page 2 = %v, want [4 3] (!3 was updated at updated_after itself)", got)
	}
	if resp.Header.Get("X-Next-Page") != "" {
		t.Errorf("X-Next-Page = %q on the last page", resp.Header.Get("X-Next-Page"))
	}
	for _, mr := range page1 {
		if _, ok := mr["head_pipeline"]; ok {
			t.Errorf("a listed merge request has head_pipeline, which GitLab gives a single one only")
		}
		for _, k := range []string{"updated_at", "detailed_merge_status", "draft", "sha", "reviewers"} {
			if _, ok := mr[k]; !ok {
				t.Errorf("a listed merge request lacks %s", k)
			}
		}
	}
}

func iids(list []map[string]any) []int64 {
	var out []int64
	for _, m := range list {
		out = append(out, int64(m["iid"].(float64)))
	}
	return out
}

// A job changing a pipeline's status moves the pipeline's updated_at, not
// its merge request's; the list of pipelines filters on updated_after.
func TestPipelinesUpdatedAfter(t *testing.T) {
	t.Parallel()
	f, clock := fake(t, gitlabtest.Options{})
	iid := open(t, f, "feature")
	head := f.MergeRequest(iid).SHA
	f.SetCheck(head, "build", "running", "")
	p := f.MergeRequest(iid).HeadPipelineID
	clock.Advance(5 * time.Minute)
	f.SetCheck(head, "build", "running", "") // no change of status
	if got := f.PipelineUpdatedAt(p); !got.Equal(start) {
		t.Errorf("a job running again moved the pipeline's updated_at to %s", got)
	}
	f.SetCheck(head, "build", "failed", "")
	if got := f.PipelineUpdatedAt(p); !got.Equal(clock.Now()) {
		t.Errorf("the pipeline failing left its updated_at at %s", got)
	}
	if got := f.MergeRequest(iid).UpdatedAt; !got.Equal(start) {
		t.Errorf("the pipeline failing moved its merge request's updated_at to %s", got)
	}
	var list []gl.PipelineInfo
	get(t, f, "/pipelines?updated_after="+url.QueryEscape(start.Add(time.Minute).Format(time.RFC3339)), &list)
	if len(list) != 1 || list[0].ID != p || list[0].Status != "failed" || list[0].Ref != "feature" || list[0].SHA != head {
		t.Errorf("pipelines updated since 12:01 = %+v, want pipeline %d failed", list, p)
	}
	get(t, f, "/pipelines?updated_after="+url.QueryEscape(clock.Now().Add(time.Second).Format(time.RFC3339)), &list)
	if len(list) != 0 {
		t.Errorf("pipelines updated after the last change = %+v", list)
	}
}

// The statuses of a commit: filtered by pipeline_id, the retried ones
// only with all=true, oldest first, 20 a page unless per_page says.
func TestCommitStatuses(t *testing.T) {
	t.Parallel()
	f, _ := fake(t, gitlabtest.Options{})
	iid := open(t, f, "feature")
	head := f.MergeRequest(iid).SHA
	var jobs []*gl.CommitStatus
	for i := range 30 {
		jobs = append(jobs, &gl.CommitStatus{Name: fmt.Sprintf("job-%02d", i), Status: "success"})
	}
	old := f.Pipeline(iid, "success", jobs...)
	newest := f.Pipeline(iid, "failed", &gl.CommitStatus{Name: "test", Status: "failed"}, &gl.CommitStatus{Name: "test", Status: "success"}, &gl.CommitStatus{Name: "lint", Status: "failed"})
	var all []gl.CommitStatus
	resp := get(t, f, "/repository/commits/"+head+"/statuses", &all)
	if len(all) != 20 || resp.Header.Get("X-Total") != "32" || all[0].PipelineID != old {
		t.Errorf("first page: %d statuses of %s, the first of pipeline %d; want 20 of 32, oldest first", len(all), resp.Header.Get("X-Total"), all[0].PipelineID)
	}
	var ofNewest []gl.CommitStatus
	get(t, f, fmt.Sprintf("/repository/commits/%s/statuses?pipeline_id=%d&per_page=100", head, newest), &ofNewest)
	if len(ofNewest) != 2 || ofNewest[0].Name != "test" || ofNewest[0].Status != "success" || ofNewest[1].Name != "lint" {
		t.Errorf("statuses of pipeline %d = %+v; want its latest test (success) and lint", newest, ofNewest)
	}
	get(t, f, fmt.Sprintf("/repository/commits/%s/statuses?pipeline_id=%d&all=true", head, newest), &ofNewest)
	if len(ofNewest) != 3 {
		t.Errorf("all statuses of pipeline %d = %d, want 3 (the retried test too)", newest, len(ofNewest))
	}
}

// detailed_merge_status: a new merge request's mergeability is worked
// out when it is read alone (checking, then mergeable); the target branch
// moving makes it unchecked; a conflict shows after the check; a
// fast-forward project needs a rebase once its target moved on; a merge
// works out mergeability first, and refuses one that cannot be merged.
func TestDetailedMergeStatus(t *testing.T) {
	t.Parallel()
	status := func(f *gitlabtest.Server, iid int64) (single, listed string, conflicts bool) {
		t.Helper()
		var list []map[string]any
		get(t, f, "/merge_requests?state=opened", &list)
		for _, m := range list {
			if int64(m["iid"].(float64)) == iid {
				listed = m["detailed_merge_status"].(string)
			}
		}
		var mr gl.MergeRequest
		get(t, f, fmt.Sprintf("/merge_requests/%d", iid), &mr)
		return mr.DetailedMergeStatus, listed, mr.HasConflicts
	}
	f, _ := fake(t, gitlabtest.Options{})
	iid := open(t, f, "feature")
	for i, want := range []string{"checking", "mergeable"} {
		if got, _, _ := status(f, iid); got != want {
			t.Errorf("reading %d of a new merge request: %s, want %s", i+1, got, want)
		}
	}
	f.Push("main")
	if single, listed, _ := status(f, iid); listed != "unchecked" || single != "checking" {
		t.Errorf("after the target moved: listed %s, read alone %s; want unchecked, then checking", listed, single)
	}
	f.SetConflicts(iid, true)
	f.SettleMergeability()
	if single, _, conflicts := status(f, iid); single != "conflict" || !conflicts {
		t.Errorf("with a conflict: %s (has_conflicts %v), want conflict", single, conflicts)
	}
	f.Push("feature") // resolved
	status(f, iid)
	if single, _, conflicts := status(f, iid); single != "mergeable" || conflicts {
		t.Errorf("after the agent pushed a resolution: %s (has_conflicts %v), want mergeable", single, conflicts)
	}

	ff, _ := fake(t, gitlabtest.Options{MergeMethod: "ff"})
	iid = open(t, ff, "feature")
	ff.Push("main")
	ff.SettleMergeability()
	if single, _, _ := status(ff, iid); single != "need_rebase" {
		t.Errorf("fast-forward, target moved on: %s, want need_rebase", single)
	}
	if got := ff.MergeRequest(iid).DetailedMergeStatus; got != "need_rebase" {
		t.Errorf("MergeRequest().DetailedMergeStatus = %s, want need_rebase", got)
	}
}

// With a rate limit, every answer says how much is left of the minute's
// window; past it GitLab answers 429 "Retry later" with Retry-After,
// until the next minute.
func TestRateLimit(t *testing.T) {
	t.Parallel()
	f, clock := fake(t, gitlabtest.Options{RateLimit: 3})
	clock.Advance(20 * time.Second) // 12:00:20
	for i := 1; i <= 3; i++ {
		resp := get(t, f, "", nil)
		h := resp.Header
		if resp.StatusCode != http.StatusOK || h.Get("RateLimit-Limit") != "3" || h.Get("RateLimit-Observed") != strconv.Itoa(i) ||
			h.Get("RateLimit-Remaining") != strconv.Itoa(3-i) || h.Get("RateLimit-Reset") != strconv.FormatInt(start.Add(time.Minute).Unix(), 10) {
			t.Errorf("request %d: %s %v", i, resp.Status, h)
		}
		if h.Get("Date") != clock.Now().Format(http.TimeFormat) {
			t.Errorf("Date = %q, want GitLab's time %s", h.Get("Date"), clock.Now())
		}
	}
	resp := get(t, f, "", nil)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "40" || resp.Header.Get("RateLimit-Remaining") != "0" ||
		resp.Header.Get("RateLimit-Name") != "throttle_authenticated_api" {
		t.Errorf("past the limit: %s %v, want 429 with Retry-After 40", resp.Status, resp.Header)
	}
	if n := f.Calls(gitlabtest.RouteProject); n != 4 {
		t.Errorf("Calls = %d, want 4 (the 429 counted)", n)
	}
	clock.Advance(40 * time.Second)
	if resp := get(t, f, "", nil); resp.StatusCode != http.StatusOK || resp.Header.Get("RateLimit-Remaining") != "2" {
		t.Errorf("in the next minute: %s, remaining %s", resp.Status, resp.Header.Get("RateLimit-Remaining"))
	}
}

// A list filters on iids[]; with with_merge_status_recheck it starts the
// mergeability checks of the merge requests it lists whose mergeability
// is not worked out, which show it once Options.CheckDelay has passed;
// without it, it starts none. A peek starts, finishes and counts
// nothing.
func TestListRecheckAndPeek(t *testing.T) {
	t.Parallel()
	f, clock := fake(t, gitlabtest.Options{CheckDelay: time.Second})
	for _, b := range []string{"a", "b", "c"} {
		open(t, f, b)
	}
	f.SettleMergeability()
	f.PushConflicting("main", 2)
	listed := func(q string, peek bool) map[int64]string {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, fmt.Sprintf("%s/api/v4/projects/%d/merge_requests?%s", f.URL, gitlabtest.ProjectID, q), nil)
		req.Header.Set("Private-Token", "glpat-test")
		if peek {
			req.Header.Set(gitlabtest.PeekHeader, "1")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var list []map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
			t.Fatal(err)
		}
		out := map[int64]string{}
		for _, m := range list {
			out[int64(m["iid"].(float64))] = m["detailed_merge_status"].(string)
		}
		return out
	}
	if got := listed("iids[]=2&iids[]=3", false); len(got) != 2 || got[2] != "unchecked" || got[3] != "unchecked" {
		t.Fatalf("iids[]=2&iids[]=3 after the target moved: %v, want !2 and !3 unchecked", got)
	}
	clock.Advance(2 * time.Second)
	if got := listed("iids[]=2", false); got[2] != "unchecked" {
		t.Errorf("without a recheck: %v, want still unchecked", got)
	}
	calls := f.TotalCalls()
	if got := listed("iids[]=2&with_merge_status_recheck=true", false); got[2] != "unchecked" {
		t.Errorf("the list that asks for a recheck: %v, want unchecked (the check is asynchronous)", got)
	}
	clock.Advance(2 * time.Second)
	if got := listed("iids[]=2", true); got[2] != "checking" {
		t.Errorf("a peek once the check is due: %v, want checking (a peek finishes nothing)", got)
	}
	if n := f.TotalCalls() - calls; n != 1 {
		t.Errorf("%d calls counted, want 1 (the peek is not)", n)
	}
	if got := listed("iids[]=2&iids[]=3", false); got[2] != "conflict" || got[3] != "unchecked" {
		t.Errorf("once the check is due: %v, want !2 conflict, !3 still unchecked", got)
	}
}

// Merge trains: a merge request added at its head runs a train pipeline
// and merges when it passes; one whose pipeline fails is dropped, its car
// destroyed, with GitLab's system note saying why; without merge trains
// the API answers 403.
func TestMergeTrains(t *testing.T) {
	t.Parallel()
	f, _ := fake(t, gitlabtest.Options{MergeTrains: true})
	a, b := open(t, f, "a"), open(t, f, "b")
	f.SettleMergeability()
	if code := addCar(t, f, a, f.MergeRequest(a).SHA); code != http.StatusBadRequest {
		t.Errorf("add without a complete pipeline: %d, want 400", code)
	}
	f.Pipeline(a, "success")
	f.Pipeline(b, "success")
	if code := addCar(t, f, a, gitlabtest.NewSHA()); code != http.StatusConflict {
		t.Errorf("add at another head: %d, want 409", code)
	}
	if code := addCar(t, f, a, f.MergeRequest(a).SHA); code != http.StatusCreated {
		t.Fatalf("add: %d, want 201", code)
	}
	var car gl.MergeTrain
	if resp := get(t, f, fmt.Sprintf("/merge_trains/merge_requests/%d", a), &car); resp.StatusCode != http.StatusOK || car.Status != "fresh" ||
		car.Pipeline == nil || car.Pipeline.Ref != fmt.Sprintf("refs/merge-requests/%d/train", a) || car.MergeRequest.IID != a {
		t.Fatalf("the car: %d %+v", resp.StatusCode, car)
	}
	merge := f.FinishTrain(a, "success")
	if mr := f.MergeRequest(a); mr.State != "merged" || mr.MergeCommitSHA != merge {
		t.Errorf("after the train pipeline passed: %s, merge commit %s, want merged as %s", mr.State, mr.MergeCommitSHA, merge)
	}
	if get(t, f, fmt.Sprintf("/merge_trains/merge_requests/%d", a), &car); car.Status != "merged" {
		t.Errorf("the car of a merged merge request: %s, want merged", car.Status)
	}
	f.SettleMergeability()
	if code := addCar(t, f, b, f.MergeRequest(b).SHA); code != http.StatusCreated {
		t.Fatalf("add !%d: %d", b, code)
	}
	f.FinishTrain(b, "failed")
	if resp := get(t, f, fmt.Sprintf("/merge_trains/merge_requests/%d", b), nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("the car of a dropped merge request: %d, want 404", resp.StatusCode)
	}
	var notes []gl.Note
	get(t, f, fmt.Sprintf("/merge_requests/%d/notes?sort=desc", b), &notes)
	if len(notes) == 0 || !notes[0].System || notes[0].Body != "removed this merge request from the merge train because pipeline did not succeed" {
		t.Errorf("notes = %+v, want GitLab's system note of the removal first", notes)
	}

	none, _ := fake(t, gitlabtest.Options{})
	c := open(t, none, "c")
	if resp := get(t, none, fmt.Sprintf("/merge_trains/merge_requests/%d", c), nil); resp.StatusCode != http.StatusForbidden {
		t.Errorf("without merge trains: %d, want 403", resp.StatusCode)
	}
}

// The merge requests in a merge train are listed by car id, newest first
// unless sort=asc, filtered by scope, and paginated; without merge trains
// the API answers 403.
func TestListMergeTrain(t *testing.T) {
	t.Parallel()
	f, _ := fake(t, gitlabtest.Options{MergeTrains: true})
	var iids []int64
	for _, b := range []string{"a", "b", "c"} {
		iid := open(t, f, b)
		f.Pipeline(iid, "success")
		f.SettleMergeability()
		if code := addCar(t, f, iid, ""); code != http.StatusCreated {
			t.Fatalf("add !%d: %d", iid, code)
		}
		iids = append(iids, iid)
	}
	order := func(query string) ([]int64, *http.Response) {
		t.Helper()
		var cars []gl.MergeTrain
		resp := get(t, f, "/merge_trains/main"+query, &cars)
		var out []int64
		for _, c := range cars {
			if c.MergeRequest == nil || c.Pipeline == nil || c.TargetBranch != "main" || c.Status != "fresh" {
				t.Errorf("%s: a car %+v, want a fresh one into main with its pipeline", query, c)
				continue
			}
			out = append(out, c.MergeRequest.IID)
		}
		return out, resp
	}
	if got, _ := order("?scope=active&sort=asc"); !slices.Equal(got, iids) {
		t.Errorf("active, asc: %v, want %v", got, iids)
	}
	if got, _ := order(""); !slices.Equal(got, []int64{iids[2], iids[1], iids[0]}) {
		t.Errorf("by default: %v, want newest first", got)
	}
	got, resp := order("?scope=active&sort=asc&per_page=2&page=2")
	if !slices.Equal(got, iids[2:]) || resp.Header.Get("X-Total") != "3" || resp.Header.Get("X-Total-Pages") != "2" || resp.Header.Get("X-Next-Page") != "" {
		t.Errorf("page 2 of 2: %v, X-Total %q, X-Total-Pages %q, X-Next-Page %q", got, resp.Header.Get("X-Total"), resp.Header.Get("X-Total-Pages"), resp.Header.Get("X-Next-Page"))
	}
	f.FinishTrain(iids[0], "success")
	var done []gl.MergeTrain
	if get(t, f, "/merge_trains/main?scope=complete", &done); len(done) != 1 || done[0].Status != "merged" || done[0].MergeRequest.IID != iids[0] {
		t.Errorf("complete: %+v, want !%d merged", done, iids[0])
	}
	if got, _ := order("?scope=active&sort=asc"); !slices.Equal(got, iids[1:]) {
		t.Errorf("active after the first merged: %v, want %v", got, iids[1:])
	}

	none, _ := fake(t, gitlabtest.Options{})
	if resp := get(t, none, "/merge_trains/main", nil); resp.StatusCode != http.StatusForbidden {
		t.Errorf("without merge trains: %d, want 403", resp.StatusCode)
	}
}

// A branch is read with its head commit.
func TestBranch(t *testing.T) {
	t.Parallel()
	f, _ := fake(t, gitlabtest.Options{})
	head := f.Push("release/1.0")
	var b gl.Branch
	if resp := get(t, f, "/repository/branches/"+url.PathEscape("release/1.0"), &b); resp.StatusCode != http.StatusOK || b.Name != "release/1.0" || b.Commit == nil || b.Commit.ID != head {
		t.Errorf("branch = %d %+v, want release/1.0 at %s", resp.StatusCode, b, head)
	}
	if resp := get(t, f, "/repository/branches/nope", nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("a missing branch: %d, want 404", resp.StatusCode)
	}
}
