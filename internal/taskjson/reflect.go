package taskjson

import (
	"encoding/json"
	"fmt"

	"github.com/tasklifecycle/lifecycle/lifecycletype"
)

// CompactLeftOut are the members a compact task envelope leaves out: the
// long free text and the opaque routing explanation.
var CompactLeftOut = [...]string{"description", "routingReason"}

// Envelope is the body of every answer with one task, as encoding/json
// encodes it.
type Envelope struct {
	// Data is the task: a *lifecycletype.Task, or the map of the members
	// a compact envelope keeps.
	Data any `json:"data"`
	// AvailableActions are the task's, repeated beside it.
	AvailableActions []lifecycletype.Action `json:"availableActions"`
	// Meta says which token budget the envelope was cut for.
	Meta Meta `json:"meta"`
}

// Meta is the meta member of an [Envelope].
type Meta struct {
	// TokenBudgetHint is "standard" or "compact".
	TokenBudgetHint string `json:"tokenBudgetHint"`
	// TruncatedFields are the members of the task left out.
	TruncatedFields []string `json:"truncatedFields"`
}

// StandardEnvelope is the whole envelope of t.
func StandardEnvelope(t *lifecycletype.Task) Envelope {
	return Envelope{Data: t, AvailableActions: t.AvailableActions, Meta: Meta{TokenBudgetHint: "standard", TruncatedFields: []string{}}}
}

// ReflectEnvelope returns the envelope of t, compact or not, for
// encoding/json: the reference of [Writer.AppendEnvelope], and its
// fallback. The compact form's task is encoded by json.Marshal to leave
// members out; an error is that encoding's.
func ReflectEnvelope(t *lifecycletype.Task, compact bool) (Envelope, error) {
	env := StandardEnvelope(t)
	if !compact {
		return env, nil
	}
	raw, err := json.Marshal(t)
	if err != nil {
		return Envelope{}, fmt.Errorf("encode task: %w", err)
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil {
		return Envelope{}, fmt.Errorf("encode task: %w", err)
	}
	for _, f := range CompactLeftOut {
		delete(members, f)
	}
	env.Data = members
	env.Meta = Meta{TokenBudgetHint: "compact", TruncatedFields: CompactLeftOut[:]}
	return env, nil
}

// ReflectList returns a page of tasks, with the cursor of the next page
// ("" on the last), for encoding/json: the
// reference of [Writer.AppendList], and its fallback.
func ReflectList(tasks []lifecycletype.Task, next string) any {
	var cursor *string
	if next != "" {
		cursor = &next
	}
	return struct {
		Data       []lifecycletype.Task `json:"data"`
		NextCursor *string              `json:"nextCursor"`
	}{tasks, cursor}
}
