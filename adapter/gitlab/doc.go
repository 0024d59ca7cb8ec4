// Package gitlab implements [lifecycle.ProviderAdapter] on GitLab, through
// gitlab.com/gitlab-org/api/client-go (the maintained continuation of
// github.com/xanzy/go-gitlab), for gitlab.com and self-managed instances.
//
// An [Adapter] works on one project, given by path or ID in [Config]:
//
//   - Merge requests: EnsurePullRequest finds the open merge request from
//     the task's branch (lifecycle/<identifier in lower case> unless the
//     submission names one) into the target branch (the project's default
//     unless configured or named), and opens one only when there is none;
//     a 409 from a concurrent create is answered by listing again. Only a
//     merge request whose source and target project are the adapter's
//     counts: GitLab's source_branch filter also lists forks' merge
//     requests from a branch of the same name, which are never adopted.
//     A draft is GitLab's "Draft: " title prefix. A resubmission changes
//     only what it gives: a title edited at GitLab stays unless the
//     submission has a title of its own, and a draft stays a draft.
//     Reviewer logins are resolved to user IDs; an unknown login is a
//     [*lifecycle.ValidationError] on pullRequest.reviewers. GitLab's
//     validation errors of the create
//     (400 {"message":{"source_branch":["does not exist"]}}) are a
//     [*lifecycle.ValidationError] too: source_branch on pullRequest.head
//     (the branch is not pushed yet), target_branch on pullRequest.base.
//   - Batched reading ([lifecycle.BatchReader], see
//     [Adapter.ReadPullRequests]): a merge request read in full is the
//     merge request, read once, its head pipeline's statuses, its
//     approvals and, when it has reviewers, their states: three or four
//     requests. The reconciler's sweep reads in full only the merge
//     requests that changed since their last reading, found with two
//     lists filtered by updated_after (the project's merge requests and
//     its pipelines): a sweep of any number of quiet merge requests is
//     two requests.
//   - CI ([lifecycle.CIProvider]): the commit statuses of the merge
//     request's head pipeline (its jobs and the statuses other CI systems
//     post into it), every page of them, when that pipeline is of the
//     head commit: a branch or merge request pipeline at the head, or a
//     merged-results pipeline (Premium; also a merge train's) at a merge
//     commit of the head; otherwise CI is pending. GitLab's statuses map
//     as: success → passed; failed and canceled → failed, except a job
//     allowed to fail, which is skipped (it carries no verdict); created,
//     waiting_for_resource, preparing, pending, running and scheduled →
//     running; manual → running for a blocking manual job (not allowed to
//     fail: it holds the pipeline until someone runs it), skipped for one
//     allowed to fail; skipped → skipped.
//   - Reviews ([lifecycle.ReviewDecider]): the merge request's approvals
//     and its reviewers' states; a reviewer's "Request changes" makes the
//     decision changes_requested. A project that resets approvals on push
//     sets [lifecycle.PullRequest.DismissesStaleReviews].
//   - Mergeability ([lifecycle.PullRequest.Mergeable]), from
//     detailed_merge_status: conflict is conflicting, need_rebase behind,
//     checking, unchecked, preparing and approvals_syncing unknown (GitLab
//     works mergeability out again in the background after a push to
//     either branch, and when a merge request is read alone: reading it
//     again shortly after has the result), anything else mergeable.
//   - Merge: GitLab's accept merge request call with sha set to the
//     expected head, sent once (the ship runner owns retries). A 409 is
//     [lifecycle.ErrHeadMismatch]. A merge request GitLab cannot merge
//     now (405) is a [*lifecycle.TemporaryError] while it is locked
//     (GitLab is merging it) or its detailed_merge_status passes by itself
//     (checking, unchecked, preparing, approvals_syncing,
//     ci_still_running), and otherwise a [*lifecycle.RefusedError] in
//     GitLab's words, with its detailed_merge_status and what it means
//     (not_approved, requested_changes, discussions_not_resolved,
//     conflict, need_rebase, ...). One merged at the expected head already
//     is reported AlreadyMerged, never merged again; so is one found
//     merged after a merge call that got no answer before its deadline
//     (still open or locked then: temporary).
//
// # Rate limits
//
// GitLab reports its rate limit on its answers (RateLimit-Limit,
// RateLimit-Observed, RateLimit-Remaining, RateLimit-Reset) and answers
// 429 with Retry-After once it is spent. The adapter's HTTP transport
// records both, and no request goes out that GitLab would refuse: it
// fails at once with a [*lifecycle.TemporaryError] whose RateLimited is
// set and whose RetryAfter is the wait, as a 429 does. The reconciler's
// sweeps use at most [Config.SweepShare] of the limit (80% unless
// configured); the rest is kept for what cannot wait: merges and the
// readings right before them, submissions, deployments, webhooks.
// client-go's own retries and rate limiter are off: each request is sent
// once, 5xx answers are [*lifecycle.TemporaryError]s carrying the wait
// GitLab asks for, measured on [Config.Clock], and the caller (the ship
// runner, the reconciler) retries them.
//
// [Deployer] waits for the deployment of a merge commit in an environment
// and follows the one GitLab has: the deployment a GitLab CI deploy job
// (environment: in the target branch's pipeline) makes of the merge
// commit, or, in an environment no job deploys to, one it records
// through the Deployments API for a deploy system that sets its status
// there. See [Deployer] for what each setup needs.
//
// # Telemetry
//
// The adapter records OpenTelemetry metrics and spans through the API
// only, with [Config.MeterProvider] and [Config.TracerProvider] (the
// global ones by default), under the instrumentation scope
// "github.com/tasklifecycle/lifecycle/adapter/gitlab". Every HTTP call to
// GitLab is a client span "{METHOD} {operation}", a child of the span of
// the call's context, and goes to GitLab with that span's W3C
// traceparent; it is counted in lifecycle.host.requests and timed in
// http.client.request.duration. The operation (lifecycle.host.operation)
// names the endpoint by the page of GitLab's API documentation it is on
// and what it does ("projects.get", "merge_requests.list",
// "merge_requests.merge", "commits.list-statuses", "deployments.create"),
// or "other" for any path the adapter does not call; never the path
// itself. The rate limit GitLab reports on its answers is the gauges
// lifecycle.host.rate_limit.remaining and lifecycle.host.rate_limit.reset
// with lifecycle.host.resource "api" (whichever throttle GitLab names in
// RateLimit-Name). [Adapter.WebhookHandler] counts each delivery in
// lifecycle.host.webhooks by lifecycle.outcome: accepted (taken: 200, or
// 202 when the Service could not read GitLab to apply it and reconciles
// its tasks), duplicate (taken, of a delivery ID this adapter accepted
// before), ignored (an event the lifecycle does not follow, or of another
// project: 204), invalid_signature (X-Gitlab-Token missing or wrong, or no
// token configured: 401), invalid (not POST, too large, not the event's
// JSON, a body that did not arrive in time: 405, 413, 400, 408) and failed
// (the body budget spent, 503; the project never read, 202 without being
// passed on; the sink failing, 500). With a noop TracerProvider, or the
// global one before it is set, and instruments no reader takes, a call
// costs no allocation more.
//
// [Adapter.WebhookHandler] takes the project's webhooks (merge requests,
// pipelines, jobs, deployments) as [lifecycle.ProviderEvent]s. GitLab
// does not deliver a failed delivery again and disables a hook that keeps
// failing, so a delivery the sink took is never answered with an error;
// the reconciler reads GitLab again anyway.
package gitlab
