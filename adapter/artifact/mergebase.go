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
	// A common ancestor found first may turn out to be an ancestor of
	// another (clock skew); those are stale by now.
	for _, h := range found {
		if flags[h]&stale == 0 {
			return h, nil
		}
	}
	if len(found) > 0 {
		return found[0], nil
	}
	return plumbing.ZeroHash, nil
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
