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
//     requests whose facts changed since their last reading (see "What
//     the sweep reads" below): a quiet sweep of n merge requests is
//     1 + ⌈n/100⌉ requests, and no more than 2 + ⌈n/100⌉ while some
//     changed within the last minute.
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
//     allowed to fail; skipped → skipped. The head pipeline's own status
//     counts too, as a check named "pipeline": a pipeline GitLab created
//     failed with no jobs (an invalid .gitlab-ci.yml) fails CI instead of
//     leaving it pending for ever, and so does a failed or canceled
//     pipeline none of whose jobs failed.
//   - Reviews ([lifecycle.ReviewDecider]): the merge request's approvals
//     and its reviewers' states; a reviewer's "Request changes" makes the
//     decision changes_requested. A project that resets approvals on push
//     sets [lifecycle.PullRequest.DismissesStaleReviews].
//   - Mergeability ([lifecycle.PullRequest.Mergeable]), from
//     detailed_merge_status (GitLab's documentation, merge_requests.md,
//     "Merge status"): conflict is conflicting, need_rebase behind;
//     checking, unchecked, preparing and approvals_syncing unknown (GitLab
//     works mergeability out again after a push to either branch, when
//     asked: a merge request read alone, or listed with
//     with_merge_status_recheck); mergeable, draft_status, ci_must_pass,
//     ci_still_running, not_approved and requested_changes mergeable as
//     far as GitLab's own rules go, since the lifecycle judges drafts, CI
//     and reviews from the rest of the reading (requested_changes is a
//     reviewer's state the review decision reports; under a policy other
//     than github_rules GitLab's refusal at merge is reported in its
//     words); anything else [lifecycle.MergeabilityBlocked], with
//     [lifecycle.PullRequest.BlockedReason] in words: GitLab's
//     requirements the lifecycle does not model (discussions_not_resolved,
//     merge_request_blocked and blocked_status, status_checks_must_pass
//     and external_status_checks, jira_association_missing, locked_paths,
//     locked_lfs_files, security_policy_violations, merge_time,
//     title_regex, commits_status, broken_status), and any value GitLab
//     adds, which the adapter does not know to be harmless.
//   - Merge: GitLab's accept merge request call with sha set to the
//     expected head, sent once (the ship runner owns retries). A 409 is
//     [lifecycle.ErrHeadMismatch]. A merge request GitLab cannot merge
//     now (405) is a [*lifecycle.TemporaryError] while it is locked
//     (GitLab is merging it) or its detailed_merge_status passes by itself
//     (checking, unchecked, preparing, approvals_syncing,
//     ci_still_running), with a Reason the ship runner shows
//     ([ReasonMergeabilityUnknown], [ReasonCIRunning], [ReasonMerging]),
//     and otherwise a [*lifecycle.RefusedError] in GitLab's words, with
//     its detailed_merge_status and what it means. One merged at the
//     expected head already is reported AlreadyMerged, never merged
//     again; so is one found merged after a merge call that got no answer
//     before its deadline (still open or locked then: temporary).
//   - Merge trains: on a project with merge trains (merge_trains_enabled
//     and merge_pipelines_enabled: GitLab's merge trains need merged
//     results pipelines), GitLab's merge call merges past the train. The
//     adapter adds the merge request to its target branch's train
//     instead, at the expected head (the Merge Trains API, sha set), and
//     follows its car every [Config.MergeTrainPollInterval] until GitLab
//     merges it (the merge commit) or drops it: a
//     [*lifecycle.RefusedError] with the reason of GitLab's system note
//     ("removed this merge request from the merge train because the
//     pipeline did not succeed"), or ErrHeadMismatch when the source
//     branch moved. A merge request whose pipeline is not complete yet,
//     which a train does not take, is temporary ([ReasonCIRunning]). While
//     the car rides past the call's deadline the merge is temporary
//     ([ReasonMergeTrain]), its message saying the car's position on the
//     train and the number of cars, its status and its pipeline (one list
//     of the train, read at the deadline), and the next call follows the
//     same car. As
//     Mergify and Tide do with their queues, a removal is reported, not
//     undone: the merge request goes back on the train when ship is asked
//     again.
//   - The lifecycle's own merge queue: the Adapter is a
//     [lifecycle.QueueHost] ([Adapter.NativeQueue] is true on a project
//     with merge trains, whose ships go through the train as above, and
//     false otherwise, so that the lifecycle's queue takes them when
//     lifecycle.Config.MergeQueue enables it). GitLab's REST API cannot
//     merge commits onto a branch without a merge request, so
//     [Adapter.BuildCandidate] builds candidates with git (2.38 or later,
//     [Config.GitPath]) in a bare mirror ([Config.MirrorDir]) and pushes
//     them to the project's http_url_to_repo as the user oauth2 with
//     Config.Token, which goes to git in an http.extraHeader through its
//     environment, never on its command line, and is scrubbed from git's
//     messages. [Adapter.AdvanceBranch] lands a tested candidate with a
//     push of it to the base under --force-with-lease (a compare-and-swap
//     GitLab's receive-pack does); a push GitLab refuses on a protected
//     base is a [*lifecycle.RefusedError] in its words: the token's user
//     needs "Allowed to push and merge" on the base, and push access to
//     the queue branches. GitLab then marks the merge requests whose heads
//     the push brought in merged (its refresh of merge requests after a
//     push, MergeRequests::RefreshService). A candidate's CI is the
//     newest pipeline of its commit on its queue branch (a branch
//     pipeline: CI must run on pushes to the queue branches), pending
//     until GitLab makes one. Branches are read and deleted with the
//     branches API. [Adapter.Close] removes a mirror the Adapter made in
//     a temporary directory.
//
// # What the sweep reads
//
// A sweep reads the tracked merge requests a hundred a request, and
// lists the project's pipelines updated since the sweep before
// (updated_after, 30 s earlier than GitLab's time of that sweep, for
// transactions that committed after it and clocks that differ). A merge
// request last read more than a minute (and 10 s) after its updated_at is
// listed through the REST API by iids[] (state all,
// with_merge_status_recheck); one read within that minute is read
// through GraphQL instead (see Reviews below), unless GitLab has not
// worked out its mergeability, which only the REST list asks it to do.
// Each reading's Version records what these show of it at its last full
// reading. For each fact a reading shows, what moves at GitLab when it
// changes, and so which compared field finds it:
//
//   - State (a close, a reopen, a merge), title and draft (GitLab's draft
//     is a title prefix), target branch (a retarget), reviewers, labels,
//     description: the merge request's row is saved, and Rails moves
//     updated_at (MergeRequests::UpdateService, the state machine of
//     state).
//   - Head: a push changes sha (and touches updated_at through its system
//     note, "added 1 commit").
//   - Mergeability: detailed_merge_status (and has_conflicts), which
//     GitLab works out on every request. Its changes are timeless (the
//     merge_status state machine wraps its transitions in
//     Gitlab::Timeless), and a push to the target branch marks the merge
//     requests into it unchecked without touching them
//     (MergeRequests::RefreshService): a merge request listed unchecked
//     is left as it was read while GitLab checks it again, which the list
//     asks for; the next sweep has the result (two sweeps in all), and a
//     merge request GitLab keeps waiting two minutes is read alone, which
//     asks again. GitLab's own checks (discussions, external status
//     checks, a blocking merge request, a merge time) are kept on no
//     column of the merge request: they too show only in
//     detailed_merge_status. So every tracked merge request is listed at
//     every sweep, not only those updated since: one request per hundred.
//     This, rather than reading the target branch's head once per sweep
//     or taking its Push Hooks, finds a conflict or a rebase a target
//     push causes whatever moved the target; Push Hooks are not followed.
//   - CI: a pipeline is a row of its own, and its updated_at moves when
//     its status does (a new pipeline, a pipeline finishing): a listed
//     pipeline of the merge request (of its source branch or head commit,
//     or of its refs/merge-requests/<iid>/ refs) that is newer than its
//     head pipeline, or is its head pipeline with another status or
//     updated_at, makes it read. A job changing state leaves its
//     pipeline's status, and its updated_at, alone while the pipeline
//     runs: a merge request whose head pipeline runs (created,
//     waiting_for_resource, preparing, pending, running, canceling) is
//     read in full at every sweep. A pipeline waiting for a manual job or
//     a scheduled one changes status when it runs again. Blind spot: a
//     status another CI system posts, already final, into a finished
//     pipeline whose status it leaves as it is moves nothing GitLab lists
//     (nor sends a hook for); it is on the task at the merge request's
//     next reading in full.
//   - Reviews: an approval, its removal and a review ("Request changes",
//     "reviewed") are known through a system note, whose touch of the
//     merge request ThrottledTouch drops while updated_at is less than a
//     minute old; with approval rules, an approval that meets them (or
//     its removal) also shows in detailed_merge_status. No list of the
//     REST API shows approvals or reviewers' states; GitLab's GraphQL API
//     does, for a hundred merge requests a request: Project.mergeRequests
//     (iids:) with, of each, approvedBy (GitLab Free; approvalsLeft and
//     approvalsRequired are Premium and not asked) and its reviewers'
//     mergeRequestInteraction.reviewState, besides what the REST list
//     gives (updatedAt, diffHeadSha, state, detailedMergeStatus,
//     mergeStatusEnum, conflicts, branches, draft). So a merge request
//     read within a minute (and 10 s) of its updated_at is read through
//     GraphQL at every sweep until that minute is over, and read in full
//     when its approvals, its reviewers or their states, its branches or
//     its draft differ from its last reading: a review GitLab hid so is
//     on the task at the next sweep, without a webhook, at any interval.
//     GraphQL gives updatedAt to the second only (GitLab's Time type);
//     the fields a reading shows that a save of the row changes are
//     compared one by one instead, so a change within the second of the
//     last finds them. A query GitLab finds over its complexity limit is
//     asked again of half as many merge requests (down to ten). Where
//     GraphQL fails, the sweep logs a warning and falls back to reading
//     the approvals (and reviewers' states) of such a merge request
//     through the REST API once that minute is over, one or two
//     requests: a hidden review is then on the task within that minute
//     and one sweep; where GitLab refused the query (an instance with
//     GraphQL turned off, a schema without one of its fields), it does so
//     for an hour before asking GraphQL again. With webhooks (approved, unapproved and update Merge Request
//     Hooks) the Service reads at once.
//
// The cost: a quiet sweep is 1 + ⌈n/100⌉ requests (11 for 1,000 merge
// requests), split between the REST list (merge requests changed more
// than a minute ago) and GraphQL (those changed within it), each a
// hundred a request: at most one request more than that while both
// hold some (and one more per hundred merge requests changed within the
// minute whose mergeability GitLab has yet to work out, which are listed
// as well); GitLab counts a GraphQL query as one request of its rate
// limit. Each merge request whose head pipeline runs, or that changed,
// is read in full (three or four requests). A sweep's first look at many
// merge requests changed at once pays for their readings in full in one
// sweep, within [Config.SweepShare] of the rate limit.
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
