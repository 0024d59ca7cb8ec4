package lifecycle

import "context"

// AppendEventsForTest appends evs in one transaction through the Service,
// as a state change does, so that the stream broker is woken after the
// commit. Tests use it to write many events quickly.
func (s *Service) AppendEventsForTest(ctx context.Context, evs []*Event) error {
	return s.update(ctx, func(tx Tx) error {
		for _, e := range evs {
			if err := tx.AppendEvent(ctx, e); err != nil {
				return err
			}
		}
		return nil
	})
}

// WebhookStateForTest returns how many subscription workers the Service
// runs and how many deleted subscriptions its dispatcher remembers.
func (s *Service) WebhookStateForTest() (workers, deleted int) {
	return s.webhooks.Counts()
}

// TaskLockHoldersForTest returns how many calls hold or wait for the
// provider lock of a task, so that a test knows requests are queued on it.
func (s *Service) TaskLockHoldersForTest(taskID string) int {
	s.taskLocks.mu.Lock()
	defer s.taskLocks.mu.Unlock()
	if l := s.taskLocks.locks[taskID]; l != nil {
		return l.holders
	}
	return 0
}

// ParkedStreamsForTest returns how many event streams are parked: waiting
// with no goroutine of their own for the broker to wake them.
func (s *Service) ParkedStreamsForTest() int { return s.broker.Hub().Waiting() }

// SweepStallsForTest runs one sweep of the stall watchdog now and returns
// how many tasks it marked stalled.
func (s *Service) SweepStallsForTest(ctx context.Context) (int, error) { return s.sweepStalls(ctx) }

// FetchCIFailuresForTest fetches the details of the failed checks due now,
// as the Service's fetcher does in the background, and returns once it is
// done.
func (s *Service) FetchCIFailuresForTest(ctx context.Context) { s.fetchCIFailures(ctx) }
