// Package storetest is the conformance suite of [lifecycle.Store]. Every
// Store implementation runs it from its own tests:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, storetest.Harness{Open: ..., Reopen: ...})
//	}
//
// It tests every method of [lifecycle.Store] and [lifecycle.Tx], and the
// optional interfaces a Store implements ([lifecycle.InstanceLeaser],
// [lifecycle.Notifier], [lifecycle.RelaxedUpdater],
// [lifecycle.FailureClassifier], [lifecycle.SecretResealer],
// [lifecycletype.MergeQueueStore], [lifecycle.StallMarker], [lifecycletype.CIFailureStore]); the tests of one it does not
// implement are skipped, saying so.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/tasklifecycle/lifecycle"
)

// Harness tells the suite how to make stores.
type Harness struct {
	// Open returns a new, empty store. The suite closes it.
	Open func(t *testing.T) lifecycle.Store
	// Reopen closes s and opens the same storage again. When nil, the
	// tests that need it are skipped.
	Reopen func(t *testing.T, s lifecycle.Store) lifecycle.Store
}

// Run runs every conformance test against stores made by h, each subtest
// on a fresh store.
func Run(t *testing.T, h Harness) {
	tests := []struct {
		name string
		fn   func(t *testing.T, h Harness)
	}{
		{"TaskRoundTrip", testTaskRoundTrip},
		{"TaskNotFound", testTaskNotFound},
		{"TaskConflicts", testTaskConflicts},
		{"UpdateTask", testUpdateTask},
		{"UpdateRollsBack", testUpdateRollsBack},
		{"ListTasksPagination", testListTasksPagination},
		{"ListTasksFilters", testListTasksFilters},
		{"DependencyEdges", testDependencyEdges},
		{"ListTasksReady", testListTasksReady},
		{"EventsAppendAndRead", testEventsAppendAndRead},
		{"EventsFilters", testEventsFilters},
		{"EventsPruneKeepsSequence", testEventsPruneKeepsSequence},
		{"Prune", testPrune},
		{"APIKeys", testAPIKeys},
		{"Submissions", testSubmissions},
		{"SubmissionsOfTask", testSubmissionsOfTask},
		{"Reviews", testReviews},
		{"Checks", testChecks},
		{"IdempotencyRecords", testIdempotencyRecords},
		{"ConcurrentIdempotencyInserts", testConcurrentIdempotencyInserts},
		{"ShipOperations", testShipOperations},
		{"ShipOperationsOfTask", testShipOperationsOfTask},
		{"ClaimShipOperations", testClaimShipOperations},
		{"InstanceLeaser", testInstanceLeaser},
		{"Notifier", testNotifier},
		{"ShipQueueCounter", testShipQueueCounter},
		{"MergeQueues", testMergeQueues},
		{"ConcurrentMergeQueueUpdates", testConcurrentMergeQueueUpdates},
		{"ConcurrentMergeQueueCreates", testConcurrentMergeQueueCreates},
		{"CIFailures", testCIFailures},
		{"ConcurrentClaimCIFailures", testConcurrentClaimCIFailures},
		{"TaskRevisioner", testTaskRevisioner},
		{"RelaxedUpdater", testRelaxedUpdater},
		{"FailureClassifier", testFailureClassifier},
		{"ConsoleSessions", testConsoleSessionStore},
		{"HistoryClosed", testHistoryClosed},
		{"HostFactsRoundTrip", testHostFactsRoundTrip},
		{"ReviewHostFields", testReviewHostFields},
		{"ShipLeaseOwner", testShipLeaseOwner},
		{"ListTasksByPullRequestAndHead", testListTasksByPullRequestAndHead},
		{"PutChecksReplace", testPutChecksReplace},
		{"ProviderDeliveries", testProviderDeliveries},
		{"ConcurrentProviderDeliveries", testConcurrentProviderDeliveries},
		{"ClaimReconciliations", testClaimReconciliations},
		{"MarkStalled", testMarkStalled},
		{"MarkStalledRollsBack", testMarkStalledRollsBack},
		{"ConcurrentMarkStalled", testConcurrentMarkStalled},
		{"ListStalledTasks", testListStalledTasks},
		{"ConcurrentClaimShipOperations", testConcurrentClaimShipOperations},
		{"ConcurrentClaimReconciliations", testConcurrentClaimReconciliations},
		{"EventBoundsCommitted", testEventBoundsCommitted},
		{"HostFactsClosed", testHostFactsClosed},
		{"SubscriptionRoundTrip", testSubscriptionRoundTrip},
		{"SubscriptionNotFound", testSubscriptionNotFound},
		{"ListSubscriptionsPagination", testListSubscriptionsPagination},
		{"UpdateSubscription", testUpdateSubscription},
		{"SubscriptionRevision", testSubscriptionRevision},
		{"UpdateSubscriptionSecret", testUpdateSubscriptionSecret},
		{"ClaimSubscriptions", testClaimSubscriptions},
		{"ClaimSubscriptionsMax", testClaimSubscriptionsMax},
		{"ClaimSubscriptionsConcurrently", testClaimSubscriptionsConcurrently},
		{"Deliveries", testDeliveries},
		{"DeliveriesOfEvent", testDeliveriesOfEvent},
		{"DeliveryByID", testDeliveryByID},
		{"DeliveryReadForUpdate", testDeliveryReadForUpdate},
		{"DeleteSubscription", testDeleteSubscription},
		{"PruneDeliveries", testPruneDeliveries},
		{"ReopenKeepsWebhooks", testReopenKeepsWebhooks},
		{"WebhooksClosed", testWebhooksClosed},
		{"ConcurrentWriters", testConcurrentWriters},
		{"ConcurrentFailuresRollBackAlone", testConcurrentFailuresRollBackAlone},
		{"ReadersNeverSkipEvents", testReadersNeverSkipEvents},
		{"ReopenKeepsEverything", testReopenKeepsEverything},
		{"Closed", testClosed},
		{"CountInProgress", testCountInProgress},
		{"ConcurrentCountInProgress", testConcurrentCountInProgress},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fn(t, h)
		})
	}
}

// open opens a store that is closed when the test ends.
func open(t *testing.T, h Harness) lifecycle.Store {
	t.Helper()
	s := h.Open(t)
	t.Cleanup(func() { s.Close() })
	return s
}

// base is a fixed time with millisecond precision, as the Service stores.
var base = time.Date(2026, 11, 21, 10, 4, 5, 123_000_000, time.UTC)

func ts(offset time.Duration) lifecycle.Timestamp {
	return lifecycle.NewTimestamp(base.Add(offset))
}

func ptr[T any](v T) *T { return &v }

// fullTask returns a task with every member set.
func fullTask(n int) lifecycle.Task {
	id := fmt.Sprintf("tsk_full%04d", n)
	src := lifecycle.AssignmentDeterministicRule
	return lifecycle.Task{
		ID:                  id,
		Identifier:          fmt.Sprintf("ENG-%d", n),
		Title:               "Fix the login redirect",
		Description:         "Users land on a 404 after login. ünïcødé ✓",
		Status:              lifecycle.StatusInReview,
		Priority:            lifecycle.PriorityHigh,
		UpdatedAt:           ts(time.Minute),
		Assignee:            &lifecycle.Agent{ID: "agent-web", Name: "Web Agent"},
		AssigneeAgentID:     ptr("agent-web"),
		AssignmentSource:    &src,
		RoutingDecisionID:   ptr("rtd_abc"),
		RoutingReason:       json.RawMessage(`{"matchedRules":["web"]}`),
		RoutingConfidence:   ptr(0.93),
		SubmissionID:        ptr("sub_abc"),
		PRURL:               ptr("https://github.com/acme/web/pull/7"),
		PRNumber:            ptr(7),
		Branch:              ptr("agent/eng-1"),
		BaseBranch:          ptr("main"),
		HeadSHA:             ptr("0123456789abcdef0123456789abcdef01234567"),
		AcceptanceCriteria:  []string{"redirects to /home", "keeps the query string"},
		Links:               lifecycle.TaskLinks{Issue: "https://issues.example.com/ENG-1", ParentIssue: ptr("https://issues.example.com/ENG-0")},
		Context:             lifecycle.TaskContext{Project: ptr("web"), Goal: "login works"},
		Blocker:             &lifecycle.Blocker{Kind: "awaiting_user", SourceRunID: "run_1", SourceAgentID: "agent-web", Reason: "needs_secret", ActionRequired: "add the key", ResumeInstructions: "rerun", CreatedAt: ts(30 * time.Second)},
		Labels:              []string{"frontend", "bug"},
		Version:             3,
		CreatedAt:           ts(0),
		StatusBeforeBlocker: lifecycle.StatusInProgress,
		SubmissionMode:      lifecycle.ModeAdapterManaged,
		PROwner:             "acme",
		PRRepo:              "web",
		ReviewPolicy:        lifecycle.PolicyAlwaysRequire,
		ReviewDecision:      lifecycle.DecisionChangesRequested,
		ReworkRequested:     true,
		ActiveShipID:        "shp_active",
		ShipMerging:         true,
		Facts: lifecycle.Facts{
			PRState: lifecycle.PullRequestMerged, MergeCommitSHA: "fedcba9876543210fedcba9876543210fedcba98",
			DismissesStaleReviews: true, CI: lifecycle.CIFailed, CIPending: true, CICheckedAt: ptr(ts(40 * time.Second)),
			HostDecision: lifecycle.DecisionApproved, CheckedAt: ptr(ts(50 * time.Second)),
		},
		ReconcileAt:      ts(5 * time.Minute),
		ReworkRounds:     3,
		ReworkRoundsBase: 2,
		LastActivityAt:   ts(20 * time.Second),
		Stalled:          &lifecycle.Stall{Since: ts(2 * time.Minute), LastActivityAt: ts(20 * time.Second)},
	}
}

