package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// This file is how the Service reads a code host for its tasks: through an
// adapter's BatchReader when it has one (many pull requests, their CI and
// reviews, in a few host requests, and "unchanged" cheaply), else one task
// at a time through PullRequest, Checks and ReviewDecision. Every reading
// ends as an observation, which applyObservation (facts.go) applies.

// observation is what one reading of the host found for a task.
type observation struct {
	pr PullRequest
	// ci is the CI provider's report of the head, or nil when there is no
	// provider or it failed (ciFailed).
	ci       *CIReport
	ciFailed bool
	// reviews is the host's review state, or nil when the host does not
	// decide or could not be read (reviewsFailed).
	reviews       *HostReviews
	reviewsFailed bool
	// unchanged says the adapter found nothing changed since the task's
	// last reading: only pr.State is set, to the state as stored.
	unchanged bool
	// version is the BatchReader's Version of the reading, or "".
	version string
	// started is when the reading began, and hints the task's
	// Facts.Hints then: a hint counted since may not show in it.
	started time.Time
	hints   uint64
}

// hostRead is the reading of one task: what it found, or why it failed.
type hostRead struct {
	obs observation
	err error
}

// readHost reads the host for tasks, which all have adapter, for purpose:
// through one call of its BatchReader, or else each task on its own,
// ReconcileConcurrency at a time. The error is that of a BatchReader call
// that read nothing; a task that could not be read has its hostRead.err
// set. With ReadSweep, a task's stored HostVersion lets the adapter answer
// that nothing changed.
func (s *Service) readHost(ctx context.Context, adapter ProviderAdapter, tasks []Task, purpose ReadPurpose) ([]hostRead, error) {
	started := s.clock.Now()
	out, err := s.readHostAt(ctx, adapter, tasks, purpose)
	for i := range out {
		out[i].obs.started, out[i].obs.hints = started, tasks[i].Facts.Hints
	}
	return out, err
}

// readHostAt is readHost but for the time the reading began.
func (s *Service) readHostAt(ctx context.Context, adapter ProviderAdapter, tasks []Task, purpose ReadPurpose) ([]hostRead, error) {
	out := make([]hostRead, len(tasks))
	br, ok := adapter.(BatchReader)
	if !ok {
		s.each(len(tasks), func(i int) {
			out[i].obs, out[i].err = s.observe(ctx, adapter, &tasks[i])
		})
		return out, nil
	}
	reads := make([]ReadRequest, len(tasks))
	for i := range tasks {
		t := &tasks[i]
		reads[i] = ReadRequest{PullRequest: t.PullRequestRef()}
		if t.HeadSHA != nil {
			reads[i].HeadSHA = *t.HeadSHA
		}
		if purpose == ReadSweep {
			reads[i].Version = t.Facts.HostVersion
		}
	}
	bctx, cancel := context.WithTimeout(ctx, s.readTimeout(len(reads)))
	defer cancel()
	readings, err := br.ReadPullRequests(bctx, BatchQuery{Purpose: purpose, Reads: reads})
	if err == nil && len(readings) != len(reads) {
		err = fmt.Errorf("the adapter returned %d readings for %d pull requests", len(readings), len(reads))
	}
	if err != nil {
		return nil, fmt.Errorf("read %d pull requests: %w", len(reads), err)
	}
	s.each(len(tasks), func(i int) {
		out[i] = s.fromReading(ctx, adapter, &tasks[i], reads[i], readings[i])
	})
	return out, nil
}

// readTimeout bounds a BatchReader's reading of n pull requests: a host
// answers a request of many more slowly, so the call has ProviderTimeout
// for each hundred.
func (s *Service) readTimeout(n int) time.Duration {
	return s.cfg.ProviderTimeout * time.Duration(1+(max(n, 1)-1)/100)
}

// fromReading turns a BatchReader's reading of t into an observation. CI
// comes from the reading when the adapter is t's CI provider, and is asked
// of t's own CI provider otherwise.
func (s *Service) fromReading(ctx context.Context, adapter ProviderAdapter, t *Task, req ReadRequest, r Reading) hostRead {
	ref := req.PullRequest
	switch {
	case r.Err != nil:
		return hostRead{err: fmt.Errorf("read pull request %s: %w", ref, r.Err)}
	case r.Unchanged:
		if req.Version == "" {
			return hostRead{err: fmt.Errorf("read pull request %s: the adapter answered unchanged to a reading without a version", ref)}
		}
		version := r.Version // an adapter may move it on
		if version == "" {
			version = req.Version
		}
		return hostRead{obs: observation{unchanged: true, version: version, pr: PullRequest{PullRequestRef: ref, State: t.Facts.PRState}}}
	}
	pr := r.PullRequest
	if !shaRE.MatchString(pr.HeadSHA) {
		return hostRead{err: fmt.Errorf("read pull request %s: the adapter returned head %q, not a 40-hex-digit SHA", ref, pr.HeadSHA)}
	}
	pr.HeadSHA = lowerHex(pr.HeadSHA)
	obs := observation{pr: pr, version: r.Version}
	if pr.State != PullRequestOpen {
		return hostRead{obs: obs}
	}
	ci := s.ciFor(t)
	if own, ok := adapter.(CIProvider); ok && ci == own {
		obs.ci, obs.ciFailed = r.CI, r.CI == nil
	} else if ci != nil {
		cctx, cancel := context.WithTimeout(ctx, s.cfg.ProviderTimeout)
		obs.ci, obs.ciFailed = s.readCI(cctx, ci, t, ref, pr.HeadSHA)
		cancel()
	}
	if t.ReviewPolicy == PolicyGitHubRules {
		_, decides := hostDecides(adapter, t)
		obs.reviews, obs.reviewsFailed = r.Reviews, decides && r.Reviews == nil
	}
	return hostRead{obs: obs}
}

