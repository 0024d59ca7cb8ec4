package gitlab

import (
	"crypto/subtle"
	"errors"
	"net/http"
	"strconv"
	"strings"

	gl "gitlab.com/gitlab-org/api/client-go"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/internal/hostcall"
	"github.com/tasklifecycle/lifecycle/adapter/internal/webhookintake"
)

// maxHookBody bounds a webhook delivery's body; GitLab's largest (a push
// of many commits) stay well below it.
const maxHookBody = 25 << 20

// WebhookHandler implements [lifecycle.WebhookIntake]: it returns the
// handler of the project's webhook, to mount at a path of the host
// program's choosing (POST /hooks/gitlab, say) and to register in GitLab
// (Settings → Webhooks) with the secret token [Config.WebhookToken].
//
// A delivery whose X-Gitlab-Token is not the secret token (compared in
// constant time) is answered 401; with no WebhookToken configured, every
// delivery is. These events are passed to sink, with the delivery's
// Idempotency-Key (else X-Gitlab-Event-UUID) as DeliveryID, and answered
// 200:
//
//   - Merge Request Hook: update with new commits (oldrev set) →
//     head_changed at last_commit; other updates and open → edited;
//     approved/approval → review_submitted; unapproved/unapproval →
//     review_dismissed; merge → merged; close → closed; reopen → reopened;
//   - Pipeline Hook and Job Hook → checks_changed of the commit (and of
//     the merge request a merge request pipeline names);
//   - Deployment Hook → deployment_status, which wakes a [Deployer]
//     waiting for a deployment.
//
// Other events are answered 204 without their body being read, and
// events of other projects 204 too. The token is checked before the body
// is read; then the body is read within bounds: over 25 MiB it is
// answered 413 Request Entity Too Large (at once when its Content-Length
// says so), not within [Config.WebhookReadTimeout] 408 (a read deadline
// on the connection), and when [Config.WebhookBodyBudget] is spent by
// deliveries being read 503 with Retry-After (413 when larger than the
// whole budget), each with the connection closed; a body that is not the
// event's JSON is answered 400.
//
// GitLab delivers a failed delivery only when someone resends it by
// hand, and a hook whose deliveries fail four times in a row is disabled
// for a while (a minute, doubling up to a day), forty times for good. The
// handler therefore fails no delivery it has taken, and relies on the
// reconciler, which reads every task in review again anyway:
//
//   - A sink error matching [lifecycle.ErrProvider] means the Service
//     could not read GitLab while applying the event, and has marked its
//     tasks to be reconciled at once ([lifecycle.Service.ApplyProviderEvent]):
//     the delivery was taken, and is answered 202 Accepted.
//   - The project's settings, read again once SettingsTTL has passed, are
//     taken as last read when GitLab cannot be read; before any reading
//     has succeeded an event cannot be mapped to the project, and is
//     answered 202 Accepted without being passed on (logged).
//   - Any other sink error (the Store failing) is answered 500: the
//     delivery was not taken. GitLab will not deliver it again; the
//     reconciler reads the tasks in review at its next pass, and the 500
//     shows in the hook's recent events at GitLab, where a hook disabled
//     by a long outage is enabled again.
func (a *Adapter) WebhookHandler(sink lifecycle.ProviderEventSink) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if outcome := a.serveWebhook(w, r, sink); outcome != "" {
			a.tel.Webhook(r.Context(), outcome)
		}
	})
}

