package sqlite

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/tasklifecycle/lifecycle"
)

// TestMixedBatchCommitsRelaxedFirst: of a batch holding both kinds, the
// relaxed transactions commit first (without waiting for the durable
// ones' fsync), though the durable one was handed over before them; a
// batch of one kind commits as it came.
func TestMixedBatchCommitsRelaxedFirst(t *testing.T) {
	t.Parallel()
	s, err := New(Config{Path: filepath.Join(t.TempDir(), "lifecycle.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	req := func(relaxed bool, fn func(x *txn) error) *writeReq {
		return &writeReq{ctx: ctx, fn: fn, relaxed: relaxed, done: make(chan writeResult, 1)}
	}
	task := lifecycle.Task{ID: "tsk_relaxed", Identifier: "MIX-1", Status: lifecycle.StatusTodo, Version: 1}
	var sawRelaxed bool
	durable := req(false, func(x *txn) error {
		_, err := x.Task(ctx, task.ID)
		sawRelaxed = err == nil
		return nil
	})
	relaxed := req(true, func(x *txn) error { return x.CreateTask(ctx, task) })
	// The writer waits for requests: the batch is committed here instead.
	s.commitAll([]*writeReq{durable, relaxed})
	for _, r := range []*writeReq{durable, relaxed} {
		if res := <-r.done; res.err != nil {
			t.Fatal(res.err)
		}
	}
	if !sawRelaxed {
		t.Error("the durable transaction, handed over first, ran before the relaxed one of its batch")
	}
	// Two durable ones: in the order they came.
	var order []string
	first := req(false, func(*txn) error { order = append(order, "first"); return nil })
	second := req(false, func(*txn) error { order = append(order, "second"); return nil })
	s.commitAll([]*writeReq{first, second})
	<-first.done
	<-second.done
	if len(order) != 2 || order[0] != "first" {
		t.Errorf("ran %v, want first then second", order)
	}
}
