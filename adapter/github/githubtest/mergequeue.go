package githubtest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// GitHub's merge queue, as the fake models it from GitHub's documentation
// ("Managing a merge queue") and its GraphQL schema (MergeQueue,
// MergeQueueEntry, MergeQueueEntryState, enqueuePullRequest,
// RemovedFromMergeQueueEvent):
//
//   - a branch whose rulesets hold a merge_queue rule has a queue; the
//     mutation enqueuePullRequest adds an open pull request that meets the
//     base's other requirements at its end, refusing one whose head is not
//     expectedHeadOid;
//   - the first entries (maximumEntriesToBuild, 5 by GitHub's default)
//     each get a merge group: a commit of the base with the entries ahead
//     and the entry merged, on the branch
//     gh-readonly-queue/<base>/pr-<number>-<head sha>, where CI runs (the
//     merge_group event); the others wait, QUEUED;
//   - an entry's state is AWAITING_CHECKS while its group's required
//     checks (the base's required status checks) have not all passed,
//     MERGEABLE once they have (at once when the base requires none);
//   - GitHub merges the first entry once MERGEABLE: the base moves to its
//     group's commit, and the pull request is merged with that commit as
//     its merge commit;
//   - a group whose required check fails is removed from the queue (the
//     pull request dequeued, its group destroyed), and so is an entry
//     whose head is pushed to; the groups behind a removed entry are made
//     anew on the new order, and their CI runs again.
//
// The reasons the fake gives a removal (RemovedFromMergeQueueEvent.reason,
// a String in GitHub's schema whose values the schema does not list) are
// its own: ReasonChecksFailed and ReasonHeadChanged.

// maxEntriesToBuild is the number of entries whose merge groups are built
// at once: GitHub's default maximumEntriesToBuild.
const maxEntriesToBuild = 5

// The reasons the fake gives a pull request's removal from the merge
// queue.
const (
	// ReasonChecksFailed: a required check of its merge group failed.
	ReasonChecksFailed = "CI_FAILURE"
	// ReasonHeadChanged: its head branch was pushed to.
	ReasonHeadChanged = "HEAD_CHANGED"
)

// mergeQueues is the merge queues of the repository's branches.
type mergeQueues struct {
	entries  map[string][]*queueEntry // by base branch, first in front
	removals map[int][]queueRemoval   // by pull request number
	enqueues map[int]int              // enqueuePullRequest calls that queued, by pull request
	groups   map[int]queueGroup       // the last merge group built of each pull request
}

// queueGroup is a merge group as the merge_group event describes it.
type queueGroup struct {
	base, branch, sha, baseSHA string
}

// queueEntry is a pull request in a merge queue.
type queueEntry struct {
	id         int64
	p          *pull
	head       string    // the head it was queued at
	enqueuedAt time.Time // when it was queued
	baseAt     string    // the base commit when queued
	group      string    // its merge group's commit; "" while QUEUED
	groupBase  string    // the commit the group was built on
}

// queueRemoval is a RemovedFromMergeQueueEvent.
type queueRemoval struct {
	id     int64
	at     time.Time
	reason string
	before string // beforeCommit: the head when removed
}

// groupBranch is the branch of the merge group of pull request n at head
// into base.
func groupBranch(base string, n int, head string) string {
	return fmt.Sprintf("gh-readonly-queue/%s/pr-%d-%s", base, n, head)
}

// queueOf returns the entries of base's queue. Callers hold s.mu.
func (s *Server) queueOf(base string) []*queueEntry { return s.mq.entries[base] }

// entryOf returns p's entry and its index in its base's queue, or nil.
// Callers hold s.mu.
func (s *Server) entryOf(p *pull) (*queueEntry, int) {
	for i, e := range s.mq.entries[p.Base] {
		if e.p == p {
			return e, i
		}
	}
	return nil, -1
}

// entryState returns e's MergeQueueEntryState. Callers hold s.mu.
func (s *Server) entryState(e *queueEntry) string {
	if e.group == "" {
		return "QUEUED"
	}
	states := s.checkStates(e.group)
	for _, name := range s.rulesOf(e.p.Base).required {
		switch st, ok := states[name]; {
		case ok && st == stateFailed:
			return "UNMERGEABLE"
		case !ok || st == stateRunning:
			return "AWAITING_CHECKS"
		}
	}
	return "MERGEABLE"
}

