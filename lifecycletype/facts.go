package lifecycletype

// Facts are what the Service knows of a task's latest submission from
// outside: the code host's pull request, the CI of its head commit and the
// host's review decision. They are stored with the task and changed in the
// transaction of the event they cause.
type Facts struct {
	// PRState is the pull request's state at the host: open, closed or
	// merged; empty before the first submission.
	PRState PullRequestState `json:"prState,omitempty"`
	// MergeCommitSHA is the commit the pull request was merged as.
	MergeCommitSHA string `json:"mergeCommitSha,omitempty"`
	// DismissesStaleReviews says the host stops counting approvals of
	// earlier heads when commits are pushed; see [PullRequest].
	DismissesStaleReviews bool `json:"dismissesStaleReviews,omitempty"`
	// CI is the overall CI state of the head commit, from every check
	// stored for it that counts.
	CI CIOverall `json:"ci,omitempty"`
	// CIPending says the CI provider expects checks it has not reported, or
	// could not be asked.
	CIPending bool `json:"ciPending,omitempty"`
	// CICheckedAt is when the CI provider was last asked, or nil.
	CICheckedAt *Timestamp `json:"ciCheckedAt,omitempty"`
	// CIFailedHead is the head commit whose failed CI was last announced
	// (task.ci_failed), or "": it is announced once per head commit.
	CIFailedHead string `json:"ciFailedHead,omitempty"`
	// HostDecision is the host's review decision under github_rules, or
	// empty when the host does not decide (the Service then decides from
	// the reviews posted to it).
	HostDecision ReviewDecision `json:"hostDecision,omitempty"`
	// Draft says the pull request is a draft, which is not shipped.
	Draft bool `json:"draft,omitempty"`
	// Mergeable says whether the host can merge the pull request as it
	// is, or is empty when the adapter does not say. Conflicting and
	// behind offer the agent rework (start), to rebase and submit again.
	Mergeable Mergeability `json:"mergeable,omitempty"`
	// BlockedReason is the host's reason, in words, when Mergeable is
	// blocked (see [PullRequest.BlockedReason]).
	BlockedReason string `json:"blockedReason,omitempty"`
	// StaleChecks are the checks the CI provider no longer waits for (see
	// [CIReport.Stale]).
	StaleChecks []StaleCheck `json:"staleChecks,omitempty"`
	// MergeRefusal is the host's refusal of the last merge tried, while
	// nothing it could depend on has changed since: ship is not offered
	// meanwhile. Nil when there is none.
	MergeRefusal *MergeRefusal `json:"mergeRefusal,omitempty"`
	// QueueRework says the merge queue sent the change back for rework,
	// and why; nil when it did not.
	QueueRework *QueueRework `json:"queueRework,omitempty"`
	// Hints counts the hints (webhooks) the host gave about the task. A
	// reading that began before the count moved may have missed what the
	// hint announced: the task is then read again in full.
	Hints uint64 `json:"hints,omitempty"`
	// ReadStartedAt is when the reading whose facts are stored began, or
	// nil. The facts of a reading that began earlier are older than them
	// and are not applied.
	ReadStartedAt *Timestamp `json:"readStartedAt,omitempty"`
	// HostVersion is the Version of the last [Reading] of a
	// [BatchReader], given back to it at the next reading.
	HostVersion string `json:"hostVersion,omitempty"`
	// CheckedAt is when the host was last read for the task, or nil.
	CheckedAt *Timestamp `json:"checkedAt,omitempty"`
}

// MergeRefusal is a code host's refusal of a merge for a reason of its own
// (a requirement the lifecycle does not model). It stands until a fact it
// could depend on changes or the host hints at a change (a webhook about
// the pull request).
type MergeRefusal struct {
	// Message is the host's own words.
	Message string `json:"message"`
	// Facts is a digest of the facts it was refused under (mergeFacts).
	Facts string `json:"facts"`
	// Hints is Facts.Hints when it was refused.
	Hints uint64 `json:"hints"`
	// At is when it was refused.
	At Timestamp `json:"at"`
}

// The reasons of rework, as [Task.ReworkReason] gives them and task.updated
// events carry them (reworkReason).
const (
	// ReworkChangesRequested: a review asked for changes.
	ReworkChangesRequested = "changes_requested"
	// ReworkMergeConflict: the pull request conflicts with its base.
	ReworkMergeConflict = "merge_conflict"
	// ReworkBehindBase: the base moved on and the host requires the pull
	// request to be up to date with it.
	ReworkBehindBase = "behind_base"
	// ReworkCIFailed: CI of the pull request's head commit failed; the
	// agent fixes it and submits again. (The merge queue's own failure,
	// with the change tested alone on the base, is "checks_failed", the
	// reason of its [QueueRework].)
	ReworkCIFailed = "ci_failed"
)

// ReworkReason says why a task in review offers start (rework): one of
// the Rework constants, or "" when it offers none.
func (t *Task) ReworkReason() string {
	// The table offers start in review only for rework, and never while
	// the task ships; the adapters and CI do not decide it.
	// TestReworkReasonAgreesWithTheTable holds the two together.
	if t.Status != StatusInReview || t.ActiveShipID != "" {
		return ""
	}
	return ReworkOf(t)
}

// ciOf returns the overall CI state of t's head commit as stored.
func ciOf(t *Task) CIOverall {
	if t.HeadSHA == nil || t.Facts.CI == "" {
		return CINone
	}
	return t.Facts.CI
}

// decisionOf returns the review decision that counts for t: not_required
// under never_require; the host's under github_rules when its adapter
// decides; else the one reached by the reviews posted to the Service.
func decisionOf(t *Task) ReviewDecision {
	switch {
	case t.ReviewPolicy == PolicyNeverRequire:
		return DecisionNotRequired
	case t.ReviewPolicy == PolicyGitHubRules && t.Facts.HostDecision != "":
		return t.Facts.HostDecision
	case t.ReviewDecision == "":
		return DecisionPending
	}
	return t.ReviewDecision
}

// ReworkOf returns why the agent may start t again, whatever its status:
// the latest decisive review posted asked for changes, the host's decision
// is changes_requested, the merge queue sent it back, the pull request
// must be rebased to merge, or CI of its head commit failed. It is ""
// when none holds.
func ReworkOf(t *Task) string {
	switch {
	case t.ReworkRequested || (t.ReviewPolicy == PolicyGitHubRules && t.Facts.HostDecision == DecisionChangesRequested):
		return ReworkChangesRequested
	case t.Facts.QueueRework != nil:
		return t.Facts.QueueRework.Reason
	case t.Facts.Mergeable == MergeabilityConflicting:
		return ReworkMergeConflict
	case t.Facts.Mergeable == MergeabilityBehind:
		return ReworkBehindBase
	case ciOf(t) == CIFailed:
		return ReworkCIFailed
	}
	return ""
}
