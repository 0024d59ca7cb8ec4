package memory_test

// Tests of what storetest does not prove of this Store: rollback after a
// panic, values copied in and out, the notifications, and the undoing of
// deletions.

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/store/memory"
)

var at = time.Date(2026, 11, 21, 10, 4, 5, 123_000_000, time.UTC)

func newStore(t *testing.T) *memory.Store {
	t.Helper()
	s := memory.New()
	t.Cleanup(func() { s.Close() })
	return s
}

func update(t *testing.T, s *memory.Store, fn func(tx lifecycle.Tx) error) {
	t.Helper()
	if err := s.Update(t.Context(), fn); err != nil {
		t.Fatal(err)
	}
}

func task(n int) lifecycle.Task {
	return lifecycle.Task{ID: fmt.Sprintf("tsk_%d", n), Identifier: fmt.Sprintf("ENG-%d", n), Title: "t",
		Status: lifecycle.StatusTodo, Priority: lifecycle.PriorityMedium, Version: 1,
		CreatedAt: lifecycle.NewTimestamp(at), UpdatedAt: lifecycle.NewTimestamp(at)}
}

// A panic in a transaction's function reaches its caller, keeps nothing
// the function wrote, and leaves the Store working.
func TestPanicRollsBack(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Errorf("recovered %v, want the transaction's panic", r)
			}
		}()
		s.Update(t.Context(), func(tx lifecycle.Tx) error {
			if err := tx.CreateTask(t.Context(), task(1)); err != nil {
				return err
			}
			panic("boom")
		})
	}()
	if _, err := s.Task(t.Context(), task(1).ID); !errors.Is(err, lifecycle.ErrNotFound) {
		t.Errorf("task of a transaction that panicked: error = %v, want ErrNotFound", err)
	}
	update(t, s, func(tx lifecycle.Tx) error { return tx.CreateTask(t.Context(), task(1)) })
}

// A caller whose context ends before its turn is not run.
func TestCancelledBeforeItsTurn(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	ran := false
	err := s.Update(ctx, func(tx lifecycle.Tx) error { ran = true; return nil })
	if !errors.Is(err, context.Canceled) || ran {
		t.Errorf("Update with a cancelled context: error %v, ran %v; want context.Canceled and not run", err, ran)
	}
}