// enqueue adds p to its base's queue at head: GitHub's enqueuePullRequest.
// It returns the entry, or the error GitHub answers. Callers hold s.mu.
func (s *Server) enqueue(p *pull, expected string) (*queueEntry, *gqlError) {
	unprocessable := func(msg string) *gqlError { return &gqlError{Type: "UNPROCESSABLE", Message: msg} }
	switch {
	case p.Merged || p.Closed:
		return nil, unprocessable("Pull request is closed")
	case p.Draft:
		return nil, unprocessable("Pull request is still a draft")
	case !s.rulesOf(p.Base).mergeQueue:
		return nil, unprocessable("The base branch does not require a merge queue")
	case expected != "" && !strings.EqualFold(expected, p.HeadSHA):
		return nil, unprocessable("Head branch was modified: expected head " + expected + ", found " + p.HeadSHA)
	}
	if e, _ := s.entryOf(p); e != nil {
		return nil, unprocessable("Pull request is already in the merge queue")
	}
	s.computed(p)
	if f := s.refusal(p); f != nil && !strings.Contains(f.Body, "merge queue") {
		var msg struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal([]byte(f.Body), &msg)
		return nil, unprocessable(msg.Message)
	}
	if s.mq.entries == nil {
		s.mq.entries, s.mq.removals, s.mq.enqueues, s.mq.groups = map[string][]*queueEntry{}, map[int][]queueRemoval{}, map[int]int{}, map[int]queueGroup{}
	}
	e := &queueEntry{id: s.id(), p: p, head: p.HeadSHA, enqueuedAt: s.tick(), baseAt: s.branches[p.Base]}
	s.mq.entries[p.Base] = append(s.mq.entries[p.Base], e)
	s.mq.enqueues[p.Number]++
	s.advanceQueues()
	return e, nil
}

// headMoved removes p from its queue when its head is no longer the one
// queued. Callers hold s.mu, and advance the queues after.
func (s *Server) headMoved(p *pull) {
	if e, _ := s.entryOf(p); e != nil && e.head != p.HeadSHA {
		s.dequeue(e, ReasonHeadChanged)
	}
}

// dequeue removes e from its queue with reason: its merge group is
// destroyed (its branch deleted). Callers hold s.mu.
func (s *Server) dequeue(e *queueEntry, reason string) {
	base := e.p.Base
	s.mq.entries[base] = slices.DeleteFunc(s.mq.entries[base], func(x *queueEntry) bool { return x == e })
	delete(s.branches, groupBranch(base, e.p.Number, e.head))
	if reason != "" {
		s.mq.removals[e.p.Number] = append(s.mq.removals[e.p.Number], queueRemoval{id: s.id(), at: s.tick(), reason: reason, before: e.head})
		s.touch(e.p)
	}
}

// advanceQueues does what GitHub's merge queues do next, until none has
// anything left to do: build the merge groups of the entries in front,
// remove those whose required checks failed, merge the first when it is
// MERGEABLE. Callers hold s.mu.
func (s *Server) advanceQueues() {
	for base := range s.mq.entries {
		for s.advanceQueue(base) {
		}
	}
}

// advanceQueue does one thing of base's queue and reports whether it did.
// Callers hold s.mu.
func (s *Server) advanceQueue(base string) bool {
	q := s.mq.entries[base]
	parent := s.branches[base]
	for i, e := range q {
		if i >= maxEntriesToBuild {
			if e.group != "" {
				delete(s.branches, groupBranch(base, e.p.Number, e.head))
				e.group, e.groupBase = "", ""
			}
			continue
		}
		if e.group == "" || e.groupBase != parent {
			// A new group: the base with the entries ahead and this one
			// merged; its CI runs anew (merge_group checks_requested).
			e.group, e.groupBase = s.commit(), parent
			s.branches[groupBranch(base, e.p.Number, e.head)] = e.group
			s.mq.groups[e.p.Number] = queueGroup{base: base, branch: groupBranch(base, e.p.Number, e.head), sha: e.group, baseSHA: parent}
		}
		parent = e.group
	}
	for i, e := range q {
		if i >= maxEntriesToBuild {
			break
		}
		if s.entryState(e) == "UNMERGEABLE" {
			s.dequeue(e, ReasonChecksFailed)
			return true
		}
	}
	if len(q) > 0 && s.entryState(q[0]) == "MERGEABLE" {
		e := q[0]
		s.mq.entries[base] = q[1:]
		delete(s.branches, groupBranch(base, e.p.Number, e.head))
		s.merges++
		e.p.Merged, e.p.MergeCommitSHA, e.p.MergeMethod = true, e.group, "merge"
		s.touch(e.p)
		s.moveBranch(base, e.group)
		return true
	}
	return false
}

