package github

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	gh "github.com/google/go-github/v60/github"
	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/internal/hostcall"
	"github.com/tasklifecycle/lifecycle/adapter/internal/webhookintake"
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
// It verifies X-Hub-Signature-256, an HMAC-SHA256 of the body under
// Config.WebhookSecret, before it parses or passes on anything: a delivery
// without a well-formed signature, or with no secret configured, is
// answered 401 before its body is read; the others' bodies are fed to the
// HMAC as they arrive and compared in constant time at their end (401
// when the signature does not match). Until then a body is held within
// bounds a sender without the secret cannot push:
//
//   - one over MaxWebhookBody is refused with 413, at once when its
//     Content-Length says so;
//   - it must arrive within Config.WebhookReadTimeout (a read deadline
//     on the connection), or is answered 408 and its connection closed;
//   - the bodies of events the Adapter uses are held in memory taken from
//     Config.WebhookBodyBudget, shared by every delivery to the Adapter's
//     handlers: when it is spent, a delivery is answered 503 with
//     Retry-After and its connection closed, and one larger than the
//     whole budget 413. Events it does not use are verified as they
//     stream and kept nowhere, then answered 204.
//
// The events used become [lifecycle.ProviderEvent]s, with
// X-GitHub-Delivery as their DeliveryID and the SHA-256 of the signed body
// as their Digest, which sink applies before the answer: 200 when applied,
// 503 when not, so that a redelivery from the webhook's settings is taken.
// The Service ignores a delivery whose ID or body it applied before:
// X-GitHub-Delivery is not signed, and a captured body replayed under a
// new ID must not be applied again, while GitHub's redelivery of a
// delivery that failed (the same ID and body) was never recorded and is
// applied. Applying is bounded by Config.WebhookApplyTimeout, below
// GitHub's 10 seconds. The events used: pull_request (synchronize, closed,
// reopened, ready_for_review, converted_to_draft, edited with a new
// base), pull_request_review (submitted, dismissed), check_run,
// check_suite, status and deployment_status.
func (a *Adapter) WebhookHandler(sink lifecycle.ProviderEventSink) http.Handler {
	if a.cfg.WebhookSecret == "" {
		a.log.Error("webhook handler without Config.WebhookSecret: every delivery is refused")
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if outcome := a.serveWebhook(w, r, sink); outcome != "" {
			a.tel.Webhook(r.Context(), outcome)
		}
	})
}

// signature returns the digest of an X-Hub-Signature-256 header value
// ("sha256=" and 64 hex digits), or false.
func signature(v string) ([]byte, bool) {
	h, ok := strings.CutPrefix(v, "sha256=")
	if !ok || len(h) != 2*sha256.Size {
		return nil, false
	}
	sig, err := hex.DecodeString(h)
	return sig, err == nil
}

// formMediaType is the other content type a GitHub webhook may have: the
// JSON payload is then the form's payload parameter.
const formMediaType = "application/x-www-form-urlencoded"