// A subscription deleted in a transaction that fails comes back with its
// delivery attempts, in their places; one deleted and created again in a
// transaction that commits is listed after the others.
func TestDeletionsRollBack(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	sub := func(id string) lifecycle.Subscription {
		return lifecycle.Subscription{ID: id, URL: "https://example.com/hook", EventTypes: []lifecycle.EventType{lifecycle.EventTaskUpdated},
			Status: lifecycle.SubscriptionActive, CreatedAt: lifecycle.NewTimestamp(at)}
	}
	delivery := func(id, subID string) lifecycle.Delivery {
		return lifecycle.Delivery{ID: id, SubscriptionID: subID, EventID: "evt_1", EventSequence: 1, Attempt: 1,
			Status: lifecycle.DeliveryFailed, AttemptedAt: lifecycle.NewTimestamp(at)}
	}
	update(t, s, func(tx lifecycle.Tx) error {
		return errors.Join(tx.CreateSubscription(t.Context(), sub("whs_a")), tx.CreateSubscription(t.Context(), sub("whs_b")),
			tx.CreateDelivery(t.Context(), delivery("dlv_1", "whs_a")), tx.CreateDelivery(t.Context(), delivery("dlv_2", "whs_b")),
			tx.CreateDelivery(t.Context(), delivery("dlv_3", "whs_a")))
	})
	list := func() (subs, deliveries []string) {
		t.Helper()
		page, err := s.ListSubscriptions(t.Context(), lifecycle.ListSubscriptionsParams{Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		for _, sub := range page.Subscriptions {
			subs = append(subs, sub.ID)
			ds, err := s.Deliveries(t.Context(), lifecycle.DeliveryFilter{SubscriptionID: sub.ID, Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range ds.Deliveries {
				deliveries = append(deliveries, d.ID)
			}
		}
		return subs, deliveries
	}
	boom := errors.New("boom")
	err := s.Update(t.Context(), func(tx lifecycle.Tx) error {
		if err := tx.DeleteSubscription(t.Context(), "whs_a"); err != nil {
			return err
		}
		if _, err := tx.Delivery(t.Context(), "dlv_1"); !errors.Is(err, lifecycle.ErrNotFound) {
			t.Errorf("a deleted subscription's attempt read in its transaction: error = %v, want ErrNotFound", err)
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Update = %v, want the function's error", err)
	}
	subs, deliveries := list()
	if want := []string{"whs_a", "whs_b"}; !slices.Equal(subs, want) {
		t.Errorf("subscriptions after a rolled back deletion = %v, want %v", subs, want)
	}
	if want := []string{"dlv_3", "dlv_1", "dlv_2"}; !slices.Equal(deliveries, want) {
		t.Errorf("attempts after a rolled back deletion = %v, want %v", deliveries, want)
	}
	update(t, s, func(tx lifecycle.Tx) error {
		return errors.Join(tx.DeleteSubscription(t.Context(), "whs_a"), tx.CreateSubscription(t.Context(), sub("whs_a")))
	})
	subs, deliveries = list()
	if want := []string{"whs_b", "whs_a"}; !slices.Equal(subs, want) {
		t.Errorf("subscriptions after one was deleted and created again = %v, want %v", subs, want)
	}
	if want := []string{"dlv_2"}; !slices.Equal(deliveries, want) {
		t.Errorf("attempts after a subscription was deleted and created again = %v, want %v", deliveries, want)
	}
}

// The Store's notifications: everything at first, then each kind of
// change a committed transaction made, and nothing of one that failed.
func TestListen(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx, cancel := context.WithCancel(t.Context())
	changes := make(chan lifecycle.Change, 16)
	listening := make(chan error, 1)
	go func() { listening <- s.Listen(ctx, func(c lifecycle.Change) { changes <- c }) }()
	next := func(want lifecycle.Change, after string) {
		t.Helper()
		select {
		case c := <-changes:
			if c != want {
				t.Errorf("after %s, notified of %b, want %b", after, c, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("after %s, no notification in 10s", after)
		}
	}
	next(lifecycle.ChangeAll, "Listen began")
	update(t, s, func(tx lifecycle.Tx) error {
		e := lifecycle.Event{ID: "evt_1", Type: lifecycle.EventTaskUpdated, TaskID: "tsk_1", OccurredAt: lifecycle.NewTimestamp(at)}
		return tx.AppendEvent(t.Context(), &e)
	})
	next(lifecycle.ChangeEvents, "an event was appended")
	// A failed transaction, and one that changed a subscription's cursor
	// only, announce nothing: the next notification is the ship's alone.
	sub := lifecycle.Subscription{ID: "whs_1", URL: "https://example.com/hook", Status: lifecycle.SubscriptionActive}
	update(t, s, func(tx lifecycle.Tx) error { return tx.CreateSubscription(t.Context(), sub) })
	next(lifecycle.ChangeSubscriptions, "a subscription was created")
	s.Update(t.Context(), func(tx lifecycle.Tx) error {
		e := lifecycle.Event{ID: "evt_2", Type: lifecycle.EventTaskUpdated, TaskID: "tsk_1", OccurredAt: lifecycle.NewTimestamp(at)}
		return errors.Join(tx.AppendEvent(t.Context(), &e), errors.New("boom"))
	})
	sub.Cursor = 1
	update(t, s, func(tx lifecycle.Tx) error { return tx.UpdateSubscription(t.Context(), sub) })
	update(t, s, func(tx lifecycle.Tx) error {
		return tx.CreateShipOperation(t.Context(), lifecycle.ShipOperation{OperationID: "shp_1", TaskID: "tsk_1", Status: lifecycle.ShipQueued})
	})
	next(lifecycle.ChangeShips, "a rolled back event, a cursor moved, and a ship queued")
	sub.Status = lifecycle.SubscriptionDisabled
	update(t, s, func(tx lifecycle.Tx) error { return tx.UpdateSubscription(t.Context(), sub) })
	next(lifecycle.ChangeSubscriptions, "a subscription was disabled")
	cancel()
	if err := <-listening; !errors.Is(err, context.Canceled) {
		t.Errorf("Listen after its context ended = %v, want context.Canceled", err)
	}

	go func() { listening <- s.Listen(t.Context(), func(lifecycle.Change) {}) }()
	s.Close()
	if err := <-listening; !errors.Is(err, lifecycle.ErrClosed) {
		t.Errorf("Listen when the Store closed = %v, want ErrClosed", err)
	}
	if err := s.Listen(t.Context(), func(lifecycle.Change) {}); !errors.Is(err, lifecycle.ErrClosed) {
		t.Errorf("Listen on a closed Store = %v, want ErrClosed", err)
	}
}

// Changing what was given to the Store, or what it gave back, changes
// nothing stored, for every kind of record: each is filled through
// reflection, so that a member added later is covered too.
func TestValuesAreCopied(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	type kind struct {
		name string
		// put stores a filled value, get reads it back; each returns
		// the value given or read, as a pointer the test scribbles over.
		put func(s *memory.Store) (any, error)
		get func(s *memory.Store) (any, error)
	}
	kinds := []kind{
		{"task",
			func(s *memory.Store) (any, error) {
				v := filled[lifecycle.Task]()
				return &v, s.Update(ctx, func(tx lifecycle.Tx) error { return tx.CreateTask(ctx, v) })
			},
			func(s *memory.Store) (any, error) { v, err := s.Task(ctx, filled[lifecycle.Task]().ID); return &v, err }},
		{"event",
			func(s *memory.Store) (any, error) {
				v := filled[lifecycle.Event]()
				return &v, s.Update(ctx, func(tx lifecycle.Tx) error { return tx.AppendEvent(ctx, &v) })
			},
			func(s *memory.Store) (any, error) {
				evs, err := s.Events(ctx, lifecycle.EventFilter{ID: filled[lifecycle.Event]().ID, Limit: 1})
				if err == nil && len(evs) != 1 {
					err = fmt.Errorf("%d events of the ID, want 1", len(evs))
				}
				return &evs, err
			}},
		{"submission",
			func(s *memory.Store) (any, error) {
				v := filled[lifecycle.Submission]()
				return &v, s.Update(ctx, func(tx lifecycle.Tx) error { return tx.CreateSubmission(ctx, v) })
			},
			func(s *memory.Store) (any, error) {
				subs, err := s.Submissions(ctx, filled[lifecycle.Submission]().TaskID)
				return &subs, err
			}},
		{"check",
			func(s *memory.Store) (any, error) {
				v := filled[lifecycle.Check]()
				return &v, s.Update(ctx, func(tx lifecycle.Tx) error {
					return tx.PutChecks(ctx, lifecycle.PutChecksParams{TaskID: v.TaskID, HeadSHA: v.HeadSHA, Source: v.Source,
						Checks: []lifecycle.Check{v}})
				})
			},
			func(s *memory.Store) (any, error) {
				v := filled[lifecycle.Check]()
				checks, err := s.Checks(ctx, v.TaskID, v.HeadSHA)
				return &checks, err
			}},
		{"ship operation",
			func(s *memory.Store) (any, error) {
				v := filled[lifecycle.ShipOperation]()
				return &v, s.Update(ctx, func(tx lifecycle.Tx) error { return tx.CreateShipOperation(ctx, v) })
			},
			func(s *memory.Store) (any, error) {
				v, err := s.ShipOperation(ctx, filled[lifecycle.ShipOperation]().OperationID)
				return &v, err
			}},
		{"API key",
			func(s *memory.Store) (any, error) {
				v := filled[lifecycle.APIKey]()
				return &v, s.Update(ctx, func(tx lifecycle.Tx) error { return tx.CreateAPIKey(ctx, v) })
			},
			func(s *memory.Store) (any, error) {
				v, err := s.APIKeyByHash(ctx, filled[lifecycle.APIKey]().Hash)
				return &v, err
			}},
		{"subscription",
			func(s *memory.Store) (any, error) {
				v := filled[lifecycle.Subscription]()
				return &v, s.Update(ctx, func(tx lifecycle.Tx) error { return tx.CreateSubscription(ctx, v) })
			},
			func(s *memory.Store) (any, error) {
				v, err := s.Subscription(ctx, filled[lifecycle.Subscription]().ID)
				return &v, err
			}},
		{"delivery",
			func(s *memory.Store) (any, error) {
				sub, v := filled[lifecycle.Subscription](), filled[lifecycle.Delivery]()
				v.SubscriptionID = sub.ID
				return &v, s.Update(ctx, func(tx lifecycle.Tx) error {
					return errors.Join(tx.CreateSubscription(ctx, sub), tx.CreateDelivery(ctx, v))
				})
			},
			func(s *memory.Store) (any, error) {
				var v lifecycle.Delivery
				err := s.Update(ctx, func(tx lifecycle.Tx) error {
					var err error
					v, err = tx.Delivery(ctx, filled[lifecycle.Delivery]().ID)
					return err
				})
				return &v, err
			}},
		{"idempotency record",
			func(s *memory.Store) (any, error) {
				v := filled[lifecycle.IdempotencyRecord]()
				return &v, s.Update(ctx, func(tx lifecycle.Tx) error {
					return tx.UpdateIdempotencyRecord(ctx, v.IdempotencyScope, func(*lifecycle.IdempotencyRecord) (*lifecycle.IdempotencyRecord, error) {
						return &v, nil
					})
				})
			},
			func(s *memory.Store) (any, error) {
				// The record fn is given, which it may change: the
				// transaction stores nothing.
				var v *lifecycle.IdempotencyRecord
				errRead := errors.New("read only")
				err := s.Update(ctx, func(tx lifecycle.Tx) error {
					return tx.UpdateIdempotencyRecord(ctx, filled[lifecycle.IdempotencyRecord]().IdempotencyScope,
						func(cur *lifecycle.IdempotencyRecord) (*lifecycle.IdempotencyRecord, error) {
							v = cur
							return nil, errRead
						})
				})
				if errors.Is(err, errRead) {
					err = nil
					if v == nil {
						err = errors.New("no record")
					}
				}
				return &v, err
			}},
		{"console session",
			func(s *memory.Store) (any, error) {
				v := filled[lifecycle.ConsoleSession]()
				return &v, s.CreateConsoleSession(ctx, v)
			},
			func(s *memory.Store) (any, error) {
				v, err := s.ConsoleSession(ctx, filled[lifecycle.ConsoleSession]().Hash)
				return &v, err
			}},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			s := newStore(t)
			given, err := k.put(s)
			if err != nil {
				t.Fatalf("put: %v", err)
			}
			read, err := k.get(s)
			if err != nil {
				t.Fatalf("get: %v", err)
			}
			want := dump(reflect.ValueOf(read))
			if !strings.ContainsAny(want, "&[") {
				t.Fatalf("the value read holds no pointer or list to change: %s", want)
			}
			scribble(reflect.ValueOf(given).Elem())
			if got, err := k.get(s); err != nil || dump(reflect.ValueOf(got)) != want {
				t.Errorf("changing the value given changed the one stored:\n got %s, %v\nwant %s", dump(reflect.ValueOf(got)), err, want)
			}
			scribble(reflect.ValueOf(read).Elem())
			if got, err := k.get(s); err != nil || dump(reflect.ValueOf(got)) != want {
				t.Errorf("changing the value read changed the one stored:\n got %s, %v\nwant %s", dump(reflect.ValueOf(got)), err, want)
			}
		})
	}
}

// filled returns a T with every exported member set, through every
// pointer and with one element in every list, the same at every call.
func filled[T any]() T {
	var v T
	fill(reflect.ValueOf(&v).Elem())
	return v
}

func fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem())
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0))
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k)
		fill(e)
		v.SetMapIndex(k, e)
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(at))
			return
		}
		for i := range v.NumField() {
			if v.Field(i).CanSet() {
				fill(v.Field(i))
			}
		}
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(1)
	case reflect.Uint8:
		v.SetUint('1') // a byte of JSON
	case reflect.Float64:
		v.SetFloat(0.5)
	}
}

