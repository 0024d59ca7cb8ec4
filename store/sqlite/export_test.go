package sqlite

// WaitingForTest returns how many callers wait to hand a transaction to
// the writer.
func (s *Store) WaitingForTest() int { return int(s.waiting.Load()) }