// hostDecides returns t's adapter as a ReviewDecider when the host
// decides t's reviews: the task's policy is github_rules, and its adapter
// decides.
func hostDecides(adapter ProviderAdapter, t *Task) (ReviewDecider, bool) {
	d, ok := adapter.(ReviewDecider)
	return d, ok && t.ReviewPolicy == PolicyGitHubRules
}

// each calls fn(0) to fn(n-1), ReconcileConcurrency at a time, and
// returns when all have returned.
func (s *Service) each(n int, fn func(i int)) {
	if n == 1 {
		fn(0)
		return
	}
	slots := make(chan struct{}, s.cfg.ReconcileConcurrency)
	var wg sync.WaitGroup
	for i := range n {
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			fn(i)
		}()
	}
	wg.Wait()
}

// observe reads the pull request of t and its CI and review state, one
// call each, all within ProviderTimeout. CI and reviews are read at the
// stored head beside the pull request, since most readings find the head
// and base where they were; when either moved, they are read again.
func (s *Service) observe(ctx context.Context, adapter ProviderAdapter, t *Task) (observation, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ProviderTimeout)
	defer cancel()
	ref := t.PullRequestRef()
	var (
		early observation
		wg    sync.WaitGroup
	)
	if t.HeadSHA != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			early = s.observeAt(ctx, adapter, t, ref, *t.HeadSHA)
		}()
	}
	pr, err := adapter.PullRequest(ctx, ref)
	wg.Wait()
	if err != nil {
		return observation{}, fmt.Errorf("read pull request %s: %w", ref, err)
	}
	if !shaRE.MatchString(pr.HeadSHA) {
		return observation{}, fmt.Errorf("read pull request %s: the adapter returned head %q, not a 40-hex-digit SHA", ref, pr.HeadSHA)
	}
	pr.HeadSHA = lowerHex(pr.HeadSHA)
	sameBase := pr.Base == "" || (t.BaseBranch != nil && *t.BaseBranch == pr.Base)
	switch {
	case pr.State != PullRequestOpen:
		return observation{pr: pr}, nil // nothing more will be merged or reviewed
	case t.HeadSHA != nil && *t.HeadSHA == pr.HeadSHA && sameBase:
		early.pr = pr
		return early, nil
	}
	// A new head, or a new base whose rules judge CI and reviews anew.
	return s.observeHead(ctx, adapter, t, pr), nil
}

// observeHead reads the CI and review state of pr's head for t, at once.
func (s *Service) observeHead(ctx context.Context, adapter ProviderAdapter, t *Task, pr PullRequest) observation {
	if pr.State != PullRequestOpen {
		return observation{pr: pr}
	}
	obs := s.observeAt(ctx, adapter, t, pr.PullRequestRef, pr.HeadSHA)
	obs.pr = pr
	return obs
}

// observeAt reads the CI and review state of commit head of pull request
// ref for t, both at once. Failures are logged and leave the part unknown.
func (s *Service) observeAt(ctx context.Context, adapter ProviderAdapter, t *Task, ref PullRequestRef, head string) observation {
	var obs observation
	var wg sync.WaitGroup
	if ci := s.ciFor(t); ci != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			obs.ci, obs.ciFailed = s.readCI(ctx, ci, t, ref, head)
		}()
	}
	if decider, ok := hostDecides(adapter, t); ok {
		hr, err := decider.ReviewDecision(ctx, ReviewQuery{PullRequest: ref, HeadSHA: head})
		if err != nil {
			s.log.WarnContext(ctx, "host review decision failed; the task's decision is as last known, or pending for a new head", "task", t.ID, "err", err)
			obs.reviewsFailed = true
		} else {
			obs.reviews = &hr
		}
	}
	wg.Wait()
	return obs
}

// readCI asks ci for the checks of head, and reports whether that failed
// (logged).
func (s *Service) readCI(ctx context.Context, ci CIProvider, t *Task, ref PullRequestRef, head string) (*CIReport, bool) {
	rep, err := ci.Checks(ctx, CIQuery{Task: *t, PullRequest: ref, HeadSHA: head})
	if err != nil {
		if ctx.Err() == nil || !errors.Is(err, ctx.Err()) {
			s.log.WarnContext(ctx, "CI provider failed; the task's CI stays as last known", "provider", ci.Name(), "task", t.ID, "err", err)
		}
		return nil, true
	}
	return &rep, false
}