// minimalTask returns a task with every nullable member null.
func minimalTask(n int) lifecycle.Task {
	return lifecycle.Task{
		ID:                 fmt.Sprintf("tsk_min%04d", n),
		Identifier:         fmt.Sprintf("MIN-%d", n),
		Title:              "t",
		Status:             lifecycle.StatusTodo,
		Priority:           lifecycle.PriorityMedium,
		UpdatedAt:          ts(0),
		AcceptanceCriteria: []string{},
		Labels:             []string{},
		TriageQueueID:      ptr("trq_x"),
		Links:              lifecycle.TaskLinks{Issue: "https://issues.example.com/MIN"},
		Version:            1,
		CreatedAt:          ts(0),
	}
}

// taskOpts compares tasks as stored: JSON members by meaning, not bytes.
var taskOpts = cmp.Options{
	cmp.Transformer("json", func(r json.RawMessage) any {
		if r == nil {
			return nil
		}
		var v any
		if err := json.Unmarshal(r, &v); err != nil {
			return string(r)
		}
		return v
	}),
	equateEmpty,
	cmpopts.IgnoreFields(lifecycle.Task{}, "AvailableActions"),
}

// equateEmpty treats nil and empty slices and maps as equal, except raw
// JSON, which the json transformer compares.
var equateEmpty = cmp.FilterPath(func(p cmp.Path) bool {
	return p.Last().Type() != reflect.TypeFor[json.RawMessage]()
}, cmpopts.EquateEmpty())

