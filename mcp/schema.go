package mcp

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/tasklifecycle/lifecycle"
)

// The values of the API's enumerations that the schemas list, the same as
// docs/openapi.yaml's (TestEnumsAreTheAPIs checks them against it).
var (
	statusValues = []any{"todo", "in_progress", "in_review", "blocked", "done", "cancelled"}
	actionValues = []any{"start", "submit", "ship", "view_ci_status", "view_review_feedback", "resolve_blocker"}
	eventValues  = []any{"task.updated", "task.reviewed", "task.shipped", "task.awaiting_user", "task.merge_queue", "task.stalled", "task.ci_failed"}
)

// typeSchemas are the schemas of the lifecycle's types whose JSON is not
// their Go structure, or whose values are a closed list.
var typeSchemas = map[reflect.Type]*jsonschema.Schema{
	reflect.TypeFor[lifecycle.Timestamp](): {Type: "string", Format: "date-time", Description: "RFC 3339 time in UTC with milliseconds"},
	reflect.TypeFor[json.RawMessage]():     {Description: "any JSON value"},
	reflect.TypeFor[lifecycle.Status]():    {Type: "string", Enum: statusValues},
	reflect.TypeFor[lifecycle.Action]():    {Type: "string", Enum: actionValues},
	reflect.TypeFor[lifecycle.EventType](): {Type: "string", Enum: eventValues},
}

// schemaOf returns the JSON schema of T's JSON encoding.
func schemaOf[T any]() *jsonschema.Schema {
	s, err := jsonschema.ForType(reflect.TypeFor[T](), &jsonschema.ForOptions{TypeSchemas: typeSchemas})
	if err != nil {
		panic(fmt.Sprintf("mcp: schema of %s: %v", reflect.TypeFor[T](), err))
	}
	return s
}

// property returns the schema of the member name of object schema s,
// which must have it.
func property(s *jsonschema.Schema, name string) *jsonschema.Schema {
	p, ok := s.Properties[name]
	if !ok {
		panic(fmt.Sprintf("mcp: the schema has no member %q", name))
	}
	return p
}

// optional makes the members names of object schema s optional.
func optional(s *jsonschema.Schema, names ...string) {
	s.Required = slices.DeleteFunc(s.Required, func(r string) bool { return slices.Contains(names, r) })
}

// compactLeftOut are the members of a task that a compact answer leaves
// out, as GET /tasks/{id}?tokenBudget=compact does.
var compactLeftOut = []string{"description", "routingReason"}

// taskSchema is the schema of a task, compact or in full.
func taskSchema() *jsonschema.Schema {
	s := schemaOf[lifecycle.Task]()
	optional(s, compactLeftOut...)
	return s
}

