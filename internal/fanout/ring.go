package fanout

// ring is a fixed-size circular buffer of the newest items, oldest first,
// with their sequences. It holds every item pushed with a sequence greater
// than base.
type ring[T any] struct {
	items []T
	seqs  []int64 // seqs[i] is the sequence of items[i]
	start int     // index of the oldest item
	n     int     // items held
	base  int64   // the sequence of the last item dropped, or where loading started
}

// newRing returns an empty ring of size items.
func newRing[T any](size int) ring[T] {
	return ring[T]{items: make([]T, size), seqs: make([]int64, size)}
}

// push appends item of sequence seq, dropping the oldest item when the
// ring is full.
func (r *ring[T]) push(seq int64, item T) {
	i := (r.start + r.n) % len(r.items)
	if r.n == len(r.items) {
		r.base = r.seqs[r.start]
		r.start = (r.start + 1) % len(r.items)
	} else {
		r.n++
	}
	r.items[i], r.seqs[i] = item, seq
}

// index returns the index in items and seqs of the i-th oldest item held.
func (r *ring[T]) index(i int) int { return (r.start + i) % len(r.items) }

// last returns the index in items and seqs of the newest item held; the
// ring must not be empty.
func (r *ring[T]) last() int { return r.index(r.n - 1) }

// search returns the position, oldest first, of the oldest item with a
// sequence greater than seq, or n when there is none.
func (r *ring[T]) search(seq int64) int {
	lo, hi := 0, r.n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if r.seqs[r.index(m)] > seq {
			hi = m
		} else {
			lo = m + 1
		}
	}
	return lo
}