func create(t *testing.T, s lifecycle.Store, tasks ...lifecycle.Task) {
	t.Helper()
	err := s.Update(t.Context(), func(tx lifecycle.Tx) error {
		for _, task := range tasks {
			if err := tx.CreateTask(t.Context(), task); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("create tasks: %v", err)
	}
}

func testTaskRoundTrip(t *testing.T, h Harness) {
	s := open(t, h)
	full, minimal := fullTask(1), minimalTask(1)
	create(t, s, full, minimal)
	for _, want := range []lifecycle.Task{full, minimal} {
		got, err := s.Task(t.Context(), want.ID)
		if err != nil {
			t.Fatalf("Task(%s): %v", want.ID, err)
		}
		if diff := cmp.Diff(want, got, taskOpts); diff != "" {
			t.Errorf("Task(%s) mismatch (-want +got):\n%s", want.ID, diff)
		}
		// The transaction reads the same.
		err = s.Update(t.Context(), func(tx lifecycle.Tx) error {
			got, err := tx.Task(t.Context(), want.ID)
			if err != nil {
				return err
			}
			if diff := cmp.Diff(want, got, taskOpts); diff != "" {
				t.Errorf("Tx.Task(%s) mismatch (-want +got):\n%s", want.ID, diff)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

func testTaskNotFound(t *testing.T, h Harness) {
	s := open(t, h)
	if _, err := s.Task(t.Context(), "tsk_missing"); !errors.Is(err, lifecycle.ErrNotFound) {
		t.Errorf("Task(missing) error = %v, want ErrNotFound", err)
	}
	err := s.Update(t.Context(), func(tx lifecycle.Tx) error {
		if _, err := tx.Task(t.Context(), "tsk_missing"); !errors.Is(err, lifecycle.ErrNotFound) {
			t.Errorf("Tx.Task(missing) error = %v, want ErrNotFound", err)
		}
		if err := tx.UpdateTask(t.Context(), minimalTask(9)); !errors.Is(err, lifecycle.ErrNotFound) {
			t.Errorf("Tx.UpdateTask(missing) error = %v, want ErrNotFound", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func testTaskConflicts(t *testing.T, h Harness) {
	s := open(t, h)
	create(t, s, minimalTask(1))
	sameID := minimalTask(2)
	sameID.ID = minimalTask(1).ID
	sameIdentifier := minimalTask(3)
	sameIdentifier.Identifier = minimalTask(1).Identifier
	for name, task := range map[string]lifecycle.Task{"same ID": sameID, "same identifier": sameIdentifier} {
		err := s.Update(t.Context(), func(tx lifecycle.Tx) error { return tx.CreateTask(t.Context(), task) })
		if !errors.Is(err, lifecycle.ErrConflict) {
			t.Errorf("CreateTask(%s) error = %v, want ErrConflict", name, err)
		}
	}
}

func testUpdateTask(t *testing.T, h Harness) {
	s := open(t, h)
	task := minimalTask(1)
	create(t, s, task)
	want := fullTask(1)
	want.ID, want.Identifier, want.CreatedAt = task.ID, task.Identifier, task.CreatedAt
	if err := s.Update(t.Context(), func(tx lifecycle.Tx) error { return tx.UpdateTask(t.Context(), want) }); err != nil {
		t.Fatalf("UpdateTask: %v", err)
	}
	got, err := s.Task(t.Context(), task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got, taskOpts); diff != "" {
		t.Errorf("after UpdateTask (-want +got):\n%s", diff)
	}
	// And back to nulls.
	if err := s.Update(t.Context(), func(tx lifecycle.Tx) error { return tx.UpdateTask(t.Context(), task) }); err != nil {
		t.Fatalf("UpdateTask: %v", err)
	}
	got, err = s.Task(t.Context(), task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(task, got, taskOpts); diff != "" {
		t.Errorf("after UpdateTask back (-want +got):\n%s", diff)
	}
}

func testUpdateRollsBack(t *testing.T, h Harness) {
	s := open(t, h)
	boom := errors.New("boom")
	err := s.Update(t.Context(), func(tx lifecycle.Tx) error {
		if err := tx.CreateTask(t.Context(), minimalTask(1)); err != nil {
			return err
		}
		e := event(minimalTask(1).ID, 1, ts(0))
		if err := tx.AppendEvent(t.Context(), &e); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Update error = %v, want the function's error", err)
	}
	if _, err := s.Task(t.Context(), minimalTask(1).ID); !errors.Is(err, lifecycle.ErrNotFound) {
		t.Errorf("task of a rolled back transaction: error = %v, want ErrNotFound", err)
	}
	evs, err := s.Events(t.Context(), lifecycle.EventFilter{Limit: 10})
	if err != nil || len(evs) != 0 {
		t.Errorf("events of a rolled back transaction = %v, %v; want none", evs, err)
	}
}

func testListTasksPagination(t *testing.T, h Harness) {
	s := open(t, h)
	var want []string
	for i := range 25 {
		task := minimalTask(i)
		create(t, s, task)
		want = append(want, task.ID)
	}
	var got []string
	f := lifecycle.TaskFilter{Limit: 10}
	pages := 0
	for {
		page, err := s.ListTasks(t.Context(), f)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, task := range page.Tasks {
			got = append(got, task.ID)
		}
		if page.Next == 0 {
			break
		}
		if len(page.Tasks) != 10 {
			t.Fatalf("a page before the last has %d tasks, want 10", len(page.Tasks))
		}
		f.After = page.Next
	}
	if pages != 3 {
		t.Errorf("25 tasks in pages of 10 took %d pages, want 3", pages)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("listing order (-want +got):\n%s", diff)
	}
	// An exact multiple of the limit ends without an empty page.
	page, err := s.ListTasks(t.Context(), lifecycle.TaskFilter{Limit: 25})
	if err != nil || len(page.Tasks) != 25 || page.Next != 0 {
		t.Errorf("ListTasks(limit 25 of 25) = %d tasks, next %d, %v; want 25, 0", len(page.Tasks), page.Next, err)
	}
}

func testListTasksFilters(t *testing.T, h Harness) {
	s := open(t, h)
	a, b, c := fullTask(1), fullTask(2), minimalTask(3)
	b.Status, b.AssigneeAgentID, b.Assignee = lifecycle.StatusDone, ptr("agent-api"), &lifecycle.Agent{ID: "agent-api", Name: "API"}
	b.Context.Project = ptr("api")
	create(t, s, a, b, c)
	checkFilters(t, s, []filterCase{
		{"all", lifecycle.TaskFilter{}, []string{a.ID, b.ID, c.ID}},
		{"status", lifecycle.TaskFilter{Statuses: []lifecycle.Status{lifecycle.StatusTodo}}, []string{c.ID}},
		{"statuses", lifecycle.TaskFilter{Statuses: []lifecycle.Status{lifecycle.StatusTodo, lifecycle.StatusDone}}, []string{b.ID, c.ID}},
		{"assignee", lifecycle.TaskFilter{AssigneeAgentID: "agent-web"}, []string{a.ID}},
		{"project", lifecycle.TaskFilter{Project: "api"}, []string{b.ID}},
		{"combined", lifecycle.TaskFilter{Project: "web", Statuses: []lifecycle.Status{lifecycle.StatusDone}}, nil},
	})
}

// filterCase is a listing and the IDs of the tasks it must list, in order.
type filterCase struct {
	name string
	f    lifecycle.TaskFilter
	want []string
}

// checkFilters lists the tasks of each case and compares their IDs.
func checkFilters(t *testing.T, s lifecycle.Store, cases []filterCase) {
	t.Helper()
	for _, tt := range cases {
		tt.f.Limit = 50
		page, err := s.ListTasks(t.Context(), tt.f)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tt.want, taskIDs(page.Tasks), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
}

func taskIDs(tasks []lifecycle.Task) []string {
	var out []string
	for _, task := range tasks {
		out = append(out, task.ID)
	}
	return out
}

// event returns an event of task taskID.
func event(taskID string, version int64, at lifecycle.Timestamp) lifecycle.Event {
	return lifecycle.Event{
		ID:          fmt.Sprintf("evt_%s_%d_%d", taskID, version, at.UnixMilli()),
		Type:        lifecycle.EventTaskUpdated,
		OccurredAt:  at,
		TaskVersion: version,
		Data:        json.RawMessage(`{"taskId":"` + taskID + `"}`),
		TaskID:      taskID,
	}
}

func appendEvents(t *testing.T, s lifecycle.Store, evs ...*lifecycle.Event) {
	t.Helper()
	err := s.Update(t.Context(), func(tx lifecycle.Tx) error {
		for _, e := range evs {
			if err := tx.AppendEvent(t.Context(), e); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("append events: %v", err)
	}
}

var eventOpts = cmp.Options{taskOpts[0], equateEmpty}

func testEventsAppendAndRead(t *testing.T, h Harness) {
	s := open(t, h)
	task := fullTask(1)
	create(t, s, task)
	e1, e2 := event(task.ID, 1, ts(0)), event(task.ID, 2, ts(time.Second))
	e2.TraceID, e2.Project, e2.Type = ptr("4bf92f3577b34da6a3ce929d0e0e4736"), "web", lifecycle.EventTaskReviewed
	appendEvents(t, s, &e1, &e2)
	if e1.Sequence <= 0 || e2.Sequence <= e1.Sequence {
		t.Fatalf("sequences %d, %d: want positive and increasing", e1.Sequence, e2.Sequence)
	}
	got, err := s.Events(t.Context(), lifecycle.EventFilter{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]lifecycle.Event{e1, e2}, got, eventOpts); diff != "" {
		t.Errorf("Events (-want +got):\n%s", diff)
	}
	got, err = s.Events(t.Context(), lifecycle.EventFilter{After: e1.Sequence, Limit: 10})
	if err != nil || len(got) != 1 || got[0].ID != e2.ID {
		t.Errorf("Events(after e1) = %v, %v; want [e2]", got, err)
	}
	one, err := s.Events(t.Context(), lifecycle.EventFilter{ID: e2.ID, Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]lifecycle.Event{e2}, one, eventOpts); diff != "" {
		t.Errorf("Events(ID) (-want +got):\n%s", diff)
	}
	if got, err := s.Events(t.Context(), lifecycle.EventFilter{ID: "evt_missing", Limit: 1}); err != nil || len(got) != 0 {
		t.Errorf("Events(missing ID) = %v, %v; want none", ids(got), err)
	}
	bounds, err := s.EventBounds(t.Context())
	if err != nil || bounds != (lifecycle.EventBounds{Last: e2.Sequence}) {
		t.Errorf("EventBounds = %+v, %v; want Last %d, nothing pruned", bounds, err, e2.Sequence)
	}
	dup := e1
	err = s.Update(t.Context(), func(tx lifecycle.Tx) error { return tx.AppendEvent(t.Context(), &dup) })
	if !errors.Is(err, lifecycle.ErrConflict) {
		t.Errorf("AppendEvent(same ID) error = %v, want ErrConflict", err)
	}
}

func testEventsFilters(t *testing.T, h Harness) {
	s := open(t, h)
	a, b := minimalTask(1), minimalTask(2)
	create(t, s, a, b)
	var all []*lifecycle.Event
	for i := range 10 {
		task := a
		if i%2 == 1 {
			task = b
		}
		e := event(task.ID, int64(i+1), ts(time.Duration(i)*time.Second))
		if i%3 == 0 {
			e.Type = lifecycle.EventTaskShipped
		}
		all = append(all, &e)
	}
	appendEvents(t, s, all...)
	tests := []struct {
		name string
		f    lifecycle.EventFilter
		keep func(e *lifecycle.Event) bool
	}{
		{"task", lifecycle.EventFilter{TaskID: b.ID}, func(e *lifecycle.Event) bool { return e.TaskID == b.ID }},
		{"type", lifecycle.EventFilter{Types: []lifecycle.EventType{lifecycle.EventTaskShipped}}, func(e *lifecycle.Event) bool { return e.Type == lifecycle.EventTaskShipped }},
		{"types", lifecycle.EventFilter{Types: []lifecycle.EventType{lifecycle.EventTaskShipped, lifecycle.EventTaskUpdated}}, func(*lifecycle.Event) bool { return true }},
		{"task and type", lifecycle.EventFilter{TaskID: a.ID, Types: []lifecycle.EventType{lifecycle.EventTaskUpdated}}, func(e *lifecycle.Event) bool {
			return e.TaskID == a.ID && e.Type == lifecycle.EventTaskUpdated
		}},
		{"after", lifecycle.EventFilter{After: all[6].Sequence}, func(e *lifecycle.Event) bool { return e.Sequence > all[6].Sequence }},
		{"id", lifecycle.EventFilter{ID: all[4].ID}, func(e *lifecycle.Event) bool { return e.ID == all[4].ID }},
		{"id and task", lifecycle.EventFilter{ID: all[4].ID, TaskID: b.ID}, func(*lifecycle.Event) bool { return false }},
		{"id after it", lifecycle.EventFilter{ID: all[4].ID, After: all[4].Sequence}, func(*lifecycle.Event) bool { return false }},
	}
	for _, tt := range tests {
		tt.f.Limit = 100
		got, err := s.Events(t.Context(), tt.f)
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, e := range all {
			if tt.keep(e) {
				want = append(want, e.ID)
			}
		}
		if diff := cmp.Diff(want, ids(got)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
	got, err := s.Events(t.Context(), lifecycle.EventFilter{Limit: 3})
	if err != nil || len(got) != 3 || got[0].ID != all[0].ID {
		t.Errorf("Events(limit 3) = %v, %v; want the first 3", ids(got), err)
	}
}

func ids(evs []lifecycle.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.ID)
	}
	return out
}

func testEventsPruneKeepsSequence(t *testing.T, h Harness) {
	s := open(t, h)
	task := minimalTask(1)
	create(t, s, task)
	old, recent := event(task.ID, 1, ts(0)), event(task.ID, 2, ts(time.Hour))
	appendEvents(t, s, &old, &recent)
	if b, err := s.EventBounds(t.Context()); err != nil || b != (lifecycle.EventBounds{Last: recent.Sequence}) {
		t.Errorf("EventBounds before any prune = %+v, %v; want Last %d, PrunedThrough 0", b, err, recent.Sequence)
	}
	n, err := s.Prune(t.Context(), lifecycle.PruneParams{Before: base.Add(time.Minute)})
	if err != nil || n != (lifecycle.PruneResult{Events: 1}) {
		t.Fatalf("Prune = %+v, %v; want 1 event", n, err)
	}
	if b, err := s.EventBounds(t.Context()); err != nil || b != (lifecycle.EventBounds{Last: recent.Sequence, PrunedThrough: old.Sequence}) {
		t.Errorf("EventBounds = %+v, %v; want Last %d, PrunedThrough %d, the sequence pruned", b, err, recent.Sequence, old.Sequence)
	}
	got, err := s.Events(t.Context(), lifecycle.EventFilter{Limit: 10})
	if err != nil || len(got) != 1 || got[0].ID != recent.ID {
		t.Fatalf("after prune Events = %v, %v; want [recent]", ids(got), err)
	}
	if got, err := s.Events(t.Context(), lifecycle.EventFilter{ID: old.ID, Limit: 1}); err != nil || len(got) != 0 {
		t.Errorf("Events(ID of a pruned event) = %v, %v; want none", ids(got), err)
	}
	// Pruning the newest event does not let its sequence be reused.
	if n, err := s.Prune(t.Context(), lifecycle.PruneParams{Before: base.Add(2 * time.Hour)}); err != nil || n.Events != 1 {
		t.Fatalf("Prune = %+v, %v; want 1 event", n, err)
	}
	if b, err := s.EventBounds(t.Context()); err != nil || b != (lifecycle.EventBounds{Last: recent.Sequence, PrunedThrough: recent.Sequence}) {
		t.Errorf("EventBounds after pruning all = %+v, %v; want Last and PrunedThrough %d", b, err, recent.Sequence)
	}
	// Nothing deleted, or nothing asked for: the mark stays.
	for _, p := range []lifecycle.PruneParams{{Before: base}, {}} {
		if n, err := s.Prune(t.Context(), p); err != nil || n != (lifecycle.PruneResult{}) {
			t.Fatalf("Prune(%+v) = %+v, %v; want nothing deleted", p, n, err)
		}
	}
	if b, _ := s.EventBounds(t.Context()); b.PrunedThrough != recent.Sequence {
		t.Errorf("EventBounds.PrunedThrough after a prune that deleted nothing = %d, want %d", b.PrunedThrough, recent.Sequence)
	}
	next := event(task.ID, 3, ts(3*time.Hour))
	appendEvents(t, s, &next)
	if next.Sequence <= recent.Sequence {
		t.Errorf("sequence after pruning = %d, want more than %d", next.Sequence, recent.Sequence)
	}
}

func testAPIKeys(t *testing.T, h Harness) {
	s := open(t, h)
	k1 := lifecycle.APIKey{ID: "key_1", Name: "admin", Scopes: []lifecycle.Scope{lifecycle.ScopeKeysAdmin, lifecycle.ScopeTasksRead},
		Actor: lifecycle.Actor{ID: "ops", Role: lifecycle.RoleUser}, CreatedAt: ts(0), Hash: lifecycle.HashAPIKey("lsk_one")}
	k2 := lifecycle.APIKey{ID: "key_2", Name: "agent", Scopes: []lifecycle.Scope{lifecycle.ScopeTasksWrite},
		Actor: lifecycle.Actor{ID: "agent-web", Role: lifecycle.RoleAgent}, CreatedAt: ts(time.Second), Hash: lifecycle.HashAPIKey("lsk_two")}
	err := s.Update(t.Context(), func(tx lifecycle.Tx) error {
		return errors.Join(tx.CreateAPIKey(t.Context(), k1), tx.CreateAPIKey(t.Context(), k2))
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.APIKeyByHash(t.Context(), lifecycle.HashAPIKey("lsk_two"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(k2, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("APIKeyByHash (-want +got):\n%s", diff)
	}
	if _, err := s.APIKeyByHash(t.Context(), lifecycle.HashAPIKey("lsk_three")); !errors.Is(err, lifecycle.ErrNotFound) {
		t.Errorf("APIKeyByHash(unknown) error = %v, want ErrNotFound", err)
	}
	dup := k1
	dup.ID = "key_3"
	if err := s.Update(t.Context(), func(tx lifecycle.Tx) error { return tx.CreateAPIKey(t.Context(), dup) }); !errors.Is(err, lifecycle.ErrConflict) {
		t.Errorf("CreateAPIKey(same hash) error = %v, want ErrConflict", err)
	}
	var revoked lifecycle.APIKey
	err = s.Update(t.Context(), func(tx lifecycle.Tx) error {
		var err error
		revoked, err = tx.RevokeAPIKey(t.Context(), "key_1", base.Add(time.Hour))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if revoked.RevokedAt == nil || !revoked.RevokedAt.Equal(base.Add(time.Hour)) {
		t.Errorf("RevokeAPIKey returned RevokedAt %v, want %v", revoked.RevokedAt, base.Add(time.Hour))
	}
	// Revoking again keeps the first time.
	err = s.Update(t.Context(), func(tx lifecycle.Tx) error {
		again, err := tx.RevokeAPIKey(t.Context(), "key_1", base.Add(2*time.Hour))
		if err == nil && !again.RevokedAt.Equal(base.Add(time.Hour)) {
			t.Errorf("second RevokeAPIKey changed RevokedAt to %v", again.RevokedAt)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Update(t.Context(), func(tx lifecycle.Tx) error {
		_, err := tx.RevokeAPIKey(t.Context(), "key_missing", base)
		return err
	})
	if !errors.Is(err, lifecycle.ErrNotFound) {
		t.Errorf("RevokeAPIKey(missing) error = %v, want ErrNotFound", err)
	}
	keys, err := s.ListAPIKeys(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := []string{keys[0].ID, keys[1].ID}, []string{"key_1", "key_2"}; len(keys) != 2 || !slices.Equal(got, want) {
		t.Errorf("ListAPIKeys = %v, want %v", got, want)
	}
	if keys[0].RevokedAt == nil {
		t.Error("ListAPIKeys lost the revocation")
	}
}

func testConcurrentWriters(t *testing.T, h Harness) {
	s := open(t, h)
	const writers, perWriter = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				task := minimalTask(w*1000 + i)
				err := s.Update(context.Background(), func(tx lifecycle.Tx) error {
					if err := tx.CreateTask(context.Background(), task); err != nil {
						return err
					}
					e := event(task.ID, 1, ts(0))
					if err := tx.AppendEvent(context.Background(), &e); err != nil {
						return err
					}
					// Read-modify-write inside the transaction must not lose updates.
					got, err := tx.Task(context.Background(), task.ID)
					if err != nil {
						return err
					}
					got.Version++
					return tx.UpdateTask(context.Background(), got)
				})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent Update: %v", err)
	}
	page, err := s.ListTasks(t.Context(), lifecycle.TaskFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Tasks) != writers*perWriter {
		t.Errorf("%d tasks after concurrent writes, want %d", len(page.Tasks), writers*perWriter)
	}
	for _, task := range page.Tasks {
		if task.Version != 2 {
			t.Errorf("task %s version %d, want 2", task.ID, task.Version)
		}
	}
	evs, err := s.Events(t.Context(), lifecycle.EventFilter{Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != writers*perWriter {
		t.Errorf("%d events after concurrent writes, want %d", len(evs), writers*perWriter)
	}
	for i := 1; i < len(evs); i++ {
		if evs[i].Sequence <= evs[i-1].Sequence {
			t.Fatalf("sequence %d follows %d", evs[i].Sequence, evs[i-1].Sequence)
		}
	}
}

// testReadersNeverSkipEvents polls Events while writers append, and checks
// that the reader saw every event: a sequence once passed is never filled in.
func testReadersNeverSkipEvents(t *testing.T, h Harness) {
	s := open(t, h)
	const writers, perWriter = 4, 50
	tasks := make([]lifecycle.Task, writers)
	for w := range tasks {
		tasks[w] = minimalTask(w)
	}
	create(t, s, tasks...)
	done := make(chan struct{})
	seen := make(chan []string, 1)
	go func() {
		var (
			got   []string
			after int64
		)
		for {
			finished := false
			select {
			case <-done:
				finished = true
			default:
			}
			evs, err := s.Events(context.Background(), lifecycle.EventFilter{After: after, Limit: 100})
			if err != nil {
				t.Errorf("Events: %v", err)
				break
			}
			for _, e := range evs {
				got = append(got, e.ID)
				after = e.Sequence
			}
			if finished && len(evs) == 0 {
				break
			}
		}
		seen <- got
	}()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				e := event(tasks[w].ID, int64(i+1), ts(time.Duration(i)*time.Millisecond))
				if err := s.Update(context.Background(), func(tx lifecycle.Tx) error { return tx.AppendEvent(context.Background(), &e) }); err != nil {
					t.Errorf("AppendEvent: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(done)
	got := <-seen
	all, err := s.Events(t.Context(), lifecycle.EventFilter{Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(ids(all), got); diff != "" {
		t.Errorf("a concurrent reader missed or repeated events (-all +seen):\n%s", diff)
	}
}

func testReopenKeepsEverything(t *testing.T, h Harness) {
	if h.Reopen == nil {
		t.Skip("the harness cannot reopen a store")
	}
	s := h.Open(t)
	task := fullTask(1)
	create(t, s, task)
	e := event(task.ID, 1, ts(0))
	appendEvents(t, s, &e)
	key := lifecycle.APIKey{ID: "key_1", Name: "k", Scopes: []lifecycle.Scope{lifecycle.ScopeTasksRead},
		Actor: lifecycle.Actor{ID: "a", Role: lifecycle.RoleAgent}, CreatedAt: ts(0), Hash: lifecycle.HashAPIKey("lsk_k")}
	if err := s.Update(t.Context(), func(tx lifecycle.Tx) error { return tx.CreateAPIKey(t.Context(), key) }); err != nil {
		t.Fatal(err)
	}
	s = h.Reopen(t, s)
	t.Cleanup(func() { s.Close() })
	got, err := s.Task(t.Context(), task.ID)
	if err != nil {
		t.Fatalf("Task after reopen: %v", err)
	}
	if diff := cmp.Diff(task, got, taskOpts); diff != "" {
		t.Errorf("task after reopen (-want +got):\n%s", diff)
	}
	evs, err := s.Events(t.Context(), lifecycle.EventFilter{Limit: 10})
	if err != nil || len(evs) != 1 || evs[0].ID != e.ID || evs[0].Sequence != e.Sequence {
		t.Errorf("events after reopen = %v, %v; want [%s] with sequence %d", evs, err, e.ID, e.Sequence)
	}
	if _, err := s.APIKeyByHash(t.Context(), key.Hash); err != nil {
		t.Errorf("key after reopen: %v", err)
	}
	next := event(task.ID, 2, ts(time.Second))
	appendEvents(t, s, &next)
	if next.Sequence <= e.Sequence {
		t.Errorf("sequence after reopen = %d, want more than %d", next.Sequence, e.Sequence)
	}
}

func testClosed(t *testing.T, h Harness) {
	s := h.Open(t)
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := s.Task(t.Context(), "tsk_x"); !errors.Is(err, lifecycle.ErrClosed) {
		t.Errorf("Task after Close: error = %v, want ErrClosed", err)
	}
	if err := s.Update(t.Context(), func(lifecycle.Tx) error { return nil }); !errors.Is(err, lifecycle.ErrClosed) {
		t.Errorf("Update after Close: error = %v, want ErrClosed", err)
	}
}

func update(t *testing.T, s lifecycle.Store, fn func(tx lifecycle.Tx) error) {
	t.Helper()
	if err := s.Update(t.Context(), fn); err != nil {
		t.Fatal(err)
	}
}

func submission(taskID, id string) lifecycle.Submission {
	return lifecycle.Submission{
		SubmissionID:     id,
		TaskID:           taskID,
		Status:           lifecycle.StatusInReview,
		PRURL:            "https://github.com/acme/web/pull/7",
		PRNumber:         7,
		Head:             ptr("agent/eng-1"),
		Base:             ptr("main"),
		HeadSHA:          ptr("0123456789abcdef0123456789abcdef01234567"),
		Action:           lifecycle.SubmissionCreated,
		IdempotencyKey:   "key-12345678",
		Owner:            ptr("acme"),
		Repo:             ptr("web"),
		CIProvider:       ptr("github_checks"),
		CodeReviewPolicy: lifecycle.PolicyAlwaysRequire,
		ReviewRoute:      lifecycle.ReviewRoute{Participants: []lifecycle.Participant{{ID: "agent-rev", Role: "reviewer"}}},
		AcceptedAt:       ts(time.Minute),
		Mode:             lifecycle.ModeAdapterManaged,
		Summary:          "Fixed it",
		Notes:            "notes",
		Checks:           []lifecycle.SubmittedCheck{{Name: "unit", Status: lifecycle.CheckPassed}},
		Draft:            true,
		Actor:            lifecycle.Actor{ID: "agent-web", Role: lifecycle.RoleAgent},
	}
}

func testSubmissions(t *testing.T, h Harness) {
	s := open(t, h)
	task := minimalTask(1)
	create(t, s, task)
	full := submission(task.ID, "sub_full")
	bare := lifecycle.Submission{SubmissionID: "sub_bare", TaskID: task.ID, Status: lifecycle.StatusInReview, PRURL: "x", PRNumber: 1,
		Action: lifecycle.SubmissionAccepted, CodeReviewPolicy: lifecycle.PolicyNeverRequire, Mode: lifecycle.ModeArtifact, AcceptedAt: ts(0)}
	update(t, s, func(tx lifecycle.Tx) error {
		return errors.Join(tx.CreateSubmission(t.Context(), full), tx.CreateSubmission(t.Context(), bare))
	})
	opts := cmp.Options{equateEmpty, cmpopts.IgnoreFields(lifecycle.Submission{}, "AvailableActions")}
	got, err := s.Submissions(t.Context(), task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]lifecycle.Submission{full, bare}, got, opts); diff != "" {
		t.Errorf("Submissions (-want +got):\n%s", diff)
	}
	update(t, s, func(tx lifecycle.Tx) error {
		for _, want := range []lifecycle.Submission{full, bare} {
			got, err := tx.Submission(t.Context(), want.SubmissionID)
			if err != nil {
				return err
			}
			if diff := cmp.Diff(want, got, opts); diff != "" {
				t.Errorf("Tx.Submission(%s) (-want +got):\n%s", want.SubmissionID, diff)
			}
		}
		if _, err := tx.Submission(t.Context(), "sub_missing"); !errors.Is(err, lifecycle.ErrNotFound) {
			t.Errorf("Tx.Submission(missing) error = %v, want ErrNotFound", err)
		}
		return nil
	})
	err = s.Update(t.Context(), func(tx lifecycle.Tx) error { return tx.CreateSubmission(t.Context(), full) })
	if !errors.Is(err, lifecycle.ErrConflict) {
		t.Errorf("CreateSubmission(same ID) error = %v, want ErrConflict", err)
	}
}

// testSubmissionsOfTask records submissions of two tasks, interleaved and
// with IDs that do not sort in the order they were recorded: each task
// lists its own, oldest first, whole.
func testSubmissionsOfTask(t *testing.T, h Harness) {
	s := open(t, h)
	task, other, idle := minimalTask(1), minimalTask(2), minimalTask(3)
	create(t, s, task, other, idle)
	bare := func(taskID, id string, accepted time.Duration) lifecycle.Submission {
		return lifecycle.Submission{SubmissionID: id, TaskID: taskID, Status: lifecycle.StatusInReview, PRURL: "x", PRNumber: 1,
			Action: lifecycle.SubmissionAccepted, CodeReviewPolicy: lifecycle.PolicyNeverRequire, Mode: lifecycle.ModeArtifact, AcceptedAt: ts(accepted)}
	}
	full := submission(task.ID, "sub_c")
	full.AcceptedAt = ts(0)
	want := []lifecycle.Submission{full, bare(task.ID, "sub_a", time.Minute), bare(task.ID, "sub_b", 2*time.Minute)}
	wantOther := []lifecycle.Submission{bare(other.ID, "sub_z", 30*time.Second), bare(other.ID, "sub_0", 90*time.Second)}
	// One per transaction, the other task's between this one's.
	for _, sub := range []lifecycle.Submission{want[0], wantOther[0], want[1], wantOther[1], want[2]} {
		update(t, s, func(tx lifecycle.Tx) error { return tx.CreateSubmission(t.Context(), sub) })
	}
	opts := cmp.Options{equateEmpty, cmpopts.IgnoreFields(lifecycle.Submission{}, "AvailableActions")}
	cases := []struct {
		name   string
		taskID string
		want   []lifecycle.Submission
	}{
		{"three, oldest first", task.ID, want},
		{"the other task's", other.ID, wantOther},
		{"a task without submissions", idle.ID, nil},
		{"an unknown task", "tsk_missing", nil},
	}
	for _, c := range cases {
		got, err := s.Submissions(t.Context(), c.taskID)
		if err != nil {
			t.Errorf("Submissions(%s), %s: %v", c.taskID, c.name, err)
			continue
		}
		if diff := cmp.Diff(c.want, got, opts); diff != "" {
			t.Errorf("Submissions(%s), %s (-want +got):\n%s", c.taskID, c.name, diff)
		}
	}
}

func testReviews(t *testing.T, h Harness) {
	s := open(t, h)
	task := minimalTask(1)
	create(t, s, task)
	sub1, sub2 := submission(task.ID, "sub_1"), submission(task.ID, "sub_2")
	reviews := []lifecycle.Review{
		{ID: "rev_b", TaskID: task.ID, SubmissionID: "sub_1", Reviewer: lifecycle.Actor{ID: "r1", Role: lifecycle.RoleReviewer}, Outcome: lifecycle.ReviewChangesRequested, Body: "fix the test", SubmittedAt: ts(time.Minute)},
		{ID: "rev_a", TaskID: task.ID, SubmissionID: "sub_1", Reviewer: lifecycle.Actor{ID: "r2", Role: lifecycle.RoleAgent}, Outcome: lifecycle.ReviewApproved, SubmittedAt: ts(time.Minute)},
		{ID: "rev_c", TaskID: task.ID, SubmissionID: "sub_2", Reviewer: lifecycle.Actor{ID: "r1", Role: lifecycle.RoleReviewer}, Outcome: lifecycle.ReviewCommented, Body: "nit", SubmittedAt: ts(2 * time.Minute)},
	}
	update(t, s, func(tx lifecycle.Tx) error {
		errs := []error{tx.CreateSubmission(t.Context(), sub1), tx.CreateSubmission(t.Context(), sub2)}
		for _, r := range reviews {
			errs = append(errs, tx.CreateReview(t.Context(), r))
		}
		return errors.Join(errs...)
	})
	got, err := s.Reviews(t.Context(), "sub_1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(reviews[:2], got, equateEmpty); diff != "" {
		t.Errorf("Reviews(sub_1) in insertion order (-want +got):\n%s", diff)
	}
	update(t, s, func(tx lifecycle.Tx) error {
		got, err := tx.Reviews(t.Context(), "sub_2")
		if err == nil && (len(got) != 1 || got[0].ID != "rev_c") {
			t.Errorf("Tx.Reviews(sub_2) = %v, want [rev_c]", got)
		}
		return err
	})
	if got, err := s.Reviews(t.Context(), "sub_none"); err != nil || len(got) != 0 {
		t.Errorf("Reviews(none) = %v, %v; want empty", got, err)
	}
}

func testChecks(t *testing.T, h Harness) {
	s := open(t, h)
	task := minimalTask(1)
	create(t, s, task)
	const sha1, sha2 = "1111111111111111111111111111111111111111", "2222222222222222222222222222222222222222"
	check := func(source lifecycle.CheckSource, name string, st lifecycle.CheckStatus, sha string, url *string) lifecycle.Check {
		return lifecycle.Check{TaskID: task.ID, HeadSHA: sha, Source: source, Name: name, Status: st, URL: url, UpdatedAt: ts(0)}
	}
	put := func(source lifecycle.CheckSource, sha string, checks ...lifecycle.Check) func(tx lifecycle.Tx) error {
		return func(tx lifecycle.Tx) error {
			return tx.PutChecks(t.Context(), lifecycle.PutChecksParams{TaskID: task.ID, HeadSHA: sha, Source: source, Checks: checks})
		}
	}
	update(t, s, func(tx lifecycle.Tx) error {
		return errors.Join(
			put(lifecycle.SourceReported, sha1,
				check(lifecycle.SourceReported, "unit", lifecycle.CheckRunning, sha1, nil),
				check(lifecycle.SourceReported, "lint", lifecycle.CheckPassed, sha1, ptr("https://ci.example.com/1")))(tx),
			put(lifecycle.SourceSelfReported, sha1, check(lifecycle.SourceSelfReported, "unit", lifecycle.CheckPassed, sha1, nil))(tx),
			put(lifecycle.SourceReported, sha2, check(lifecycle.SourceReported, "unit", lifecycle.CheckFailed, sha2, nil))(tx),
			put(lifecycle.SourceReported, sha2)(tx), // none: nothing changes
		)
	})
	// A later report of the same check replaces it, and leaves the others
	// of its source.
	later := check(lifecycle.SourceReported, "unit", lifecycle.CheckPassed, sha1, ptr("https://ci.example.com/2"))
	later.UpdatedAt = ts(time.Minute)
	update(t, s, put(lifecycle.SourceReported, sha1, later))

	got, err := s.Checks(t.Context(), task.ID, sha1)
	if err != nil {
		t.Fatal(err)
	}
	want := []lifecycle.Check{
		check(lifecycle.SourceReported, "lint", lifecycle.CheckPassed, sha1, ptr("https://ci.example.com/1")),
		later,
		check(lifecycle.SourceSelfReported, "unit", lifecycle.CheckPassed, sha1, nil),
	}
	if diff := cmp.Diff(want, got, equateEmpty); diff != "" {
		t.Errorf("Checks(sha1) ordered by source and name (-want +got):\n%s", diff)
	}
	update(t, s, func(tx lifecycle.Tx) error {
		got, err := tx.Checks(t.Context(), task.ID, sha2)
		if err == nil && (len(got) != 1 || got[0].Status != lifecycle.CheckFailed) {
			t.Errorf("Tx.Checks(sha2) = %v, want the failed unit check", got)
		}
		return err
	})
}

func testIdempotencyRecords(t *testing.T, h Harness) {
	s := open(t, h)
	key := lifecycle.IdempotencyScope{PrincipalID: "key_1", Method: "POST", Route: "/tasks/{id}/submit", ResourceID: "tsk_1", Key: "abcdefgh"}
	reserved := lifecycle.IdempotencyRecord{IdempotencyScope: key, Fingerprint: []byte{1, 2, 3},
		CreatedAt: base, ExpiresAt: base.Add(24 * time.Hour), LockedUntil: base.Add(time.Minute), Owner: "web-1"}
	update(t, s, func(tx lifecycle.Tx) error {
		return tx.UpdateIdempotencyRecord(t.Context(), key, func(cur *lifecycle.IdempotencyRecord) (*lifecycle.IdempotencyRecord, error) {
			if cur != nil {
				t.Errorf("UpdateIdempotencyRecord(unknown) called fn with %+v, want nil", cur)
			}
			return &reserved, nil
		})
	})
	if got := idempotencyRecord(t, s, key); !cmp.Equal(&reserved, got, cmpopts.EquateApproxTime(0)) {
		t.Errorf("record inserted (-want +got):\n%s", cmp.Diff(&reserved, got, cmpopts.EquateApproxTime(0)))
	}
	// What fn fails with is returned, and nothing is stored.
	errFn := errors.New("fn failed")
	err := s.Update(t.Context(), func(tx lifecycle.Tx) error {
		return tx.UpdateIdempotencyRecord(t.Context(), key, func(*lifecycle.IdempotencyRecord) (*lifecycle.IdempotencyRecord, error) {
			return nil, errFn
		})
	})
	if !errors.Is(err, errFn) {
		t.Errorf("UpdateIdempotencyRecord(fn fails) error = %v, want fn's", err)
	}
	if got := idempotencyRecord(t, s, key); got == nil {
		t.Errorf("record after fn failed: gone, want kept")
	}
	// Each part of the scope distinguishes keys.
	for _, other := range []lifecycle.IdempotencyScope{
		{PrincipalID: "key_2", Method: key.Method, Route: key.Route, ResourceID: key.ResourceID, Key: key.Key},
		{PrincipalID: key.PrincipalID, Method: "PUT", Route: key.Route, ResourceID: key.ResourceID, Key: key.Key},
		{PrincipalID: key.PrincipalID, Method: key.Method, Route: "/tasks/{id}/ship", ResourceID: key.ResourceID, Key: key.Key},
		{PrincipalID: key.PrincipalID, Method: key.Method, Route: key.Route, ResourceID: "tsk_2", Key: key.Key},
		{PrincipalID: key.PrincipalID, Method: key.Method, Route: key.Route, ResourceID: key.ResourceID, Key: "abcdefgH"},
	} {
		r := reserved
		r.IdempotencyScope = other
		update(t, s, func(tx lifecycle.Tx) error {
			return tx.UpdateIdempotencyRecord(t.Context(), other, func(cur *lifecycle.IdempotencyRecord) (*lifecycle.IdempotencyRecord, error) {
				if cur != nil {
					t.Errorf("UpdateIdempotencyRecord(%+v) found %+v, another key's record", other, cur)
				}
				return &r, nil
			})
		})
	}
	done := reserved
	done.Done, done.StatusCode, done.Body, done.LockedUntil, done.Owner = true, 202, []byte(`{"data":{}}`+"\n"), base, "web-2"
	update(t, s, func(tx lifecycle.Tx) error {
		return tx.UpdateIdempotencyRecord(t.Context(), key, func(cur *lifecycle.IdempotencyRecord) (*lifecycle.IdempotencyRecord, error) {
			if diff := cmp.Diff(&reserved, cur, cmpopts.EquateApproxTime(0)); diff != "" {
				t.Errorf("UpdateIdempotencyRecord(existing) called fn with (-want +got):\n%s", diff)
			}
			return &done, nil
		})
	})
	if diff := cmp.Diff(&done, idempotencyRecord(t, s, key), cmpopts.EquateApproxTime(0)); diff != "" {
		t.Errorf("record after update (-want +got):\n%s", diff)
	}
	n, err := s.Prune(t.Context(), lifecycle.PruneParams{ExpiredBefore: base.Add(25 * time.Hour)})
	if err != nil || n != (lifecycle.PruneResult{IdempotencyRecords: 6}) {
		t.Errorf("Prune(ExpiredBefore) = %+v, %v; want 6 idempotency records", n, err)
	}
	// Insert and delete in one transaction; deleting a missing record
	// deletes nothing.
	update(t, s, func(tx lifecycle.Tx) error {
		for _, r := range []*lifecycle.IdempotencyRecord{&reserved, nil, nil} {
			err := tx.UpdateIdempotencyRecord(t.Context(), key, func(*lifecycle.IdempotencyRecord) (*lifecycle.IdempotencyRecord, error) { return r, nil })
			if err != nil {
				return err
			}
		}
		return nil
	})
	if got := idempotencyRecord(t, s, key); got != nil {
		t.Errorf("after delete: record %+v, want none", got)
	}
}

// testConcurrentFailuresRollBackAlone runs many transactions at once, half
// of which fail after writing: a store that commits them together must roll
// back each failure alone.
func testConcurrentFailuresRollBackAlone(t *testing.T, h Harness) {
	s := open(t, h)
	const n = 64
	boom := errors.New("boom")
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			task := minimalTask(i)
			err := s.Update(context.Background(), func(tx lifecycle.Tx) error {
				if err := tx.CreateTask(context.Background(), task); err != nil {
					return err
				}
				e := event(task.ID, 1, ts(0))
				if err := tx.AppendEvent(context.Background(), &e); err != nil {
					return err
				}
				if i%2 == 1 {
					return boom
				}
				return nil
			})
			if (i%2 == 1) != errors.Is(err, boom) || (i%2 == 0 && err != nil) {
				t.Errorf("transaction %d: error %v", i, err)
			}
		}()
	}
	wg.Wait()
	for i := range n {
		_, err := s.Task(t.Context(), minimalTask(i).ID)
		if i%2 == 0 && err != nil {
			t.Errorf("task of committed transaction %d: %v", i, err)
		}
		if i%2 == 1 && !errors.Is(err, lifecycle.ErrNotFound) {
			t.Errorf("task of failed transaction %d: error %v, want ErrNotFound", i, err)
		}
	}
	evs, err := s.Events(t.Context(), lifecycle.EventFilter{Limit: 1000})
	if err != nil || len(evs) != n/2 {
		t.Errorf("%d events, %v; want %d", len(evs), err, n/2)
	}
}

func shipOp(taskID, id string, status lifecycle.ShipStatus, queued time.Duration) lifecycle.ShipOperation {
	return lifecycle.ShipOperation{
		TaskID: taskID, OperationID: id, Status: status, QueuedAt: ts(queued),
		Mode: lifecycle.ShipMergeOnly, TargetEnvironment: lifecycle.EnvironmentStaging,
		ExpectedHeadSHA: "0123456789abcdef0123456789abcdef01234567", SubmissionMode: lifecycle.ModeAdapterManaged,
		PullRequest: lifecycle.PullRequestRef{Owner: "acme", Repo: "web", Number: 7},
		Actor:       lifecycle.Actor{ID: "agent", Role: lifecycle.RoleAgent}, LeaseUntil: ts(queued),
	}
}

func testShipOperations(t *testing.T, h Harness) {
	s := open(t, h)
	task := minimalTask(1)
	create(t, s, task)
	queued := shipOp(task.ID, "shp_1", lifecycle.ShipQueued, 0)
	queued.TraceID = ptr("4bf92f3577b34da6a3ce929d0e0e4736")
	update(t, s, func(tx lifecycle.Tx) error { return tx.CreateShipOperation(t.Context(), queued) })
	got, err := s.ShipOperation(t.Context(), "shp_1")
	if err != nil {
		t.Fatal(err)
	}
	opts := cmp.Options{equateEmpty, cmpopts.IgnoreFields(lifecycle.ShipOperation{}, "AvailableActions")}
	if diff := cmp.Diff(queued, got, opts); diff != "" {
		t.Errorf("queued operation (-want +got):\n%s", diff)
	}
	// A running operation that waits for a rate limit says why.
	waiting := queued
	waiting.Status, waiting.StartedAt, waiting.Attempts = lifecycle.ShipRunning, ptr(ts(time.Second)), 1
	waiting.Wait = &lifecycle.ShipWait{Reason: "rate_limited", Message: "GitHub's rate limit is spent.", Until: ts(time.Hour)}
	update(t, s, func(tx lifecycle.Tx) error { return tx.UpdateShipOperation(t.Context(), waiting) })
	if got, err := s.ShipOperation(t.Context(), "shp_1"); err != nil || !cmp.Equal(waiting, got, opts) {
		t.Errorf("waiting operation = %v (-want +got):\n%s", err, cmp.Diff(waiting, got, opts))
	}
	done := queued
	done.Status, done.StartedAt, done.FinishedAt = lifecycle.ShipSucceeded, ptr(ts(time.Second)), ptr(ts(2*time.Second))
	done.MergeCommitSHA, done.Attempts, done.LeaseUntil = ptr("fedcba9876543210fedcba9876543210fedcba98"), 2, ts(time.Minute)
	done.Deployment = &lifecycle.Deployment{ID: "dep_1", Environment: lifecycle.EnvironmentStaging, CommitSHA: *done.MergeCommitSHA, URL: "file:///deploy", DeployedAt: ts(2 * time.Second)}
	done.Error = &lifecycle.ShipError{Code: "none", Message: "kept as given"}
	update(t, s, func(tx lifecycle.Tx) error { return tx.UpdateShipOperation(t.Context(), done) })
	update(t, s, func(tx lifecycle.Tx) error {
		got, err := tx.ShipOperation(t.Context(), "shp_1")
		if err == nil {
			if diff := cmp.Diff(done, got, opts); diff != "" {
				t.Errorf("updated operation (-want +got):\n%s", diff)
			}
		}
		return err
	})
	if _, err := s.ShipOperation(t.Context(), "shp_missing"); !errors.Is(err, lifecycle.ErrNotFound) {
		t.Errorf("ShipOperation(missing) error = %v, want ErrNotFound", err)
	}
	err = s.Update(t.Context(), func(tx lifecycle.Tx) error {
		return tx.UpdateShipOperation(t.Context(), shipOp(task.ID, "shp_missing", lifecycle.ShipQueued, 0))
	})
	if !errors.Is(err, lifecycle.ErrNotFound) {
		t.Errorf("UpdateShipOperation(missing) error = %v, want ErrNotFound", err)
	}
	err = s.Update(t.Context(), func(tx lifecycle.Tx) error { return tx.CreateShipOperation(t.Context(), queued) })
	if !errors.Is(err, lifecycle.ErrConflict) {
		t.Errorf("CreateShipOperation(same ID) error = %v, want ErrConflict", err)
	}
}

// testShipOperationsOfTask queues operations of two tasks, interleaved and
// with IDs that do not sort in the order they were queued, and updates the
// oldest: each task lists its own, oldest first, as stored.
func testShipOperationsOfTask(t *testing.T, h Harness) {
	s := open(t, h)
	task, other, idle := minimalTask(1), minimalTask(2), minimalTask(3)
	create(t, s, task, other, idle)
	want := []lifecycle.ShipOperation{
		shipOp(task.ID, "shp_c", lifecycle.ShipQueued, 0),
		shipOp(task.ID, "shp_a", lifecycle.ShipQueued, time.Minute),
		shipOp(task.ID, "shp_b", lifecycle.ShipRunning, 2*time.Minute),
	}
	want[2].TraceID, want[2].LeaseOwner, want[2].Attempts, want[2].StartedAt = ptr("4bf92f3577b34da6a3ce929d0e0e4736"), "runner-1", 1, ptr(ts(2*time.Minute))
	wantOther := []lifecycle.ShipOperation{
		shipOp(other.ID, "shp_z", lifecycle.ShipQueued, 30*time.Second),
		shipOp(other.ID, "shp_0", lifecycle.ShipQueued, 90*time.Second),
	}
	for _, op := range []lifecycle.ShipOperation{want[0], wantOther[0], want[1], wantOther[1], want[2]} {
		update(t, s, func(tx lifecycle.Tx) error { return tx.CreateShipOperation(t.Context(), op) })
	}
	// The oldest finishes; it keeps its place.
	done := &want[0]
	done.Status, done.StartedAt, done.FinishedAt = lifecycle.ShipFailed, ptr(ts(time.Second)), ptr(ts(3*time.Minute))
	done.Attempts, done.LeaseUntil = 2, ts(4*time.Minute)
	done.Deployment = &lifecycle.Deployment{ID: "dep_1", Environment: lifecycle.EnvironmentStaging, CommitSHA: "fedcba9876543210fedcba9876543210fedcba98", URL: "file:///deploy", DeployedAt: ts(2 * time.Second)}
	done.Error = &lifecycle.ShipError{Code: "deploy_failed", Message: "the deployer gave up"}
	update(t, s, func(tx lifecycle.Tx) error { return tx.UpdateShipOperation(t.Context(), *done) })
	opts := cmp.Options{equateEmpty, cmpopts.IgnoreFields(lifecycle.ShipOperation{}, "AvailableActions")}
	cases := []struct {
		name   string
		taskID string
		want   []lifecycle.ShipOperation
	}{
		{"three, oldest first", task.ID, want},
		{"the other task's", other.ID, wantOther},
		{"a task without operations", idle.ID, nil},
		{"an unknown task", "tsk_missing", nil},
	}
	for _, c := range cases {
		got, err := s.ShipOperations(t.Context(), c.taskID)
		if err != nil {
			t.Errorf("ShipOperations(%s), %s: %v", c.taskID, c.name, err)
			continue
		}
		if diff := cmp.Diff(c.want, got, opts); diff != "" {
			t.Errorf("ShipOperations(%s), %s (-want +got):\n%s", c.taskID, c.name, diff)
		}
	}
}

func testClaimShipOperations(t *testing.T, h Harness) {
	s := open(t, h)
	task := minimalTask(1)
	create(t, s, task)
	held := shipOp(task.ID, "shp_g", lifecycle.ShipRunning, time.Hour) // held by "me" for an hour
	held.LeaseOwner = "me"
	ops := []lifecycle.ShipOperation{
		shipOp(task.ID, "shp_a", lifecycle.ShipQueued, 0),
		shipOp(task.ID, "shp_b", lifecycle.ShipRunning, time.Second), // lease ends at +1s
		shipOp(task.ID, "shp_c", lifecycle.ShipRunning, time.Hour),   // lease ends at +1h
		shipOp(task.ID, "shp_d", lifecycle.ShipSucceeded, 0),
		shipOp(task.ID, "shp_e", lifecycle.ShipFailed, 0),
		shipOp(task.ID, "shp_f", lifecycle.ShipQueued, time.Minute),
		held,
	}
	update(t, s, func(tx lifecycle.Tx) error {
		var errs []error
		for _, op := range ops {
			errs = append(errs, tx.CreateShipOperation(t.Context(), op))
		}
		return errors.Join(errs...)
	})
	claim := func(p lifecycle.ClaimShipOperationsParams) []lifecycle.ShipOperation {
		var got []lifecycle.ShipOperation
		update(t, s, func(tx lifecycle.Tx) error {
			var err error
			got, err = tx.ClaimShipOperations(t.Context(), p)
			return err
		})
		return got
	}
	ids := func(ops []lifecycle.ShipOperation) []string {
		var out []string
		for _, op := range ops {
			out = append(out, op.OperationID)
		}
		return out
	}
	// At +0 no lease has ended: the queued ones, oldest first, up to the limit.
	got := claim(lifecycle.ClaimShipOperationsParams{Owner: "a", Now: base, Until: base.Add(time.Minute), Limit: 1})
	if diff := cmp.Diff([]string{"shp_a"}, ids(got)); diff != "" {
		t.Fatalf("claim at +0, limit 1 (-want +got):\n%s", diff)
	}
	op := got[0]
	if op.Status != lifecycle.ShipRunning || op.Attempts != 1 || op.LeaseOwner != "a" || !op.LeaseUntil.Equal(base.Add(time.Minute)) || op.StartedAt == nil {
		t.Errorf("claimed operation = %+v; want running, attempt 1, owner a, lease until +1m, started", op)
	}
	stored, err := s.ShipOperation(t.Context(), "shp_a")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(op, stored, cmpopts.EquateApproxTime(time.Millisecond)); diff != "" {
		t.Errorf("stored claim differs from the returned one (-returned +stored):\n%s", diff)
	}
	// At +1m: shp_b's lease ended; shp_a is now held by a until +1m (not before it).
	got = claim(lifecycle.ClaimShipOperationsParams{Owner: "b", Now: base.Add(time.Minute), Until: base.Add(2 * time.Minute), Limit: 10})
	if diff := cmp.Diff([]string{"shp_b", "shp_f"}, ids(got)); diff != "" {
		t.Errorf("claim at +1m (-want +got):\n%s", diff)
	}
	// Resume takes what the owner holds, lease or not.
	got = claim(lifecycle.ClaimShipOperationsParams{Owner: "me", Now: base.Add(time.Minute), Until: base.Add(2 * time.Minute), Limit: 10, Resume: true})
	if diff := cmp.Diff([]string{"shp_g"}, ids(got)); diff != "" {
		t.Errorf("resume at +1m (-want +got):\n%s", diff)
	}
	if len(got) == 1 && got[0].Attempts != 1 {
		t.Errorf("resumed attempts = %d, want 1", got[0].Attempts)
	}
	// Without Resume, the owner's own running operations wait for their lease.
	got = claim(lifecycle.ClaimShipOperationsParams{Owner: "me", Now: base.Add(time.Minute), Until: base.Add(2 * time.Minute), Limit: 10})
	if len(got) != 0 {
		t.Errorf("claim without resume = %v, want none", ids(got))
	}
}