// The answers of the tools, for their schemas: what they encode is built
// by the tools (see tools.go), of the same shape.
type (
	taskOut struct {
		Data             lifecycle.Task     `json:"data" jsonschema:"the task; a compact answer leaves out the members meta.truncatedFields names"`
		AvailableActions []lifecycle.Action `json:"availableActions" jsonschema:"the only next steps the server accepts for the task"`
		Meta             taskMeta           `json:"meta"`
	}
	taskMeta struct {
		TokenBudgetHint string   `json:"tokenBudgetHint" jsonschema:"compact or standard"`
		TruncatedFields []string `json:"truncatedFields" jsonschema:"the members of the task this answer leaves out; get_task with tokenBudget standard has them"`
	}
	listOut struct {
		Tasks           []lifecycle.Task `json:"tasks" jsonschema:"the page of tasks, in creation order, compact"`
		NextCursor      *string          `json:"nextCursor" jsonschema:"pass as cursor for the next page; null on the last"`
		TruncatedFields []string         `json:"truncatedFields" jsonschema:"the members left out of each task"`
	}
	submissionOut struct {
		Data             lifecycle.Submission `json:"data"`
		AvailableActions []lifecycle.Action   `json:"availableActions"`
	}
	ciOut struct {
		Data             lifecycle.CIStatus `json:"data"`
		AvailableActions []lifecycle.Action `json:"availableActions"`
	}
	reviewOut struct {
		Data             lifecycle.ReviewFeedback `json:"data"`
		AvailableActions []lifecycle.Action       `json:"availableActions"`
	}
	shipOut struct {
		Data             lifecycle.ShipOperation `json:"data"`
		AvailableActions []lifecycle.Action      `json:"availableActions"`
	}
	mergeQueueStatusOut struct {
		TaskID    string                         `json:"taskId"`
		InQueue   bool                           `json:"inQueue" jsonschema:"true while the task's change is in a merge queue, waiting to land"`
		Queue     *queueSummary                  `json:"queue" jsonschema:"the merge queue the change is in; null when it is in none"`
		Entry     *lifecycle.MergeQueueEntry     `json:"entry" jsonschema:"the change's entry in the queue: its position in landing order (1 lands first), its state (waiting, testing, bisecting or landing), the candidate it is tested in (candidateId, 0 while it waits for one) and when it entered; null when it is in no queue"`
		Candidate *lifecycle.MergeQueueCandidate `json:"candidate" jsonschema:"the candidate commit the change is tested in, with its CI checks and their links; null while it waits for one or is in no queue"`
		// LastShipOperation is the task's last ship operation when the
		// change is in no queue.
		LastShipOperation *lifecycle.ShipOperation `json:"lastShipOperation" jsonschema:"when the change is in no queue: the task's last ship operation, whose status, wait and error say whether it landed (succeeded, with mergeCommitSha), was sent back (failed, error.code merge_conflict or checks_failed) or failed otherwise; null while the change is queued or when the task was never shipped"`
		ReworkReason      *string                  `json:"reworkReason" jsonschema:"why the task offers start for rework, when it does: merge_conflict (rebase on the base branch and submit again), checks_failed (the merge queue's CI failed on the change, tested apart from the changes ahead of it: fix it and submit again), ci_failed (CI of the pull request's head failed: fix it and submit again), changes_requested or behind_base; null when it offers none"`
		Rework            *lifecycle.QueueRework   `json:"rework" jsonschema:"why the merge queue sent the change back, with the failed checks and their links and the candidate commit they ran on; null when it did not, or once the task is submitted again"`
		AvailableActions  []lifecycle.Action       `json:"availableActions" jsonschema:"the only next steps the server accepts for the task"`
	}
	queueSummary struct {
		ID          string  `json:"id" jsonschema:"the queue's ID, mq_..."`
		Repository  string  `json:"repository" jsonschema:"owner/repo"`
		Base        string  `json:"base" jsonschema:"the base branch the queue lands on"`
		BaseSHA     string  `json:"baseSha" jsonschema:"the base's commit as the queue last knew it"`
		Paused      bool    `json:"paused" jsonschema:"true while nothing is built or landed; the change waits"`
		PauseReason *string `json:"pauseReason" jsonschema:"who paused the queue and why; null when it is not paused"`
		Entries     int     `json:"entries" jsonschema:"how many changes are in the queue"`
	}
	waitOut struct {
		Event    *lifecycle.Event `json:"event" jsonschema:"the task's event, as the event stream and webhooks carry it; null when none came in time"`
		TimedOut bool             `json:"timedOut" jsonschema:"true when no event came before timeoutSeconds"`
	}
)

// outputSchemas returns the schema of each answer.
func taskOutSchema() *jsonschema.Schema {
	s := schemaOf[taskOut]()
	s.Properties["data"] = taskSchema()
	property(property(s, "meta"), "tokenBudgetHint").Enum = []any{"standard", "compact"}
	return s
}

func listOutSchema() *jsonschema.Schema {
	s := schemaOf[listOut]()
	property(s, "tasks").Items = taskSchema()
	return s
}

// setRange bounds the integer member name of s and gives its default.
func setRange(s *jsonschema.Schema, name string, lo, hi float64, def any) {
	p := property(s, name)
	p.Minimum, p.Maximum = &lo, &hi
	if def != nil {
		p.Default, _ = json.Marshal(def)
	}
}

// setEnum lists the values of member name of s, and its default.
func setEnum(s *jsonschema.Schema, name string, def any, values ...any) {
	p := property(s, name)
	if p.Items != nil {
		p = p.Items
	}
	p.Enum = values
	if def != nil {
		property(s, name).Default, _ = json.Marshal(def)
	}
}

// idempotencyKeyPattern is the form of an idempotency key: 8 to 128
// visible ASCII characters.
const idempotencyKeyPattern = "^[\\x21-\\x7e]{8,128}$"

// keyDescription describes the idempotencyKey member of mutating tools.
const keyDescription = "optional: 8 to 128 visible ASCII characters. Without it the server derives a key from your " +
	"credentials, the tool and these arguments: a retry of a call whose answer you lost answers as the first call did " +
	"and acts once, while the same call made again once the task has moved on (a second blocker, a start for rework) acts again"

// setKey sets the schema of the idempotencyKey member of s.
func setKey(s *jsonschema.Schema) {
	p := property(s, "idempotencyKey")
	p.Pattern = idempotencyKeyPattern
	p.Description = keyDescription
}

// taskIDDescription describes a taskId member.
const taskIDDescription = "the task's ID, tsk_ followed by letters and digits (the id member of a task, not its identifier)"