// serveWebhook answers a delivery and returns its outcome for
// lifecycle.host.webhooks, or "" when it was counted already (taken).
func (a *Adapter) serveWebhook(w http.ResponseWriter, r *http.Request, sink lifecycle.ProviderEventSink) hostcall.Outcome {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "use POST", http.StatusMethodNotAllowed)
		return hostcall.Invalid
	}
	if r.ContentLength > MaxWebhookBody {
		webhookintake.Refuse(w, r, webhookintake.ErrTooLarge)
		return hostcall.Invalid
	}
	sig, ok := signature(r.Header.Get(gh.SHA256SignatureHeader))
	if a.cfg.WebhookSecret == "" || !ok {
		webhookintake.Abandon(w, r) // the body is not read
		http.Error(w, "missing or unverifiable X-Hub-Signature-256", http.StatusUnauthorized)
		return hostcall.InvalidSignature
	}
	mediaType, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mediaType != "application/json" && mediaType != formMediaType {
		webhookintake.Abandon(w, r)
		http.Error(w, "the webhook's content type must be application/json", http.StatusUnsupportedMediaType)
		return hostcall.Invalid
	}
	mac := hmac.New(sha256.New, []byte(a.cfg.WebhookSecret))
	event := gh.WebHookType(r)
	if !usedEvents[event] {
		// Verified all the same, so that a wrong secret shows in the
		// answer to GitHub's ping.
		if _, err := a.hookBodies.Discard(w, r, mac); err != nil {
			webhookintake.Refuse(w, r, err)
			return readOutcome(err)
		}
		if !hmac.Equal(mac.Sum(nil), sig) {
			a.refuseSignature(w, r)
			return hostcall.InvalidSignature
		}
		w.WriteHeader(http.StatusNoContent)
		return hostcall.Ignored
	}
	digest := sha256.New()
	body, err := a.hookBodies.Read(w, r, io.MultiWriter(mac, digest))
	if err != nil {
		if !errors.Is(err, webhookintake.ErrTooLarge) {
			a.log.WarnContext(r.Context(), "webhook delivery not read", "delivery", gh.DeliveryID(r), "err", err)
		}
		webhookintake.Refuse(w, r, err)
		return readOutcome(err)
	}
	if !hmac.Equal(mac.Sum(nil), sig) {
		body.Release()
		a.refuseSignature(w, r)
		return hostcall.InvalidSignature
	}
	raw := body.Bytes()
	body.Release()
	if mediaType == formMediaType {
		form, err := url.ParseQuery(string(raw))
		if err != nil {
			http.Error(w, "payload is not a form", http.StatusBadRequest)
			return hostcall.Invalid
		}
		raw = []byte(form.Get("payload"))
	}
	var p payload
	if err := json.Unmarshal(raw, &p); err != nil {
		http.Error(w, "payload is not JSON", http.StatusBadRequest)
		return hostcall.Invalid
	}
	ev, ok := a.eventOf(event, &p)
	if !ok {
		w.WriteHeader(http.StatusNoContent)
		return hostcall.Ignored
	}
	ev.Source, ev.DeliveryID = Source, gh.DeliveryID(r)
	ev.Digest = hex.EncodeToString(digest.Sum(nil))
	ctx, cancel := context.WithTimeout(r.Context(), a.cfg.WebhookApplyTimeout)
	defer cancel()
	if err := sink.ApplyProviderEvent(ctx, ev); err != nil {
		// The reconciler reads the host again anyway; a redelivery is
		// applied sooner.
		a.log.WarnContext(ctx, "apply webhook delivery", "delivery", ev.DeliveryID, "kind", ev.Kind, "err", err)
		http.Error(w, "not applied; deliver again", http.StatusServiceUnavailable)
		return hostcall.Failed
	}
	w.WriteHeader(http.StatusOK)
	a.tel.Taken(r.Context(), ev.DeliveryID, ev.Digest)
	return ""
}

// readOutcome returns the outcome of a delivery whose body was not read:
// failed when the body budget is spent (GitHub may deliver it again), else
// invalid (too large, too slow, broken off).
func readOutcome(err error) hostcall.Outcome {
	if errors.Is(err, webhookintake.ErrBusy) {
		return hostcall.Failed
	}
	return hostcall.Invalid
}

// refuseSignature answers a delivery whose signature does not match.
func (a *Adapter) refuseSignature(w http.ResponseWriter, r *http.Request) {
	a.log.WarnContext(r.Context(), "webhook delivery refused: signature does not match", "delivery", gh.DeliveryID(r))
	http.Error(w, "signature does not match", http.StatusUnauthorized)
}

// payload holds the members of the webhook payloads the Adapter uses,
// named as GitHub names them. It is decoded instead of go-github's event
// types, which refuse some of GitHub's own payloads (go-github v60 fails
// on the "2018-04-25 20:42:10" timestamps of the published check_run
// examples) and decode far more than is used.
type payload struct {
	Action     string `json:"action"`
	Repository *struct {
		Name  string `json:"name"`
		Owner struct {
			Login string `json:"login"`
		} `json:"owner"`
	} `json:"repository"`
	PullRequest *struct {
		Number int  `json:"number"`
		Merged bool `json:"merged"`
		Head   struct {
			SHA string `json:"sha"`
		} `json:"head"`
	} `json:"pull_request"`
	Changes *struct {
		Base json.RawMessage `json:"base"`
	} `json:"changes"`
	CheckRun   *checkRunPayload `json:"check_run"`
	CheckSuite *struct {
		HeadSHA string `json:"head_sha"`
	} `json:"check_suite"`
	SHA         string  `json:"sha"`         // status
	Context     string  `json:"context"`     // status
	State       string  `json:"state"`       // status
	Description *string `json:"description"` // status
	TargetURL   *string `json:"target_url"`  // status
	Deployment  *struct {
		ID  int64  `json:"id"`
		SHA string `json:"sha"`
	} `json:"deployment"`
	DeploymentStatus *struct {
		State          string `json:"state"`
		EnvironmentURL string `json:"environment_url"`
	} `json:"deployment_status"`
}