// serveWebhook answers a delivery and returns its outcome for
// lifecycle.host.webhooks, or "" when it was counted already (taken).
func (a *Adapter) serveWebhook(w http.ResponseWriter, r *http.Request, sink lifecycle.ProviderEventSink) hostcall.Outcome {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "use POST", http.StatusMethodNotAllowed)
		return hostcall.Invalid
	}
	want := a.cfg.WebhookToken
	got := r.Header.Get("X-Gitlab-Token")
	if want == "" || subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
		if want == "" {
			a.log.WarnContext(r.Context(), "GitLab webhook refused: no webhook token is configured (Config.WebhookToken)")
		}
		webhookintake.Abandon(w, r) // the body is not read
		http.Error(w, "the X-Gitlab-Token header is not this hook's secret token", http.StatusUnauthorized)
		return hostcall.InvalidSignature
	}
	kind := gl.HookEventType(r)
	switch kind {
	case gl.EventTypeMergeRequest, gl.EventTypePipeline, gl.EventTypeJob, gl.EventTypeDeployment:
	default:
		webhookintake.Abandon(w, r)         // its body is not read
		w.WriteHeader(http.StatusNoContent) // nothing the lifecycle follows
		return hostcall.Ignored
	}
	body, err := a.hookBodies.Read(w, r, nil)
	if err != nil {
		if !errors.Is(err, webhookintake.ErrTooLarge) {
			a.log.WarnContext(r.Context(), "GitLab webhook not read", "event", string(kind), "err", err)
		}
		webhookintake.Refuse(w, r, err)
		if errors.Is(err, webhookintake.ErrBusy) {
			return hostcall.Failed
		}
		return hostcall.Invalid
	}
	raw := body.Bytes()
	body.Release()
	event, err := gl.ParseWebhook(kind, raw)
	if err != nil {
		http.Error(w, "the delivery is not a "+string(kind)+" payload", http.StatusBadRequest)
		return hostcall.Invalid
	}
	s, err := a.hookProject(r.Context())
	if err != nil {
		a.log.WarnContext(r.Context(), "GitLab webhook not applied: the project could not be read; the reconciler reads GitLab again", "event", string(kind), "err", err)
		http.Error(w, "accepted, not applied: the project could not be read; the tasks in review are read again at the next reconciliation", http.StatusAccepted)
		return hostcall.Failed
	}
	ev, ok := a.providerEvent(s, event)
	if !ok {
		w.WriteHeader(http.StatusNoContent)
		return hostcall.Ignored
	}
	ev.Source = "gitlab"
	ev.DeliveryID = r.Header.Get("Idempotency-Key")
	if ev.DeliveryID == "" {
		ev.DeliveryID = r.Header.Get("X-Gitlab-Event-UUID")
	}
	if err := sink.ApplyProviderEvent(r.Context(), ev); err != nil {
		if errors.Is(err, lifecycle.ErrProvider) {
			a.log.WarnContext(r.Context(), "GitLab webhook taken, but GitLab could not be read to apply it; its tasks are reconciled again", "event", string(kind), "delivery", ev.DeliveryID, "err", err)
			http.Error(w, "accepted: GitLab could not be read to apply it; its tasks are read again", http.StatusAccepted)
			return hostcall.Accepted // not recorded as applied: a resend is not a duplicate
		}
		a.log.ErrorContext(r.Context(), "GitLab webhook not taken; GitLab does not deliver it again, the reconciler reads the tasks in review at its next pass", "event", string(kind), "delivery", ev.DeliveryID, "err", err)
		http.Error(w, "the event could not be taken", http.StatusInternalServerError)
		return hostcall.Failed
	}
	w.WriteHeader(http.StatusOK)
	a.tel.Taken(r.Context(), ev.DeliveryID)
	return ""
}

// providerEvent turns a parsed GitLab event of the adapter's project into
// a provider event; ok is false for events of other projects and those
// the lifecycle does not follow.
func (a *Adapter) providerEvent(s *settings, event any) (ev lifecycle.ProviderEvent, ok bool) {
	ours := func(id int64, path string) bool {
		return id == s.id || (path != "" && path == s.owner+"/"+s.repo)
	}
	ref := func(iid int64) lifecycle.PullRequestRef {
		return lifecycle.PullRequestRef{Owner: s.owner, Repo: s.repo, Number: int(iid)}
	}
	switch e := event.(type) {
	case *gl.MergeEvent:
		if !ours(e.Project.ID, e.Project.PathWithNamespace) {
			return ev, false
		}
		attrs := e.ObjectAttributes
		ev.PullRequest = ref(attrs.IID)
		ev.HeadSHA = sha(attrs.LastCommit.ID)
		switch attrs.Action {
		case "update":
			ev.Kind = lifecycle.ProviderPullRequestEdited
			if attrs.OldRev != "" {
				ev.Kind = lifecycle.ProviderHeadChanged
			}
		case "approved", "approval":
			ev.Kind = lifecycle.ProviderReviewSubmitted
		case "unapproved", "unapproval":
			ev.Kind = lifecycle.ProviderReviewDismissed
		case "merge":
			ev.Kind = lifecycle.ProviderPullRequestMerged
		case "close":
			ev.Kind = lifecycle.ProviderPullRequestClosed
		case "reopen":
			ev.Kind = lifecycle.ProviderPullRequestReopened
		default: // open, and actions GitLab may add: a hint to read it again
			ev.Kind = lifecycle.ProviderPullRequestEdited
		}
		return ev, true
	case *gl.PipelineEvent:
		if !ours(e.Project.ID, e.Project.PathWithNamespace) {
			return ev, false
		}
		ev.Kind, ev.HeadSHA = lifecycle.ProviderChecksChanged, sha(e.ObjectAttributes.SHA)
		if e.MergeRequest.IID > 0 && (e.MergeRequest.TargetProjectID == 0 || e.MergeRequest.TargetProjectID == s.id) {
			ev.PullRequest = ref(e.MergeRequest.IID)
		}
		return ev, ev.HeadSHA != "" || ev.PullRequest.Number > 0
	case *gl.JobEvent:
		if !ours(e.ProjectID, "") {
			return ev, false
		}
		ev.Kind, ev.HeadSHA = lifecycle.ProviderChecksChanged, sha(e.SHA)
		return ev, ev.HeadSHA != ""
	case *gl.DeploymentEvent:
		if !ours(e.Project.ID, e.Project.PathWithNamespace) || e.DeploymentID == 0 {
			return ev, false
		}
		ev.Kind = lifecycle.ProviderDeploymentStatus
		ev.Deployment = &lifecycle.DeploymentStatus{ID: strconv.FormatInt(e.DeploymentID, 10), State: e.Status, EnvironmentURL: e.EnvironmentExternalURL}
		return ev, true
	}
	return ev, false
}

// sha returns s in lower case if it is a full commit SHA, else "".
func sha(s string) string {
	s = strings.ToLower(s)
	if len(s) != 40 {
		return ""
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return ""
		}
	}
	return s
}
