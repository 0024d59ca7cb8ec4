package lifecycle

// ReviewOutcome is what a reviewer concluded.
type ReviewOutcome string

// The review outcomes.
const (
	ReviewApproved         ReviewOutcome = "approved"
	ReviewChangesRequested ReviewOutcome = "changes_requested"
	ReviewCommented        ReviewOutcome = "commented"
)
