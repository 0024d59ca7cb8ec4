package memory

// Reopen closes s and returns a new Store over the tables s kept: the
// conformance suite's Reopen, which checks that a Store keeps nothing
// outside its tables (no count, mark or cache that a new Store would
// lose) and that Close leaves them whole. A process that exits loses
// them; nothing outside the tests can reopen a Store.
func Reopen(s *Store) *Store {
	s.Close()
	s.mu.RLock()
	defer s.mu.RUnlock()
	return newStore(s.t)
}
