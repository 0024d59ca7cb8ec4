package lifecycle

import (
	"github.com/tasklifecycle/lifecycle/internal/httpapi"
	"github.com/tasklifecycle/lifecycle/internal/jsonscan"
	"github.com/tasklifecycle/lifecycle/lifecycletype"
)

// maxEventTypeEntries bounds the eventTypes of a subscription: there are
// seven event types.
const maxEventTypeEntries = 7

// arrayLimits are the most entries of the arrays of request bodies, by
// JSON path without indices; the validation of each request checks the
// same limits, with the same words, on what it decodes.
var arrayLimits = map[string]int{
	"checks":                     maxChecks,
	"checks.failure.annotations": maxFailureAnnotations,
	"pullRequest.reviewers":      maxReviewers,
	"labels":                     maxLabels,
	"acceptanceCriteria":         maxCriteria,
	"dependsOn":                  maxDependencies,
	"eventTypes":                 maxEventTypeEntries,
	"filters.taskIds":            maxFilterEntries,
	"filters.projects":           maxFilterEntries,
	"scopes":                     len(lifecycletype.Scopes()),
}

// scanLimits are the limits every request body is checked against, in
// one pass over its bytes before it is decoded (see jsonscan.Decode), so
// that no body makes decoding or validation do more work than its size
// allows.
var scanLimits = jsonscan.Limits{
	MaxDepth: httpapi.MaxBodyDepth,
	MaxArray: httpapi.MaxArrayEntries, // no array of the API takes more
	Arrays:   arrayLimits,
	MinArray: maxEventTypeEntries, // the smallest of arrayLimits
}
