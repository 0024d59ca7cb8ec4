package signal

import (
	"sync"
	"testing"
)

func TestSignal(t *testing.T) {
	t.Parallel()
	s := New()
	var mu sync.Mutex
	var called []string
	note := func(name string) func() {
		return func() { mu.Lock(); called = append(called, name); mu.Unlock() }
	}
	_, ok := s.Notify(note("a"))
	stopB, okB := s.Notify(note("b"))
	if !ok || !okB {
		t.Fatal("Notify on an open Signal refused")
	}
	stopB()
	select {
	case <-s.C():
		t.Fatal("closed before Close")
	default:
	}
	s.Close()
	s.Close()
	<-s.C()
	if len(called) != 1 || called[0] != "a" {
		t.Fatalf("called %v, want [a]", called)
	}
	if _, ok := s.Notify(note("c")); ok {
		t.Fatal("Notify on a closed Signal accepted")
	}
}

func TestSignalConcurrent(t *testing.T) {
	t.Parallel()
	s := New()
	var wg sync.WaitGroup
	var mu sync.Mutex
	n := 0
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, ok := s.Notify(func() { mu.Lock(); n++; mu.Unlock() }); !ok {
				mu.Lock()
				n++ // closed already: counts as told
				mu.Unlock()
			}
		}()
	}
	s.Close()
	wg.Wait()
	if n != 50 {
		t.Fatalf("%d of 50 waiters told", n)
	}
}
