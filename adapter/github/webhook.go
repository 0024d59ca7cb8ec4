package github

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"

	gh "github.com/google/go-github/v60/github"
	"github.com/tasklifecycle/lifecycle"
)

// MaxWebhookBody is the largest webhook body taken: GitHub caps payloads
// at 25 MB.
const MaxWebhookBody = 25 << 20

// Source is the ProviderEvent.Source of the Adapter's events.
const Source = "github"

// WebhookHandler returns the handler of the repository's webhook, to mount
// at the URL configured at GitHub (content type application/json, secret
// Config.WebhookSecret):
//
//	mux.Handle("POST /hooks/github", adapter.WebhookHandler(svc))
//
// It verifies X-Hub-Signature-256 against Config.WebhookSecret with
// go-github's ValidatePayload (an HMAC compared in constant time), and
// answers 401 when it does not match, is missing, or no secret is
// configured; it refuses bodies over MaxWebhookBody with 413 and answers
// events it does not use with 204. The others become
// [lifecycle.ProviderEvent]s, with X-GitHub-Delivery as their DeliveryID,
// which sink applies before the answer (the Service ignores a delivery it
// applied before): 200 when applied, 503 when not, so that a redelivery
// from the webhook's settings is taken. Applying is bounded by
// Config.WebhookApplyTimeout, below GitHub's 10 seconds. The events used:
// pull_request (synchronize, closed, reopened, edited with a new base),
// pull_request_review (submitted, dismissed), check_run, check_suite,
// status and deployment_status.
func (a *Adapter) WebhookHandler(sink lifecycle.ProviderEventSink) http.Handler {
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
	ctx, cancel := context.WithTimeout(r.Context(), a.cfg.WebhookApplyTimeout)
	defer cancel()
	if err := sink.ApplyProviderEvent(ctx, ev); err != nil {
		// The reconciler reads the host again anyway; a redelivery is
		// applied sooner.
		a.log.WarnContext(ctx, "apply webhook delivery", "delivery", ev.DeliveryID, "kind", ev.Kind, "err", err)
		http.Error(w, "not applied; deliver again", http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
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
	case *gh.CheckSuiteEvent:
		repo = e.Repo
		ev.Kind, ev.HeadSHA = lifecycle.ProviderChecksChanged, e.GetCheckSuite().GetHeadSHA()
	case *gh.StatusEvent:
		repo = e.Repo
		ev.Kind, ev.HeadSHA = lifecycle.ProviderChecksChanged, e.GetSHA()
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
	// Checks and deployments name a commit, not a pull request: the
	// Service finds the tasks by head. An organisation's webhook sends
	// every repository's events; those of others are ignored.
	ev.HeadSHA = strings.ToLower(ev.HeadSHA)
	if repo == nil || !strings.EqualFold(repo.GetOwner().GetLogin(), a.cfg.Owner) || !strings.EqualFold(repo.GetName(), a.cfg.Repo) {
		return ev, false
	}
	return ev, true
}
