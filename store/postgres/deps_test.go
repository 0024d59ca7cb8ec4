package postgres_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
)

// Two replicas make two tasks depend on each other at once: the reads for
// update of the dependency checks order them, so one wins and the other
// meets dependency_cycle, however they interleave. A dependency that
// becomes done while a replica makes a task depend on it leaves that task
// waiting on nothing, whichever commits first.
func TestConcurrentDependencies(t *testing.T) {
	t.Parallel()
	r := newReplicas(t, 2, nil, nil)
	ctx := t.Context()
	web := "web"
	create := func(ident string) string {
		t.Helper()
		task, err := r.svcs[0].CreateTask(ctx, lifecycle.CreateTaskParams{Identifier: ident, Title: ident,
			Links: lifecycle.TaskLinks{Issue: "https://issues.example.com/" + ident}, Context: lifecycle.TaskContext{Project: &web}, Actor: ops})
		if err != nil {
			t.Fatal(err)
		}
		return task.ID
	}
	for round := range 8 {
		a, b := create(fmt.Sprintf("CYC-%d-A", round)), create(fmt.Sprintf("CYC-%d-B", round))
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for i, pair := range [][2]string{{a, b}, {b, a}} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = r.svcs[i].SetDependencies(ctx, pair[0], lifecycle.SetDependenciesParams{DependsOn: []string{pair[1]}, Actor: ops})
			}()
		}
		wg.Wait()
		var conflict *lifecycle.ConflictError
		won := 0
		for _, err := range errs {
			switch {
			case err == nil:
				won++
			case errors.As(err, &conflict) && conflict.Reason == "dependency_cycle":
			default:
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if won != 1 {
			t.Fatalf("round %d: %d of two crossed dependencies were taken (%v), want one", round, won, errs)
		}
	}

	for round := range 4 {
		dependent := create(fmt.Sprintf("REL-%d-D", round))
		var wg sync.WaitGroup
		var shipErr, setErr error
		var depID string
		ready := make(chan string, 1)
		wg.Add(2)
		go func() {
			defer wg.Done()
			depID, _, shipErr = shipTask(ctx, r.svcs[0], fmt.Sprintf("REL-%d-X", round))
			ready <- depID
		}()
		go func() {
			defer wg.Done()
			id := <-ready
			if id == "" {
				return
			}
			_, setErr = r.svcs[1].SetDependencies(ctx, dependent, lifecycle.SetDependenciesParams{DependsOn: []string{id}, Actor: ops})
		}()
		wg.Wait()
		if shipErr != nil || setErr != nil {
			t.Fatalf("round %d: ship %v, set dependencies %v", round, shipErr, setErr)
		}
		waitUntil(t, 20*time.Second, "the dependency to be done", func() bool {
			dep, err := r.svcs[1].Task(ctx, depID)
			return err == nil && dep.Status == lifecycle.StatusDone
		})
		got, err := r.svcs[0].Task(ctx, dependent)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.DependsOn, []string{depID}) || len(got.WaitingOn) != 0 {
			t.Errorf("round %d: once its dependency is done, dependsOn %v, waitingOn %v; want [%s], []", round, got.DependsOn, got.WaitingOn, depID)
		}
	}
}
