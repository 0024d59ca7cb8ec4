package lifecycle

// BrokerPositionForTest returns the sequence the stream broker has loaded
// through, so that a test knows its ring holds an event.
func (s *Service) BrokerPositionForTest() int64 { return s.broker.Hub().Position() }
