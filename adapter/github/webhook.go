package github

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"

	gh "github.com/google/go-github/v60/github"
	"github.com/tasklifecycle/lifecycle"
)

// MaxWebhookBody is the largest webhook body taken: GitHub caps payloads
// at 25 MB.
const MaxWebhookBody = 25 << 20

// Source is the ProviderEvent.Source of the Adapter's events.
const Source = "github"

// webhookState holds the workers that apply verified deliveries.
type webhookState struct {
	once   sync.Once
	queue  chan delivery
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	closed bool
	seen   map[string]struct{} // delivery IDs queued or applied lately
	order  []string            // seen, oldest first
}

// recentDeliveries is how many delivery IDs are remembered in memory; the
// Service remembers them durably.
const recentDeliveries = 10000

type delivery struct {
	sink lifecycle.ProviderEventSink
	ev   lifecycle.ProviderEvent
}

func (h *webhookState) init() {
	h.ctx, h.cancel = context.WithCancel(context.Background())
	h.seen = make(map[string]struct{})
}

// remember records a delivery ID and reports whether it was new.
func (h *webhookState) remember(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.seen[id]; ok {
		return false
	}
	h.seen[id] = struct{}{}
	h.order = append(h.order, id)
	if len(h.order) > recentDeliveries {
		delete(h.seen, h.order[0])
		h.order = h.order[1:]
	}
	return true
}

// forget drops a delivery ID that was not applied, so that a redelivery is.
func (h *webhookState) forget(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.seen, id)
}

func (h *webhookState) close(ctx context.Context) error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	queue := h.queue
	h.mu.Unlock()
	if queue != nil {
		close(queue)
	}
	done := make(chan struct{})
	go func() { h.wg.Wait(); close(done) }()
	select {
	case <-done:
		h.cancel()
		return nil
	case <-ctx.Done():
		h.cancel()
		<-done
		return ctx.Err()
	}
}

// WebhookHandler returns the handler of the repository's webhook, to mount
// at the URL configured at GitHub (content type application/json, secret
// Config.WebhookSecret):
//
//	mux.Handle("POST /hooks/github", adapter.WebhookHandler(svc))
//
// It verifies X-Hub-Signature-256 against Config.WebhookSecret in constant
// time (401 when it does not match, or without a secret), refuses bodies
// over MaxWebhookBody (413), answers events it does not use with 204, and
// queues the others as [lifecycle.ProviderEvent]s, answering 202 at once:
// Config.WebhookWorkers workers pass them to sink. X-GitHub-Delivery is
// the event's DeliveryID: a delivery taken before is answered 200 and not
// applied again. The events used: pull_request (synchronize, closed,
// reopened, edited with a new base), pull_request_review (submitted,
// dismissed), check_run, check_suite, status and deployment_status.
func (a *Adapter) WebhookHandler(sink lifecycle.ProviderEventSink) http.Handler {
	h := &a.hooks
	h.once.Do(func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.closed {
			return
		}
		h.queue = make(chan delivery, a.cfg.WebhookQueue)
		for range max(a.cfg.WebhookWorkers, 1) {
			h.wg.Add(1)
			go a.applyDeliveries(h.queue)
		}
	})
	if a.cfg.WebhookSecret == "" {
		a.log.Error("webhook handler without Config.WebhookSecret: every delivery is refused")
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.serveWebhook(w, r, sink)
	})
}

