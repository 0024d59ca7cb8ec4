package lifecycletype

// ReviewOutcome is what a reviewer concluded.
type ReviewOutcome string

// The review outcomes.
const (
	ReviewApproved         ReviewOutcome = "approved"
	ReviewChangesRequested ReviewOutcome = "changes_requested"
	ReviewCommented        ReviewOutcome = "commented"
)

// Valid reports whether o is one of the review outcomes.
func (o ReviewOutcome) Valid() bool {
	switch o {
	case ReviewApproved, ReviewChangesRequested, ReviewCommented:
		return true
	}
	return false
}

// ReviewDecision is where the review of a submission stands.
type ReviewDecision string

// The review decisions.
const (
	DecisionApproved         ReviewDecision = "approved"
	DecisionChangesRequested ReviewDecision = "changes_requested"
	DecisionPending          ReviewDecision = "pending"
	DecisionNotRequired      ReviewDecision = "not_required"
)

// AllowsShip reports whether the decision lets a task ship.
func (d ReviewDecision) AllowsShip() bool {
	return d == DecisionApproved || d == DecisionNotRequired
}

// CodeReviewPolicy says what review a submission needs before it ships.
type CodeReviewPolicy string

// The code review policies.
const (
	// PolicyGitHubRules uses the host's own decision (branch protection);
	// see [ReviewDecider].
	PolicyGitHubRules CodeReviewPolicy = "github_rules"
	// PolicyAlwaysRequire needs an approval from a participant of the
	// submission's review route.
	PolicyAlwaysRequire CodeReviewPolicy = "always_require"
	// PolicyNeverRequire needs no review.
	PolicyNeverRequire CodeReviewPolicy = "never_require"
)

// Valid reports whether p is one of the policies.
func (p CodeReviewPolicy) Valid() bool {
	switch p {
	case PolicyGitHubRules, PolicyAlwaysRequire, PolicyNeverRequire:
		return true
	}
	return false
}