// MergeGroup returns the merge group of pull request n, while it is in a
// merge queue and its group is built: the group's branch
// (gh-readonly-queue/<base>/pr-<n>-<head>) and commit, on which tests
// report the merge group's checks with [Server.CheckRun] or
// [Server.Status], as CI does on the merge_group event.
func (s *Server) MergeGroup(n int) (branch, sha string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, found := s.pulls[n]
	if !found {
		return "", "", false
	}
	e, _ := s.entryOf(p)
	if e == nil || e.group == "" {
		return "", "", false
	}
	return groupBranch(p.Base, n, e.head), e.group, true
}

// QueueEntry says where pull request n is in its base's merge queue: its
// position (1 is the front) and state (AWAITING_CHECKS, MERGEABLE,
// QUEUED, ...), or ok false when it is not queued.
func (s *Server) QueueEntry(n int) (position int, state string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, found := s.pulls[n]
	if !found {
		return 0, "", false
	}
	e, i := s.entryOf(p)
	if e == nil {
		return 0, "", false
	}
	return i + 1, s.entryState(e), true
}

// Enqueues returns how many times pull request n was added to a merge
// queue.
func (s *Server) Enqueues(n int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mq.enqueues[n]
}

// Removals returns the reasons pull request n was removed from a merge
// queue, oldest first.
func (s *Server) Removals(n int) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, r := range s.mq.removals[n] {
		out = append(out, r.reason)
	}
	return out
}

// Webhooks.

// MergeGroupPayload returns the payload of a merge_group event of pull
// request n's last merge group, as octokit/webhooks describes it: action
// checks_requested (the group was built: CI is asked to run on it), or
// destroyed with reason merged, invalidated or dequeued. ok is false when
// the pull request never had a merge group.
func (s *Server) MergeGroupPayload(n int, action, reason string) (payload []byte, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.mq.groups[n]
	if !ok {
		return nil, false
	}
	ev := map[string]any{
		"action": action,
		"merge_group": map[string]any{
			"head_sha": g.sha, "head_ref": "refs/heads/" + g.branch, "base_sha": g.baseSHA, "base_ref": "refs/heads/" + g.base,
			"head_commit": map[string]any{
				"id": g.sha, "tree_id": NewSHA(), "message": fmt.Sprintf("Merge pull request #%d", n), "timestamp": s.now.UTC().Format(time.RFC3339),
				"author":    map[string]string{"name": "GitHub", "email": "noreply@github.com"},
				"committer": map[string]string{"name": "GitHub", "email": "noreply@github.com"},
			},
		},
		"repository": s.repoJSON(), "sender": user("github-merge-queue[bot]"),
	}
	if action == "destroyed" {
		ev["reason"] = reason
	}
	return mustJSON(ev), true
}

// DequeuedPayload returns the payload of a pull_request event with
// action dequeued of pull request n: its last removal's reason, as the
// payload's "reason" carries it ([Server.PullRequestPayload] makes the
// enqueued one).
func (s *Server) DequeuedPayload(n int) []byte {
	var ev map[string]any
	_ = json.Unmarshal(s.PullRequestPayload(n, "dequeued"), &ev)
	s.mu.Lock()
	defer s.mu.Unlock()
	ev["reason"] = ""
	if rs := s.mq.removals[n]; len(rs) > 0 {
		ev["reason"] = rs[len(rs)-1].reason
	}
	return mustJSON(ev)
}

// GraphQL.

type mutationObj struct{}

func (mutationObj) typeName() string { return "Mutation" }

func (mutationObj) resolve(e *gqlExec, name string, args map[string]any) (any, *gqlError) {
	if name != "enqueuePullRequest" {
		return nil, nil
	}
	in, _ := args["input"].(map[string]any)
	id, _ := in["pullRequestId"].(string)
	expected, _ := in["expectedHeadOid"].(string)
	n, err := strconv.Atoi(strings.TrimPrefix(id, "PR_kwDOAAAAKs"))
	p, ok := e.s.pulls[n]
	if err != nil || !ok || !strings.HasPrefix(id, "PR_kwDOAAAAKs") {
		return nil, &gqlError{Type: "NOT_FOUND", Message: fmt.Sprintf("Could not resolve to a node with the global id of '%s'", id)}
	}
	entry, gerr := e.s.enqueue(p, expected)
	if gerr != nil {
		return nil, gerr
	}
	return payloadObj{entry: entry, clientMutationID: in["clientMutationId"]}, nil
}

type payloadObj struct {
	entry            *queueEntry
	clientMutationID any
}

func (payloadObj) typeName() string { return "EnqueuePullRequestPayload" }

func (o payloadObj) resolve(e *gqlExec, name string, _ map[string]any) (any, *gqlError) {
	switch name {
	case "clientMutationId":
		return o.clientMutationID, nil
	case "mergeQueueEntry":
		if _, i := e.s.entryOf(o.entry.p); i < 0 || e.s.mq.entries[o.entry.p.Base][i] != o.entry {
			return nil, nil // merged or removed at once
		}
		return entryObj{o.entry}, nil
	}
	return nil, nil
}

