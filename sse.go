package lifecycle

import (
	"cmp"
	"net/http"

	"github.com/tasklifecycle/lifecycle/internal/eventstream"
	"github.com/tasklifecycle/lifecycle/lifecycletype"
)

// parseStreamParams reads and checks the query and the Last-Event-ID
// header of a stream request (see eventstream.ParseParams). It returns a
// *ValidationError naming every bad parameter.
func parseStreamParams(r *http.Request) (eventstream.Params, error) {
	p, problems := eventstream.ParseParams(r)
	var v lifecycletype.Validator
	for _, pr := range problems {
		v.Add(pr.Field, pr.Reason)
	}
	return p, v.Err()
}

// handleStream serves GET /task-events/stream: the events after the cursor
// (or from the live tail), then live ones, as server-sent events (see
// package eventstream).
func (s *Service) handleStream(w http.ResponseWriter, r *http.Request, p *Principal) error {
	params, err := parseStreamParams(r)
	if err != nil {
		return err
	}
	st, err := s.streams.Open(w, r, p.ID, params)
	if err != nil {
		return err
	}
	st.Run(r, eventstream.Credential{Done: p.Done, KeyDone: s.keyDone(p), ExpiresAt: p.ExpiresAt, EndNote: cmp.Or(p.EndNote, defaultEndNote)})
	return nil
}
