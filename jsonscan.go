package lifecycle

import "github.com/tasklifecycle/lifecycle/internal/jsonscan"

// Limits that hold for every request body, checked in one pass over its
// bytes before it is decoded, so that no body makes decoding or validation
// do more work than its size allows.
const (
	// maxBodyDepth is how deeply a body may nest objects and arrays; no
	// request of the API needs more than four levels.
	maxBodyDepth = 32
	// maxArrayEntries bounds every array of a request body that
	// arrayLimits does not name: no array of the API takes more.
	maxArrayEntries = 100
	// maxEventTypeEntries bounds the eventTypes of a subscription: there
	// are four event types.
	maxEventTypeEntries = 4
)

// arrayLimits are the most entries of the arrays of request bodies, by
// JSON path without indices; the validation of each request checks the
// same limits, with the same words, on what it decodes.
var arrayLimits = map[string]int{
	"checks":                maxChecks,
	"pullRequest.reviewers": maxReviewers,
	"labels":                maxLabels,
	"acceptanceCriteria":    maxCriteria,
	"eventTypes":            maxEventTypeEntries,
	"filters.taskIds":       maxFilterEntries,
	"filters.projects":      maxFilterEntries,
	"scopes":                len(allScopes),
}

// scanLimits are the limits scanBody enforces.
var scanLimits = jsonscan.Limits{
	MaxDepth: maxBodyDepth,
	MaxArray: maxArrayEntries,
	Arrays:   arrayLimits,
	MinArray: maxEventTypeEntries, // the smallest of arrayLimits
}

// scanBody checks a request body in one pass, in time linear in its size:
// it refuses arrays longer than their limit and nesting deeper than
// maxBodyDepth (hard errors: the body is not decoded), and strings holding
// invalid UTF-8 (raw, or as unpaired surrogate escapes) or control
// characters other than tab and newline (soft errors: the body can still be
// decoded and checked, so that one answer lists every problem). Malformed
// JSON stops the scan without an error; the decoder reports it.
func scanBody(raw []byte) (fields *ValidationError, hard bool) {
	var v validator
	hard = jsonscan.Scan(raw, &scanLimits, v.add)
	if len(v.fields) == 0 {
		return nil, false
	}
	return &ValidationError{Fields: v.fields, Truncated: v.truncated}, hard
}