// resolveQueueRepo resolves Repository.mergeQueue and Repository.refs.
func (s *Server) resolveQueueRepo(e *gqlExec, name string, args map[string]any) (any, *gqlError) {
	switch name {
	case "mergeQueue":
		branch, _ := args["branch"].(string)
		if branch == "" {
			branch = s.defaultBranch
		}
		if _, ok := s.branches[branch]; !ok || !s.rulesOf(branch).mergeQueue {
			return nil, nil
		}
		return queueObj{base: branch}, nil
	case "refs":
		prefix, _ := args["refPrefix"].(string)
		const heads = "refs/heads/"
		var names []string
		for b := range s.branches {
			if full := heads + b; strings.HasPrefix(full, prefix) && len(full) > len(prefix) {
				names = append(names, strings.TrimPrefix(full, prefix))
			}
		}
		slices.Sort(names)
		items := make([]gqlObject, len(names))
		for i, n := range names {
			items[i] = refObj{name: n, sha: s.branches[strings.TrimPrefix(prefix+n, heads)]}
		}
		return connection{typ: "RefConnection", items: items, args: args}, nil
	}
	return nil, nil
}

// resolveQueuePR resolves the merge queue's fields of a pull request.
func (s *Server) resolveQueuePR(e *gqlExec, p *pull, name string, args map[string]any) (any, *gqlError) {
	entry, _ := s.entryOf(p)
	switch name {
	case "isInMergeQueue":
		return entry != nil, nil
	case "mergeQueueEntry":
		if entry == nil {
			return nil, nil
		}
		return entryObj{entry}, nil
	case "mergeQueue":
		if !s.rulesOf(p.Base).mergeQueue {
			return nil, nil
		}
		return queueObj{base: p.Base}, nil
	case "timelineItems":
		types, _ := args["itemTypes"].([]any)
		var items []gqlObject
		if len(types) == 0 || slices.Contains(types, any("REMOVED_FROM_MERGE_QUEUE_EVENT")) {
			for _, r := range s.mq.removals[p.Number] {
				items = append(items, removedObj{r: r, p: p})
			}
		}
		return connection{typ: "PullRequestTimelineItemsConnection", items: items, args: args}, nil
	}
	return nil, nil
}

type queueObj struct{ base string }

func (queueObj) typeName() string { return "MergeQueue" }

func (q queueObj) resolve(e *gqlExec, name string, args map[string]any) (any, *gqlError) {
	switch name {
	case "id":
		return "MQ_" + q.base, nil
	case "entries":
		var items []gqlObject
		for _, en := range e.s.queueOf(q.base) {
			items = append(items, entryObj{en})
		}
		return connection{typ: "MergeQueueEntryConnection", items: items, args: args}, nil
	}
	return nil, nil
}

type entryObj struct{ e *queueEntry }

func (entryObj) typeName() string { return "MergeQueueEntry" }

func (o entryObj) resolve(e *gqlExec, name string, _ map[string]any) (any, *gqlError) {
	en := o.e
	switch name {
	case "id":
		return fmt.Sprintf("MQE_%d", en.id), nil
	case "position":
		_, i := e.s.entryOf(en.p)
		return i + 1, nil
	case "state":
		return e.s.entryState(en), nil
	case "enqueuedAt":
		return en.enqueuedAt, nil
	case "headCommit":
		return commitObj{sha: en.head}, nil
	case "baseCommit":
		return commitObj{sha: en.baseAt}, nil
	case "pullRequest":
		o := prObj{p: en.p}
		o.mergeable, o.mergeState = e.s.mergeView(en.p)
		return o, nil
	case "mergeQueue":
		return queueObj{base: en.p.Base}, nil
	case "jump", "solo":
		return false, nil
	}
	return nil, nil
}

type removedObj struct {
	r queueRemoval
	p *pull
}

func (removedObj) typeName() string { return "RemovedFromMergeQueueEvent" }

func (o removedObj) resolve(e *gqlExec, name string, _ map[string]any) (any, *gqlError) {
	switch name {
	case "id":
		return fmt.Sprintf("RMQE_%d", o.r.id), nil
	case "createdAt":
		return o.r.at, nil
	case "reason":
		return o.r.reason, nil
	case "beforeCommit":
		return commitObj{sha: o.r.before}, nil
	case "pullRequest":
		p := prObj{p: o.p}
		p.mergeable, p.mergeState = e.s.mergeView(o.p)
		return p, nil
	case "mergeQueue":
		return queueObj{base: o.p.Base}, nil
	}
	return nil, nil
}
