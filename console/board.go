package console

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"

	"github.com/tasklifecycle/lifecycle"
)

// card is a task as the board shows it.
type card struct {
	ID               string                   `json:"id"`
	Identifier       string                   `json:"identifier"`
	Title            string                   `json:"title"`
	Status           lifecycle.Status         `json:"status"`
	Priority         lifecycle.Priority       `json:"priority"`
	Project          *string                  `json:"project"`
	Assignee         *lifecycle.Agent         `json:"assignee"`
	PRURL            *string                  `json:"prUrl"`
	PRNumber         *int                     `json:"prNumber"`
	HeadSHA          *string                  `json:"headSha"`
	CI               lifecycle.CIOverall      `json:"ci"`
	Review           lifecycle.ReviewDecision `json:"review"`
	Shipping         bool                     `json:"shipping"`
	Blocker          *string                  `json:"blocker"`
	AvailableActions []lifecycle.Action       `json:"availableActions"`
	UpdatedAt        lifecycle.Timestamp      `json:"updatedAt"`
	Version          int64                    `json:"version"`
	// Stalled is the task's stalled member as the API serves it: null, or
	// {"since", "lastActivityAt"} while a watchdog finds it stalled.
	Stalled json.RawMessage `json:"stalled"`
	// WaitingOn is the task's waitingOn member as the API serves it: the
	// IDs of the tasks it depends on that are not done, [] when none.
	WaitingOn json.RawMessage `json:"waitingOn"`
}

// cardOf returns the card of t, read with its available actions.
func cardOf(t *lifecycle.Task) card {
	c := card{
		ID: t.ID, Identifier: t.Identifier, Title: t.Title, Status: t.Status, Priority: t.Priority,
		Project: t.Context.Project, Assignee: t.Assignee, PRURL: t.PRURL, PRNumber: t.PRNumber, HeadSHA: t.HeadSHA,
		CI: t.CI(), Review: t.Decision(), Shipping: t.Shipping(), AvailableActions: nonNil(t.AvailableActions),
		UpdatedAt: t.UpdatedAt, Version: t.Version,
	}
	if t.Blocker != nil {
		c.Blocker = &t.Blocker.Reason
	}
	c.Stalled = cardMembers.get(t, "stalled", "null")
	c.WaitingOn = cardMembers.get(t, "waitingOn", "[]")
	return c
}

// cardMembers are the members of a task's API encoding that a card
// carries as the API serves them.
var cardMembers = findMembers(reflect.TypeFor[lifecycle.Task](), "stalled", "waitingOn")

// members finds, by their JSON names, fields of a struct type that a card
// serves as they are encoded: a card copies a Task's stalled and waitingOn
// this way, so that it carries what GET /tasks/{id} serves whichever
// release of the Service defines them, and null or [] where none does. It
// is built once and only read.
type members struct {
	index map[string][]int // field index by JSON name
}

// findMembers returns the members of struct type typ named names; a name
// no exported field of typ has is left out.
func findMembers(typ reflect.Type, names ...string) members {
	m := members{index: make(map[string][]int)}
	want := make(map[string]bool, len(names))
	for _, n := range names {
		want[n] = true
	}
	for _, f := range reflect.VisibleFields(typ) {
		tag := f.Tag.Get("json")
		if !f.IsExported() || f.Anonymous || tag == "-" {
			continue
		}
		if name, _, _ := strings.Cut(tag, ","); want[name] {
			m.index[name] = f.Index
		}
	}
	return m
}

// get returns member name of *v, a pointer to a value of the struct type
// m was found in, as encoding/json encodes it; or empty when the type has
// no such member, or its value is nil or an empty slice or map, encodes
// as null or cannot be encoded.
func (m members) get(v any, name, empty string) json.RawMessage {
	i, ok := m.index[name]
	if !ok {
		return json.RawMessage(empty)
	}
	f := reflect.ValueOf(v).Elem().FieldByIndex(i)
	switch f.Kind() {
	case reflect.Slice, reflect.Map:
		if f.Len() == 0 {
			return json.RawMessage(empty)
		}
	case reflect.Pointer, reflect.Interface:
		if f.IsNil() {
			return json.RawMessage(empty)
		}
	}
	raw, err := json.Marshal(f.Interface())
	if err != nil || string(raw) == "null" {
		return json.RawMessage(empty)
	}
	return raw
}

// maxBoardIDs is the most tasks GET board?id= asks for at once.
const maxBoardIDs = 100

// boardPage is how many tasks the board reads at once.
const boardPage = 200