func (a *Adapter) serveWebhook(w http.ResponseWriter, r *http.Request, sink lifecycle.ProviderEventSink) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "use POST", http.StatusMethodNotAllowed)
		return
	}
	if r.ContentLength > MaxWebhookBody {
		http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, MaxWebhookBody)
	if a.cfg.WebhookSecret == "" || r.Header.Get(gh.SHA256SignatureHeader) == "" {
		http.Error(w, "missing or unverifiable X-Hub-Signature-256", http.StatusUnauthorized)
		return
	}
	payload, err := gh.ValidatePayload(r, []byte(a.cfg.WebhookSecret))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
			return
		}
		a.log.WarnContext(r.Context(), "webhook delivery refused: signature does not match", "delivery", r.Header.Get("X-GitHub-Delivery"))
		http.Error(w, "signature does not match", http.StatusUnauthorized)
		return
	}
	kind := gh.WebHookType(r)
	parsed, err := gh.ParseWebHook(kind, payload)
	if err != nil {
		w.WriteHeader(http.StatusNoContent) // an event this version does not know
		return
	}
	ev, ok := a.eventOf(parsed)
	if !ok {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	ev.Source, ev.DeliveryID = Source, gh.DeliveryID(r)
	if ev.DeliveryID != "" && !a.hooks.remember(ev.DeliveryID) {
		w.WriteHeader(http.StatusOK) // taken before
		return
	}
	if !a.enqueue(delivery{sink: sink, ev: ev}) {
		a.hooks.forget(ev.DeliveryID)
		w.Header().Set("Retry-After", "10")
		http.Error(w, "too many deliveries waiting", http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

func (a *Adapter) enqueue(d delivery) (ok bool) {
	h := &a.hooks
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed || h.queue == nil {
		return false
	}
	select {
	case h.queue <- d:
		return true
	default:
		return false
	}
}

// applyDeliveries passes queued deliveries to their sink until the queue
// is closed.
func (a *Adapter) applyDeliveries(queue <-chan delivery) {
	h := &a.hooks
	defer h.wg.Done()
	for d := range queue {
		ctx, cancel := context.WithTimeout(h.ctx, a.cfg.WebhookApplyTimeout)
		if err := d.sink.ApplyProviderEvent(ctx, d.ev); err != nil {
			// Not applied: a redelivery (from GitHub's settings) is
			// taken; meanwhile the reconciler reads the host anyway.
			if d.ev.DeliveryID != "" {
				h.forget(d.ev.DeliveryID)
			}
			a.log.Warn("apply webhook delivery", "delivery", d.ev.DeliveryID, "kind", d.ev.Kind, "err", err)
		}
		cancel()
	}
}

// eventOf maps a parsed webhook payload to a provider event, or reports
// that it is not one the lifecycle uses.
func (a *Adapter) eventOf(parsed any) (lifecycle.ProviderEvent, bool) {
	var ev lifecycle.ProviderEvent
	var repo *gh.Repository
	switch e := parsed.(type) {
	case *gh.PullRequestEvent:
		repo = e.Repo
		switch e.GetAction() {
		case "synchronize":
			ev.Kind = lifecycle.ProviderHeadChanged
		case "closed":
			ev.Kind = lifecycle.ProviderPullRequestClosed
			if e.GetPullRequest().GetMerged() {
				ev.Kind = lifecycle.ProviderPullRequestMerged
			}
		case "reopened":
			ev.Kind = lifecycle.ProviderPullRequestReopened
		case "edited":
			if e.GetChanges().GetBase() == nil {
				return ev, false
			}
			ev.Kind = lifecycle.ProviderPullRequestEdited
		default:
			return ev, false
		}
		ev.PullRequest = a.ref(e.GetPullRequest().GetNumber())
		ev.HeadSHA = e.GetPullRequest().GetHead().GetSHA()
	case *gh.PullRequestReviewEvent:
		repo = e.Repo
		switch e.GetAction() {
		case "submitted":
			ev.Kind = lifecycle.ProviderReviewSubmitted
		case "dismissed":
			ev.Kind = lifecycle.ProviderReviewDismissed
		default:
			return ev, false
		}
		ev.PullRequest = a.ref(e.GetPullRequest().GetNumber())
		ev.HeadSHA = e.GetPullRequest().GetHead().GetSHA()
	case *gh.CheckRunEvent:
		repo = e.Repo
		ev.Kind, ev.HeadSHA = lifecycle.ProviderChecksChanged, e.GetCheckRun().GetHeadSHA()
		ev.PullRequest = a.ref(0)
	case *gh.CheckSuiteEvent:
		repo = e.Repo
		ev.Kind, ev.HeadSHA = lifecycle.ProviderChecksChanged, e.GetCheckSuite().GetHeadSHA()
		ev.PullRequest = a.ref(0)
	case *gh.StatusEvent:
		repo = e.Repo
		ev.Kind, ev.HeadSHA = lifecycle.ProviderChecksChanged, e.GetSHA()
		ev.PullRequest = a.ref(0)
	case *gh.DeploymentStatusEvent:
		repo = e.Repo
		ev.Kind = lifecycle.ProviderDeploymentStatus
		ev.HeadSHA = e.GetDeployment().GetSHA()
		ev.Deployment = &lifecycle.DeploymentStatus{
			ID:             strconv.FormatInt(e.GetDeployment().GetID(), 10),
			State:          e.GetDeploymentStatus().GetState(),
			EnvironmentURL: e.GetDeploymentStatus().GetEnvironmentURL(),
		}
	default:
		return ev, false
	}
	// An organisation's webhook sends every repository's events.
	if repo == nil || !strings.EqualFold(repo.GetOwner().GetLogin(), a.cfg.Owner) || !strings.EqualFold(repo.GetName(), a.cfg.Repo) {
		return ev, false
	}
	return ev, true
}