// usedEvents are the X-GitHub-Event values the Adapter takes.
var usedEvents = map[string]bool{
	"pull_request": true, "pull_request_review": true, "check_run": true, "check_suite": true, "status": true, "deployment_status": true,
}

// eventOf maps a webhook payload to a provider event, or reports that it
// is not one the lifecycle uses.
func (a *Adapter) eventOf(event string, p *payload) (lifecycle.ProviderEvent, bool) {
	var ev lifecycle.ProviderEvent
	switch event {
	case "pull_request":
		if p.PullRequest == nil {
			return ev, false
		}
		switch p.Action {
		case "synchronize":
			ev.Kind = lifecycle.ProviderHeadChanged
		case "closed":
			ev.Kind = lifecycle.ProviderPullRequestClosed
			if p.PullRequest.Merged {
				ev.Kind = lifecycle.ProviderPullRequestMerged
			}
		case "reopened":
			ev.Kind = lifecycle.ProviderPullRequestReopened
		case "ready_for_review", "converted_to_draft":
			// A draft is not shipped: the task learns it at once.
			ev.Kind = lifecycle.ProviderPullRequestEdited
		case "edited":
			if p.Changes == nil || len(p.Changes.Base) == 0 {
				return ev, false
			}
			ev.Kind = lifecycle.ProviderPullRequestEdited
		default:
			return ev, false
		}
	case "pull_request_review":
		if p.PullRequest == nil {
			return ev, false
		}
		switch p.Action {
		case "submitted":
			ev.Kind = lifecycle.ProviderReviewSubmitted
		case "dismissed":
			ev.Kind = lifecycle.ProviderReviewDismissed
		default:
			return ev, false
		}
	case "check_run":
		if p.CheckRun == nil {
			return ev, false
		}
		ev.Kind, ev.HeadSHA = lifecycle.ProviderChecksChanged, p.CheckRun.HeadSHA
	case "check_suite":
		if p.CheckSuite == nil {
			return ev, false
		}
		ev.Kind, ev.HeadSHA = lifecycle.ProviderChecksChanged, p.CheckSuite.HeadSHA
	case "status":
		ev.Kind, ev.HeadSHA = lifecycle.ProviderChecksChanged, p.SHA
	case "deployment_status":
		if p.Deployment == nil || p.DeploymentStatus == nil {
			return ev, false
		}
		ev.Kind, ev.HeadSHA = lifecycle.ProviderDeploymentStatus, p.Deployment.SHA
		ev.Deployment = &lifecycle.DeploymentStatus{
			ID:             strconv.FormatInt(p.Deployment.ID, 10),
			State:          p.DeploymentStatus.State,
			EnvironmentURL: p.DeploymentStatus.EnvironmentURL,
		}
	default:
		return ev, false
	}
	if p.PullRequest != nil && strings.HasPrefix(event, "pull_request") {
		ev.PullRequest = a.ref(p.PullRequest.Number)
		ev.HeadSHA = p.PullRequest.Head.SHA
	}
	// Checks and deployments name a commit, not a pull request: the
	// Service finds the tasks by head. An organisation's webhook sends
	// every repository's events; those of others are ignored.
	ev.HeadSHA = strings.ToLower(ev.HeadSHA)
	repo := p.Repository
	if repo == nil || !strings.EqualFold(repo.Owner.Login, a.cfg.Owner) || !strings.EqualFold(repo.Name, a.cfg.Repo) {
		return ev, false
	}
	switch event {
	case "check_run":
		a.noteCheckRun(p.CheckRun)
	case "status":
		a.noteStatus(p)
	}
	return ev, true
}