// handleBoard answers GET board: every task as a card, with cursor, the
// event the board is current through (null when there is none), from
// which the page opens the event stream; or, with id=... (up to 100), the
// cards of those tasks only.
func (c *Console) handleBoard(w http.ResponseWriter, r *http.Request) error {
	if _, _, err := c.signedIn(r, lifecycle.ScopeTasksRead); err != nil {
		return err
	}
	ctx := r.Context()
	cards := []card{}
	if ids := r.URL.Query()["id"]; len(ids) > 0 {
		if len(ids) > maxBoardIDs {
			return &lifecycle.ValidationError{Fields: []lifecycle.FieldError{{Field: "id", Reason: fmt.Sprintf("at most %d task IDs at once", maxBoardIDs)}}}
		}
		for _, taskID := range ids {
			t, err := c.svc.Task(ctx, taskID)
			if errors.Is(err, lifecycle.ErrNotFound) {
				continue // the page drops what is gone
			}
			if err != nil {
				return err
			}
			cards = append(cards, cardOf(&t))
		}
		lifecycle.WriteJSON(w, http.StatusOK, struct {
			Data []card `json:"data"`
		}{cards})
		return nil
	}
	// The cursor is read first: every change after it reaches the page
	// through the stream, whether or not the listing saw it.
	last, err := c.svc.LastEventID(ctx)
	if err != nil {
		return err
	}
	var cursor *string
	if last != "" {
		cursor = &last
	}
	for next := ""; ; {
		page, err := c.svc.ListTasks(ctx, lifecycle.ListTasksParams{Limit: boardPage, Cursor: next})
		if err != nil {
			return err
		}
		for i := range page.Tasks {
			cards = append(cards, cardOf(&page.Tasks[i]))
		}
		if next = page.NextCursor; next == "" {
			break
		}
	}
	lifecycle.WriteJSON(w, http.StatusOK, struct {
		Data   []card  `json:"data"`
		Cursor *string `json:"cursor"`
	}{cards, cursor})
	return nil
}

// timelineSubmission is a submission on a task's timeline, with what the
// agent said and the reviews it got.
type timelineSubmission struct {
	lifecycle.Submission
	Summary string             `json:"summary"`
	Notes   string             `json:"notes"`
	Actor   lifecycle.Actor    `json:"actor"`
	Reviews []lifecycle.Review `json:"reviews"`
}

// timeline is the body of GET timeline/{id}.
type timeline struct {
	Task           lifecycle.Task            `json:"task"`
	Card           card                      `json:"card"`
	Events         []lifecycle.Event         `json:"events"`
	Submissions    []timelineSubmission      `json:"submissions"`
	CI             lifecycle.CIStatus        `json:"ci"`
	ShipOperations []lifecycle.ShipOperation `json:"shipOperations"`
}

// maxTimelineEvents bounds the events of one timeline.
const maxTimelineEvents = 10000

// handleTimeline answers GET timeline/{id}: the task, its card, its events
// still stored (in taskVersion order, as the stream sends them), its
// submissions with their reviews, the CI of its head and its ship
// operations.
func (c *Console) handleTimeline(w http.ResponseWriter, r *http.Request) error {
	if _, _, err := c.signedIn(r, lifecycle.ScopeTasksRead, lifecycle.ScopeEventsRead); err != nil {
		return err
	}
	ctx := r.Context()
	t, err := c.svc.Task(ctx, r.PathValue("id"))
	if err != nil {
		return err
	}
	events, err := c.svc.TaskEvents(ctx, t.ID, maxTimelineEvents)
	if err != nil {
		return err
	}
	subs, err := c.svc.Submissions(ctx, t.ID)
	if err != nil {
		return err
	}
	submissions := make([]timelineSubmission, len(subs))
	for i, sub := range subs {
		reviews, err := c.svc.Reviews(ctx, sub.SubmissionID)
		if err != nil {
			return err
		}
		sub.AvailableActions = nil
		submissions[i] = timelineSubmission{Submission: sub, Summary: sub.Summary, Notes: sub.Notes, Actor: sub.Actor, Reviews: reviews}
	}
	ci, _, err := c.svc.CIStatus(ctx, t.ID)
	if err != nil {
		return err
	}
	ops, err := c.svc.ShipOperations(ctx, t.ID)
	if err != nil {
		return err
	}
	for i := range ops {
		ops[i].AvailableActions = nil
	}
	lifecycle.WriteJSON(w, http.StatusOK, struct {
		Data timeline `json:"data"`
	}{timeline{Task: t, Card: cardOf(&t), Events: events, Submissions: submissions, CI: ci, ShipOperations: ops}})
	return nil
}
