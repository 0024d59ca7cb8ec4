package artifact

import (
	"bytes"
	"container/heap"

	"github.com/go-git/go-git/v5/plumbing"
)

// Flags of the commits mergeBase visits.
const (
	fromOne uint8 = 1 << iota // reachable from the first commit
	fromTwo                   // reachable from the second commit
	stale                     // an ancestor of a common ancestor
	result                    // a common ancestor found
)

// mergeBase returns a best common ancestor of a and b, or the zero hash
// when their histories are unrelated. It paints the commits down from both
// sides newest first, by committer time, as git does without a
// commit-graph, and stops once every commit still queued is an ancestor of
// a common ancestor found. It therefore reads the commits made since the
// two histories forked, not the whole history: go-git's
// Commit.MergeBase indexes every ancestor of the newer commit, which grows
// with each merge. When there are several best common ancestors it
// returns the newest.
func (r *repo) mergeBase(a, b plumbing.Hash) (plumbing.Hash, error) {
	if a == b {
		return a, nil
	}
	flags := make(map[plumbing.Hash]uint8)
	q := &commitQueue{}
	push := func(h plumbing.Hash, f uint8) error {
		c, err := r.commitInfo(h)
		if err != nil {
			return err
		}
		flags[h] |= f
		heap.Push(q, queued{hash: h, when: c.when, parents: c.parents})
		return nil
	}
	if err := push(a, fromOne); err != nil {
		return plumbing.ZeroHash, err
	}
	if err := push(b, fromTwo); err != nil {
		return plumbing.ZeroHash, err
	}
	var found []plumbing.Hash
	for q.nonStale(flags) {
		c := heap.Pop(q).(queued)
		f := flags[c.hash] & (fromOne | fromTwo | stale)
		if f == fromOne|fromTwo {
			if flags[c.hash]&result == 0 {
				flags[c.hash] |= result
				found = append(found, c.hash)
			}
			f |= stale
		}
		for _, p := range c.parents {
			if flags[p]&f == f {
				continue
			}
			if err := push(p, f); err != nil {
				return plumbing.ZeroHash, err
			}
		}
	}
	// A common ancestor found may be an ancestor of another found: commit
	// times tie (a second holds many commits) or are skewed, so the walk
	// may pop a commit before its child, and stop before marking the
	// older one stale. As git's remove_redundant does, such a one is
	// dropped, whatever the marks say.
	for _, h := range found {
		redundant := false
		for _, g := range found {
			if g == h {
				continue
			}
			anc, err := r.isAncestor(h, g)
			if err != nil {
				return plumbing.ZeroHash, err
			}
			if anc {
				redundant = true
				break
			}
		}
		if !redundant {
			return h, nil
		}
	}
	return plumbing.ZeroHash, nil
}

// isAncestor reports whether anc is h or one of h's ancestors, walking
// h's history (all of it, when it is not).
func (r *repo) isAncestor(anc, h plumbing.Hash) (bool, error) {
	seen := map[plumbing.Hash]bool{h: true}
	for next := []plumbing.Hash{h}; len(next) > 0; {
		c := next[len(next)-1]
		next = next[:len(next)-1]
		if c == anc {
			return true, nil
		}
		info, err := r.commitInfo(c)
		if err != nil {
			return false, err
		}
		for _, p := range info.parents {
			if !seen[p] {
				seen[p] = true
				next = append(next, p)
			}
		}
	}
	return false, nil
}

// queued is a commit in mergeBase's queue.
type queued struct {
	hash    plumbing.Hash
	when    int64 // committer time, Unix seconds
	parents []plumbing.Hash
}

// commitQueue orders commits newest first; it implements heap.Interface.
type commitQueue []queued

func (q commitQueue) Len() int { return len(q) }
func (q commitQueue) Less(i, j int) bool {
	if q[i].when != q[j].when {
		return q[i].when > q[j].when
	}
	return bytes.Compare(q[i].hash[:], q[j].hash[:]) < 0
}
func (q commitQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *commitQueue) Push(x any)   { *q = append(*q, x.(queued)) }
func (q *commitQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}

// nonStale reports whether a queued commit is not known to be an ancestor
// of a common ancestor.
func (q commitQueue) nonStale(flags map[plumbing.Hash]uint8) bool {
	for _, c := range q {
		if flags[c.hash]&stale == 0 {
			return true
		}
	}
	return false
}