// scribble changes every value reachable from v in place: through
// pointers, in the elements of lists and in maps.
func scribble(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			scribble(v.Elem())
		}
	case reflect.Slice:
		for i := range v.Len() {
			scribble(v.Index(i))
		}
	case reflect.Map:
		for k, e := range v.Seq2() {
			c := reflect.New(e.Type()).Elem()
			c.Set(e)
			scribble(c)
			v.SetMapIndex(k, c)
		}
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(at.Add(time.Hour)))
			return
		}
		for i := range v.NumField() {
			if v.Field(i).CanSet() {
				scribble(v.Field(i))
			}
		}
	case reflect.String:
		v.SetString(v.String() + "!")
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(v.Int() + 1)
	case reflect.Uint8:
		v.SetUint(v.Uint() + 1)
	case reflect.Float64:
		v.SetFloat(v.Float() + 1)
	}
}

// dump writes v out in full, following pointers, so that two dumps are
// equal when the values are, whatever memory they share.
func dump(v reflect.Value) string {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return "nil"
		}
		return "&" + dump(v.Elem())
	case reflect.Slice, reflect.Array:
		var parts []string
		for i := range v.Len() {
			parts = append(parts, dump(v.Index(i)))
		}
		return "[" + strings.Join(parts, " ") + "]"
	case reflect.Map:
		var parts []string
		for k, e := range v.Seq2() {
			parts = append(parts, dump(k)+":"+dump(e))
		}
		slices.Sort(parts)
		return "map[" + strings.Join(parts, " ") + "]"
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			return v.Interface().(time.Time).String()
		}
		var parts []string
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				parts = append(parts, v.Type().Field(i).Name+":"+dump(v.Field(i)))
			}
		}
		return "{" + strings.Join(parts, " ") + "}"
	default:
		return fmt.Sprint(v.Interface())
	}
}
