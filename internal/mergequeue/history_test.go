package mergequeue

import (
	"encoding/json"
	"os"
	"slices"
	"strconv"
	"testing"
)

// TestRandomHistoriesWithRounds drives the queue through harder random
// histories than TestRandomHistories: bursts that switch it between its
// quiet rounds and its loaded chain mid-round, entries sent back that come
// back (some fixed), removals, pauses, base moves, late duplicate
// answers, and the State saved to JSON and read back before every event,
// as the driver does. LIFECYCLE_QUEUE_SEEDS runs more seeds than the 6
// of a test run (300 passed when it was written).
func TestRandomHistoriesWithRounds(t *testing.T) {
	t.Parallel()
	for seed := range uint64(historySeeds()) {
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) {
			t.Parallel()
			m := newModel(t, seed, Config{Depth: 2 + int(seed%9), MaxBatch: 2 + int(seed%11), Speculation: 1 + int(seed%3)})
			entries := 0
			reworked := []string{}
			roundtrip := func() {
				b, err := json.Marshal(m.q)
				if err != nil {
					t.Fatal(err)
				}
				var q State
				if err := json.Unmarshal(b, &q); err != nil {
					t.Fatal(err)
				}
				m.q = &q
			}
			addRate := 10 + int(seed%4)*10
			for step := 0; step < 500 || len(m.pending) > 0 || m.q.Paused; step++ {
				if step > 20000 {
					t.Fatalf("livelock: pending %d, candidates %+v", len(m.pending), m.q.Candidates)
				}
				roundtrip()
				switch r := m.rng.IntN(100); {
				case step < 500 && r < addRate:
					n := 1
					if m.rng.IntN(8) == 0 {
						n = 5 + m.rng.IntN(20) // a burst
					}
					for range n {
						m.addEntry(entries, 8, 30, 6)
						entries++
					}
				case step < 500 && r < addRate+5:
					// An entry sent back comes back, fixed or not.
					for id, why := range m.out {
						if why == "rework" && !slices.Contains(reworked, id) && m.rng.IntN(2) == 0 {
							reworked = append(reworked, id)
							m.out[id] = ""
							m.stale[id] = false
							if p := m.partner[id]; p != "" {
								delete(m.partner, p)
								delete(m.partner, id)
							}
							if m.rng.IntN(2) == 0 {
								m.broken[id] = false
							}
							m.apply(Add{Entry: Entry{ID: id, Head: id + "-head2"}})
							break
						}
					}
				case step < 500 && r < addRate+8 && entries > 0:
					m.removeEntry(entries)
				case step < 500 && r < addRate+10:
					m.apply(Pause{})
				case r < addRate+15 && m.q.Paused:
					m.apply(Resume{})
				case step < 500 && r < addRate+16:
					m.pushBase()
				case len(m.pending) > 0:
					ev := m.answer()
					if m.rng.IntN(20) == 0 {
						m.apply(ev) // a late duplicate answer
					}
				case m.q.Paused:
					m.apply(Resume{})
				}
			}
			for i := range entries {
				id := "e" + strconv.Itoa(i)
				if m.out[id] == "" {
					t.Errorf("entry %s never ended (queue: %+v; candidates %+v; groups %+v)", id, m.q.entry(id), m.q.Candidates, m.q.Groups)
				}
				if m.out[id] == "done" && m.broken[id] {
					t.Errorf("broken entry %s landed", id)
				}
			}
		})
	}
}

// historySeeds is how many seeds TestRandomHistoriesWithRounds runs.
func historySeeds() int {
	if n, err := strconv.Atoi(os.Getenv("LIFECYCLE_QUEUE_SEEDS")); err == nil && n > 0 {
		return n
	}
	return 6
}
