package memory

import (
	"iter"
	"slices"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/lifecycletype"
)

// tables are the Store's committed data. They change only when a
// transaction commits or a prune runs, under the Store's write lock.
type tables struct {
	tasks *table[lifecycle.Task]
	// identifiers maps a task's Identifier to its ID.
	identifiers dict[string, string]
	// revisions are the tasks' revisions (lifecycle.TaskRevisioner), by
	// ID: one more for every write of the task; absent, 0.
	revisions dict[string, int64]
	// inProgress counts the tasks in progress of each agent, by its ID
	// (lifecycle.Store.CountInProgress); absent, 0.
	inProgress dict[string, int]

	// events are at their sequence: the table's positions.
	events *table[lifecycle.Event]
	// prunedThrough is the greatest sequence of an event pruned, or 0.
	prunedThrough int64

	submissions        *table[lifecycle.Submission]
	reviews            *table[lifecycle.Review]
	checks             dict[checkKey, lifecycle.Check]
	providerDeliveries dict[providerKey, lifecycle.ProviderDelivery]
	ships              *table[lifecycle.ShipOperation]
	idempotency        dict[lifecycle.IdempotencyScope, lifecycle.IdempotencyRecord]

	keys *table[lifecycle.APIKey]
	// keyHashes maps the hash of a key, as a string, to its ID.
	keyHashes dict[string, string]

	subscriptions *table[lifecycle.Subscription]
	deliveries    *table[lifecycle.Delivery]
	leases        dict[string, lifecycle.InstanceLease]
	// sessions are console sessions by their hash, as a string.
	sessions dict[string, lifecycle.ConsoleSession]
	// mergeQueues are the merge queues by ID.
	mergeQueues dict[string, lifecycletype.MergeQueueRecord]
	// ciFailures are the failure records of checks, by their check's key.
	ciFailures dict[checkKey, lifecycletype.CIFailureRecord]
}

// checkKey identifies a check: a later report of it replaces it.
type checkKey struct {
	taskID, headSHA string
	source          lifecycle.CheckSource
	name            string
}

// providerKey identifies a delivery from a code host.
type providerKey struct{ source, id string }

func newTables() *tables {
	return &tables{
		tasks:              newTable[lifecycle.Task](),
		identifiers:        make(dict[string, string]),
		revisions:          make(dict[string, int64]),
		inProgress:         make(dict[string, int]),
		events:             newTable[lifecycle.Event](),
		submissions:        newTable[lifecycle.Submission](),
		reviews:            newTable[lifecycle.Review](),
		checks:             make(dict[checkKey, lifecycle.Check]),
		providerDeliveries: make(dict[providerKey, lifecycle.ProviderDelivery]),
		ships:              newTable[lifecycle.ShipOperation](),
		idempotency:        make(dict[lifecycle.IdempotencyScope, lifecycle.IdempotencyRecord]),
		keys:               newTable[lifecycle.APIKey](),
		keyHashes:          make(dict[string, string]),
		subscriptions:      newTable[lifecycle.Subscription](),
		deliveries:         newTable[lifecycle.Delivery](),
		leases:             make(dict[string, lifecycle.InstanceLease]),
		sessions:           make(dict[string, lifecycle.ConsoleSession]),
		mergeQueues:        make(dict[string, lifecycletype.MergeQueueRecord]),
		ciFailures:         make(dict[checkKey, lifecycletype.CIFailureRecord]),
	}
}

// records is what a table and a transaction's view of it have in common:
// the reads.
type records[V any] interface {
	// get returns the record with the given ID.
	get(id string) (V, bool)
	// all yields every record with its position, in insertion order.
	all() iter.Seq2[int64, V]
}

// table holds records of one kind by ID, each at a position. Positions
// grow by one with each insert and are never given again, even after a
// deletion, so a listing in insertion order pages by position.
type table[V any] struct {
	// last is the last position given.
	last  int64
	byPos map[int64]V
	byID  map[string]int64
	// order holds the positions of the records, ascending.
	order []int64
}

