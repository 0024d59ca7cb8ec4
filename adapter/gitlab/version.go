package gitlab

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go"

	"github.com/tasklifecycle/lifecycle"
)

// maxVersion bounds a Version, as lifecycle.Reading does.
const maxVersion = 1000

// version is what a Reading's Version records of a merge request: what
// its last full reading read of it that a sweep compares with what GitLab
// lists (see sweep), and since when the sweep's list of pipelines must
// look.
type version struct {
	project, iid int64
	// head is the merge request's head commit, updated its updated_at,
	// and status its detailed_merge_status (its merge_status when GitLab,
	// before 15.6, gives none), as read.
	head    string
	updated time.Time
	status  string
	// state is its state (opened, closed, merged, locked).
	state string
	// conflicts is its has_conflicts, which a detailed_merge_status of
	// another blocker hides.
	conflicts bool
	// pending says GitLab had not worked out its mergeability yet;
	// pendingSince is when a sweep first found it still so (zero before).
	pending      bool
	pendingSince time.Time
	// pipeline, pipelineStatus and pipelineUpdated are its head
	// pipeline's ID (0 when none), status and updated_at.
	pipeline        int64
	pipelineStatus  string
	pipelineUpdated time.Time
	// reviews is a digest of its approvals and reviewers' states;
	// reviewers says it had reviewers.
	reviews   string
	reviewers bool
	// facts is the digest of its reviewFacts, which a sweep compares
	// with what GraphQL shows of it.
	facts string
	// window says it was read within ThrottledTouch's minute after its
	// updated_at: a review made known through a system note since may
	// have left updated_at where it was, so a sweep reads its reviews
	// through GraphQL until that minute (and touchSlop) is over.
	window bool
	// at is when the sweep's list of pipelines must look from.
	at time.Time
	// digest is a digest of everything the reading showed.
	digest string
}

// String encodes v as a query string.
func (v version) String() string {
	q := url.Values{"v": {"2"}, "p": {strconv.FormatInt(v.project, 10)}, "iid": {strconv.FormatInt(v.iid, 10)}, "h": {v.head},
		"u": {millis(v.updated)}, "m": {v.status}, "s": {v.state}, "hp": {strconv.FormatInt(v.pipeline, 10)}, "hs": {v.pipelineStatus},
		"hu": {millis(v.pipelineUpdated)}, "r": {v.reviews}, "f": {v.facts}, "at": {strconv.FormatInt(v.at.Unix(), 10)}, "d": {v.digest}}
	if v.pending {
		q.Set("q", "1")
	}
	if !v.pendingSince.IsZero() {
		q.Set("qs", strconv.FormatInt(v.pendingSince.Unix(), 10))
	}
	if v.reviewers {
		q.Set("rr", "1")
	}
	if v.conflicts {
		q.Set("c", "1")
	}
	if v.window {
		q.Set("w", "1")
	}
	s := q.Encode()
	if len(s) > maxVersion {
		// A detailed_merge_status GitLab may add, far longer than any
		// it has: the sweep then reads the merge request in full.
		q.Set("m", "?")
		s = q.Encode()
	}
	return s
}

// millis formats t in Unix milliseconds, "" when zero.
func millis(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return strconv.FormatInt(t.UnixMilli(), 10)
}

// parseVersion reads a Version of this adapter; ok is false for anything
// else, a Version of an earlier form included.
func parseVersion(s string) (v version, ok bool) {
	q, err := url.ParseQuery(s)
	if err != nil || q.Get("v") != "2" {
		return version{}, false
	}
	num := func(key string) (int64, bool) {
		if q.Get(key) == "" {
			return 0, true
		}
		n, err := strconv.ParseInt(q.Get(key), 10, 64)
		return n, err == nil
	}
	ms := func(key string) (time.Time, bool) {
		n, ok := num(key)
		if !ok || n == 0 {
			return time.Time{}, ok
		}
		return time.UnixMilli(n).UTC(), true
	}
	sec := func(key string) (time.Time, bool) {
		n, ok := num(key)
		if !ok || n == 0 {
			return time.Time{}, ok
		}
		return time.Unix(n, 0).UTC(), true
	}
	var oks [8]bool
	v.project, oks[0] = num("p")
	v.iid, oks[1] = num("iid")
	v.updated, oks[2] = ms("u")
	v.pipeline, oks[3] = num("hp")
	v.pipelineUpdated, oks[4] = ms("hu")
	v.at, oks[5] = sec("at")
	v.pendingSince, oks[6] = sec("qs")
	oks[7] = v.iid > 0 && !v.at.IsZero() && !v.updated.IsZero()
	for _, ok := range oks {
		if !ok {
			return version{}, false
		}
	}
	v.head, v.status, v.state, v.pipelineStatus = strings.ToLower(q.Get("h")), q.Get("m"), q.Get("s"), q.Get("hs")
	v.reviews, v.facts, v.digest = q.Get("r"), q.Get("f"), q.Get("d")
	v.pending, v.reviewers, v.window, v.conflicts = q.Get("q") != "", q.Get("rr") != "", q.Get("w") != "", q.Get("c") != ""
	return v, true
}

// current reports whether a sweep may judge r by v: v is of r's merge
// request in project s, and of the head the Service holds.
func (v version) current(s *settings, r lifecycle.ReadRequest) bool {
	return v.project == s.id && v.iid == int64(r.PullRequest.Number) &&
		(r.HeadSHA == "" || strings.EqualFold(r.HeadSHA, v.head)) &&
		r.PullRequest.Owner == s.owner && r.PullRequest.Repo == s.repo
}

// listedMergeRequest is a merge request as GitLab lists it, with its
// merge_status, which client-go no longer decodes (GitLab deprecated it in
// 15.6 for detailed_merge_status, but still gives it, and it alone tells
// cannot_be_merged_recheck).
type listedMergeRequest struct {
	gl.BasicMergeRequest
	MergeStatus string `json:"merge_status"`
}

// mergePending reports whether GitLab has not worked out a merge
// request's mergeability yet, from its detailed_merge_status (unchecked,
// checking, preparing, approvals_syncing) or its merge_status ("" when
// not read): unchecked, checking, preparing, and
// cannot_be_merged_recheck, which GitLab gives a merge request that could
// not be merged once its branches moved, and which still shows a
// conflict until it is checked again.
func mergePending(detailed, mergeStatus string) bool {
	switch detailed {
	case "unchecked", "checking", "preparing", "approvals_syncing":
		return true
	}
	switch mergeStatus {
	case "unchecked", "checking", "preparing", "cannot_be_merged_recheck", "cannot_be_merged_rechecking":
		return true
	}
	return false
}

// digest returns a short digest of v's JSON encoding.
func digest(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}