func newTable[V any]() *table[V] {
	return &table[V]{byPos: make(map[int64]V), byID: make(map[string]int64)}
}

func (t *table[V]) get(id string) (V, bool) {
	pos, ok := t.byID[id]
	if !ok {
		var zero V
		return zero, false
	}
	return t.byPos[pos], true
}

func (t *table[V]) all() iter.Seq2[int64, V] { return t.after(0) }

// after yields the records whose position is greater than pos, with
// their positions, in insertion order.
func (t *table[V]) after(pos int64) iter.Seq2[int64, V] {
	return func(yield func(int64, V) bool) {
		i, _ := slices.BinarySearch(t.order, pos+1)
		for _, p := range t.order[i:] {
			if !yield(p, t.byPos[p]) {
				return
			}
		}
	}
}

// before yields the records whose position is less than pos (every
// record when pos is 0), with their positions, newest first.
func (t *table[V]) before(pos int64) iter.Seq2[int64, V] {
	return func(yield func(int64, V) bool) {
		i := len(t.order)
		if pos != 0 {
			i, _ = slices.BinarySearch(t.order, pos)
		}
		for j := i - 1; j >= 0; j-- {
			p := t.order[j]
			if !yield(p, t.byPos[p]) {
				return
			}
		}
	}
}

// deleteWhere deletes the records for which drop is true, with id
// returning a record's ID, and returns how many it deleted. The prunes,
// which run alone, use it.
func (t *table[V]) deleteWhere(id func(V) string, drop func(V) bool) int64 {
	n := len(t.order)
	t.order = slices.DeleteFunc(t.order, func(pos int64) bool {
		v := t.byPos[pos]
		if !drop(v) {
			return false
		}
		delete(t.byPos, pos)
		delete(t.byID, id(v))
		return true
	})
	return int64(n - len(t.order))
}

// tableTx is a transaction's changes to a table, kept beside it until
// the transaction commits: readers of the table see none of them before,
// and all of them after. Rolling back is forgetting them.
type tableTx[V any] struct {
	base *table[V]
	// last is the last position given, in the table or here.
	last int64
	// puts are the records inserted or replaced, by position.
	puts map[int64]V
	// ids are the positions of the records inserted.
	ids map[string]int64
	// dels are the IDs of the records deleted, by position.
	dels map[int64]string
	// added are the positions of the records inserted, ascending.
	added []int64
}

func newTableTx[V any](base *table[V]) *tableTx[V] {
	return &tableTx[V]{base: base, last: base.last}
}

// init makes the maps of the changes at the first one.
func (t *tableTx[V]) init() {
	if t.puts == nil {
		t.puts, t.ids, t.dels = make(map[int64]V), make(map[string]int64), make(map[int64]string)
	}
}

// pos returns the position of the record with the given ID.
func (t *tableTx[V]) pos(id string) (int64, bool) {
	pos, ok := t.ids[id]
	if !ok {
		pos, ok = t.base.byID[id]
	}
	if _, deleted := t.dels[pos]; !ok || deleted {
		return 0, false
	}
	return pos, true
}

// at returns the record at pos, which holds one.
func (t *tableTx[V]) at(pos int64) V {
	if v, ok := t.puts[pos]; ok {
		return v
	}
	return t.base.byPos[pos]
}

func (t *tableTx[V]) get(id string) (V, bool) {
	pos, ok := t.pos(id)
	if !ok {
		var zero V
		return zero, false
	}
	return t.at(pos), true
}

func (t *tableTx[V]) all() iter.Seq2[int64, V] {
	return func(yield func(int64, V) bool) {
		for _, order := range [][]int64{t.base.order, t.added} {
			for _, p := range order {
				if _, deleted := t.dels[p]; deleted {
					continue
				}
				if !yield(p, t.at(p)) {
					return
				}
			}
		}
	}
}

// insert adds v under id at the next position and returns the position,
// or false when a record has that ID already.
func (t *tableTx[V]) insert(id string, v V) (int64, bool) {
	if _, ok := t.pos(id); ok {
		return 0, false
	}
	t.init()
	t.last++
	t.puts[t.last], t.ids[id] = v, t.last
	t.added = append(t.added, t.last)
	return t.last, true
}

// replace replaces the record with the given ID by v, in its position,
// or returns false when there is none.
func (t *tableTx[V]) replace(id string, v V) bool {
	pos, ok := t.pos(id)
	if ok {
		t.init()
		t.puts[pos] = v
	}
	return ok
}

// delete deletes the record with the given ID, or returns false when
// there is none.
func (t *tableTx[V]) delete(id string) bool {
	pos, ok := t.pos(id)
	if ok {
		t.init()
		delete(t.puts, pos)
		t.dels[pos] = id
	}
	return ok
}

// commit applies the changes to the table.
func (t *tableTx[V]) commit() {
	b := t.base
	if len(t.dels) > 0 {
		for pos, id := range t.dels {
			delete(b.byPos, pos)
			if b.byID[id] == pos {
				delete(b.byID, id)
			}
		}
		b.order = slices.DeleteFunc(b.order, func(pos int64) bool {
			_, deleted := t.dels[pos]
			return deleted
		})
	}
	for pos, v := range t.puts {
		b.byPos[pos] = v
	}
	for id, pos := range t.ids {
		if _, deleted := t.dels[pos]; !deleted {
			b.byID[id] = pos
		}
	}
	for _, pos := range t.added {
		if _, deleted := t.dels[pos]; !deleted {
			b.order = append(b.order, pos)
		}
	}
	b.last = t.last
}

// entries is what a dict and a transaction's view of it have in common:
// the reads.
type entries[K comparable, V any] interface {
	// get returns the value of k.
	get(k K) (V, bool)
	// all yields every key and value, in no order.
	all() iter.Seq2[K, V]
}

// dict is a map of committed values.
type dict[K comparable, V any] map[K]V

func (d dict[K, V]) get(k K) (V, bool) {
	v, ok := d[k]
	return v, ok
}

func (d dict[K, V]) all() iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		for k, v := range d {
			if !yield(k, v) {
				return
			}
		}
	}
}

// deleteWhere deletes the values for which drop is true and returns how
// many it deleted. The prunes, which run alone, use it.
func (d dict[K, V]) deleteWhere(drop func(V) bool) int64 {
	var n int64
	for k, v := range d {
		if drop(v) {
			delete(d, k)
			n++
		}
	}
	return n
}

// dictTx is a transaction's changes to a dict, kept beside it until the
// transaction commits.
type dictTx[K comparable, V any] struct {
	base dict[K, V]
	puts map[K]V
	dels map[K]struct{}
}

func newDictTx[K comparable, V any](base dict[K, V]) *dictTx[K, V] {
	return &dictTx[K, V]{base: base}
}

// init makes the maps of the changes at the first one.
func (d *dictTx[K, V]) init() {
	if d.puts == nil {
		d.puts, d.dels = make(map[K]V), make(map[K]struct{})
	}
}

func (d *dictTx[K, V]) get(k K) (V, bool) {
	if v, ok := d.puts[k]; ok {
		return v, true
	}
	if _, deleted := d.dels[k]; deleted {
		var zero V
		return zero, false
	}
	return d.base.get(k)
}

func (d *dictTx[K, V]) all() iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		for k, v := range d.base {
			_, put := d.puts[k]
			_, deleted := d.dels[k]
			if !put && !deleted && !yield(k, v) {
				return
			}
		}
		for k, v := range d.puts {
			if !yield(k, v) {
				return
			}
		}
	}
}

// set sets the value of k to v.
func (d *dictTx[K, V]) set(k K, v V) {
	d.init()
	delete(d.dels, k)
	d.puts[k] = v
}

// remove deletes k.
func (d *dictTx[K, V]) remove(k K) {
	d.init()
	delete(d.puts, k)
	d.dels[k] = struct{}{}
}

// commit applies the changes to the dict.
func (d *dictTx[K, V]) commit() {
	for k := range d.dels {
		delete(d.base, k)
	}
	for k, v := range d.puts {
		d.base[k] = v
	}
}
