// Package github implements [lifecycle.ProviderAdapter] on GitHub: pull
// requests of one repository, their CI ([lifecycle.CIProvider]), GitHub's
// review decision ([lifecycle.ReviewDecider]), batched readings of many
// pull requests at once ([lifecycle.BatchReader]), deployments
// ([lifecycle.Deployer], [lifecycle.DeploymentObserver]) and the
// repository's webhook ([lifecycle.WebhookIntake]). Writes and the
// per-task readings use the REST API through
// github.com/google/go-github/v60; batched readings use the GraphQL API
// through github.com/shurcooL/githubv4. One [Adapter] serves one
// repository; bind it to a project with [lifecycle.AdapterBinding].
//
//	gh, err := github.New(github.Config{Owner: "acme", Repo: "web", Token: os.Getenv("GITHUB_TOKEN")})
//	// ...
//	svc, err := lifecycle.New(lifecycle.Config{
//		Store:    store,
//		Adapters: []lifecycle.AdapterBinding{{Project: "web", Adapter: gh}},
//		Deployer: gh,
//	})
//	mux.Handle("POST /hooks/github", gh.WebhookHandler(svc.QueuedEvents()))
//
// # Pull requests
//
// A task's pull request goes from its head branch (the request's, or
// [Config.BranchPrefix] and the task's identifier in lower case) into its
// base (the request's, [Config.BaseBranch], or the repository's default
// branch). The agent pushes the branch; EnsurePullRequest finds the open
// pull request of that branch (an owner-qualified head filter) or opens
// one, and a 422 "already exists" from a concurrent opener is answered by
// listing again, never by a second pull request. Merge passes the expected
// head as GitHub's sha parameter, so GitHub itself refuses to merge
// another head.
//
// # Batched readings
//
// [Adapter.ReadPullRequests] reads through GitHub's GraphQL endpoint
// ([Config.GraphQLURL]: https://api.github.com/graphql, or
// https://HOST/api/graphql for GitHub Enterprise Server), many pull
// requests per query through aliases. A sweep of the reconciler
// ([lifecycle.ReadSweep]) first probes the pull requests whose last
// reading it holds (their Version); every reading a caller or a merge
// waits for, and every pull request whose probe differs from its Version,
// is read in full: the probe's fields, the head's check runs and
// statuses with isRequired (paged beyond 100), and the latest opinionated
// reviews.
//
// GitHub charges a query what its documentation ("Rate limits and node
// limits for the GraphQL API") computes: the requests its connections
// need, one for each connection of each pull request, "divide the number
// by 100 and round the result to the nearest whole number", at least one
// point. A probe has one connection per pull request (the contexts of
// the head's rollup), so 149 pull requests cost one point; a full reading
// has two (the contexts, the reviews), 50 a point. 1,000 quiet pull
// requests cost 7 queries and 7 points a sweep, and the base's policy,
// read again (conditionally: GitHub's 304 is not charged) once per
// [Config.ProtectionTTL].
//
// The probe is sound: whatever a task shows changes a field the probe
// reads, or the pull request is read in full. Its Version is a digest of
// the probe's fields and of the base's policy, and of everything the
// reading showed (two readings that show different things never carry
// the same Version). For each fact a task shows, what moves when it
// changes at GitHub:
//
//	Fact the task shows                   Probed field that moves
//	-------------------------------------------------------------------------------------
//	state (open, closed, merged),         state ("Identifies the state of the pull
//	  merge commit                          request", GraphQL reference, PullRequest)
//	head commit                           headRefOid ("the oid of the head ref")
//	base branch (a retarget)              baseRefName ("the name of the base Ref")
//	draft                                 isDraft ("Identifies if the pull request
//	                                        is a draft")
//	mergeable: conflicting, behind,       mergeable (MergeableState: UNKNOWN "still
//	  unknown                               being calculated") and mergeStateStatus
//	                                        (DIRTY, BEHIND "The head ref is out of
//	                                        date", BLOCKED, CLEAN, ...)
//	GitHub's review decision              reviewDecision ("The current status of this
//	                                        pull request with respect to code review")
//	a review submitted (host reviews)     updatedAt: GitHub's documented
//	                                        pull_request_review "submitted" payload
//	                                        carries the pull request's updated_at equal
//	                                        to the review's submitted_at
//	each check's name, status and URL;    the head rollup's contexts (first 100): each
//	  CI pending for a required check       check run's databaseId (a re-run is a new
//	                                        run), name, status, conclusion, detailsUrl,
//	                                        startedAt, completedAt and isRequired, each
//	                                        status's context, state, targetUrl,
//	                                        createdAt and isRequired; of all of them,
//	                                        totalCount, checkRunCountsByState ("Counts
//	                                        of check runs by state") and
//	                                        statusContextCountsByState ("Counts of
//	                                        status contexts by state"); the rollup's
//	                                        state
//	CI pending for a check suite, when    the head's checkSuites (first 100): each
//	  the required checks are unknown       suite's databaseId, status ("The status of
//	  and every check passed                this check suite") and conclusion, asked
//	                                        only for those pull requests
//	the base's rules: required checks,    the base's protection and rules (REST), read
//	  approvals, dismissal of stale         at most once per Config.ProtectionTTL
//	  approvals
//
// Check runs and commit statuses do not move a pull request's updatedAt,
// nor does a conflict a push to the base causes (GitHub works
// mergeability out anew, UNKNOWN until a read starts it), nor a review's
// dismissal (the documented "dismissed" payload keeps the submission's
// updated_at): the probe does not rely on updatedAt for any of them. What
// no probed field covers is read in full at every sweep, as long as it
// holds: a head whose check suites keep CI running, a head with more than
// 100 checks (the probe reads the first page), and a review decision the
// Adapter makes itself from writers' reviews (GitHub gives none: the base
// requires no review), which a dismissal changes. A probe that finds
// mergeability UNKNOWN keeps the one read before: GitHub computes it anew
// for every open pull request each time their base moves, and the probe
// that asks starts the computation, so the next sweep reads the result
// (a merge reads in full, and GitHub refuses to merge while it does not
// know). A change at GitHub is so on the task within two sweeps without
// a webhook, within one for all but a base's push; a webhook makes the
// Service read the pull request in full at once. One change is outside
// the pull request: a reviewer given or refused write access after
// reviewing. Where the Adapter decides, the pull request is read in full
// anyway; where GitHub decides, its reviewDecision moves if the decision
// does, and the review itself is listed at the next full reading.
//
// A query GitHub gives up on as too slow (no answer in time, 502 or 504,
// or "Something went wrong while executing your query. This may be the
// result of a timeout") is asked again in halves within the same
// reading, and the queries after it read half as many pull requests,
// down to one; after 20 queries of that size succeed in a row, the size
// doubles again, up to 149 connections (probes) or 50 pull requests (full
// readings). A slow chunk so costs a few queries of one reading, not
// every sweep, and the size comes back once GitHub answers in time.
//
// # GitHub Enterprise Server
//
// Every GraphQL request asks for GitHub's merge info schema preview
// (Accept: application/vnd.github.merge-info-preview+json), under which
// Enterprise Server serves mergeStateStatus; github.com ignores it. An
// older server's schema may lack fields the Adapter asks for; GitHub then
// refuses the whole query with an undefinedField error naming the type
// and the field. The Adapter learns those fields from the first such
// answer, logs them once, and asks without them from then on (no
// introspection query, so none on github.com). The fields it can do
// without: PullRequestReview.fullDatabaseId (databaseId is read instead),
// PullRequest.mergeStateStatus (mergeability is then mergeable's alone:
// conflicting, or mergeable; behind is not seen), the contexts' counts by
// state (the probe reads the first page's checks themselves, and a head
// with more is read in full at every sweep), and isRequired (only the
// protection's and rulesets' required checks count). A field missing that
// the Adapter cannot do without fails the readings with GitHub's message.
//
// # The host's rules
//
// GitHub's reviewDecision is the decision (APPROVED, CHANGES_REQUESTED,
// REVIEW_REQUIRED: approved, changes_requested, pending), and honours code
// owners and the approval of the last push. GitHub answers null when the
// base requires no review: not_required, unless a writer's latest review
// asks for changes, which stays changes_requested (rework); the task's own
// review policy applies in the Service all the same. The per-task
// [Adapter.ReviewDecision] decides from the reviews of people with write
// access only (author association OWNER, MEMBER, COLLABORATOR), against
// the required approvals of the base's policy, honouring dismissed stale
// approvals; where neither the protection nor a ruleset says how many,
// it asks GitHub's reviewDecision through GraphQL (one point), and
// [Config.DefaultRequiredApprovals] applies only when that fails. An
// outsider's review counts for nothing and is not returned.
//
// CI is the latest check run of each name and the commit statuses of the
// head. The checks that count are those GitHub requires: those the base
// branch's protection names when the credentials may read it (admin
// rights), those its rulesets name (any reader may read them; rules of
// every type are read, those the adapter does not use skipped), and those
// GraphQL's isRequired(pullRequestNumber:) marks among the head's checks
// (any reader may ask it: readings ask it always; the per-task
// [Adapter.Checks] asks it, in one query of one point, when the
// protection cannot be read). Only they are reported, so that an optional
// check failing (codecov/patch, say) does not fail CI, and one named
// without a result yet makes CI pending. When none is known to be
// required, every check counts, and CI passes only when every check suite
// of the head has completed too: a suite queued or in progress (a CI App
// before its first check run) keeps CI running. When the protection cannot
// be read, a suite without a check run keeps CI running likewise, whatever
// is known: its first run may be a required check isRequired cannot mark
// yet. Some Apps leave their suites queued for good: a suite without a
// check run that has not completed [Config.StaleSuiteAfter] (10 minutes)
// after its creation, by the Adapter's Clock, is reported in
// lifecycle.CIReport.Stale (the App's name, since its creation) and no
// longer waited on, as Mergify's checks timeout gives up on a check that
// never reports. The suites are read, by REST, only then, and only when no
// check already keeps CI from passing. The policy is cached for
// [Config.ProtectionTTL]; a read that fails for a while (a rate limit, a
// server error) keeps the policy read before, and with none fails the
// reading rather than loosen it.
//
// A pull request's Mergeable follows GitHub's mergeable and
// mergeStateStatus (REST: mergeable, null while computed, and
// mergeable_state): conflicting (CONFLICTING, DIRTY), behind (BEHIND: the
// base requires branches up to date), unknown while GitHub computes it,
// which it does anew after its base moves, mergeable otherwise; a draft is
// read as one. GitHub's BLOCKED says the base's rules are not all met:
// those the lifecycle models (required checks, reviews), for which it
// refuses to ship by itself, or others. BLOCKED while every requirement
// the lifecycle models is met as the reading tells it (not a draft, CI
// neither pending, running nor failed, the review decision approved or
// not required) is lifecycle.MergeabilityBlocked, and BlockedReason names
// for people what the base's protection and rulesets require that the
// lifecycle does not model: conversations resolved, signed commits,
// deployments to given environments, checks reported by the App they are
// required from, a locked branch, pushes restricted to some people,
// workflows and code scanning; with the protection unreadable it says
// that it may require more. A merge queue the rulesets require is not
// among them: Merge goes through it (see "Merging through the merge
// queue"), so a pull request only the queue blocks reads mergeable and
// ship is offered. BLOCKED otherwise leaves the pull request mergeable:
// CI and reviews explain it, and ship is refused for them. The REST readings tell mergeable_state
// "blocked" apart with one full reading through GraphQL (one point), only
// when GitHub says blocked. (Kodiak does the same: a BLOCKED that missing
// reviews, checks and branch updates do not explain is "Merging blocked
// by GitHub requirements", and it does not merge.)
//
// # Merging
//
// [Adapter.Merge] merges at the expected head (GitHub's sha parameter)
// with a merge method GitHub allows: [Config.MergeMethod] when the
// repository's settings and the base's rules allow it, else the first of
// merge, squash and rebase they allow (Kodiak's choice). The settings are
// allow_merge_commit, allow_squash_merge and allow_rebase_merge of GET
// /repos/{owner}/{repo}, which GitHub answers only to credentials that may
// push; without them, GraphQL's mergeCommitAllowed, squashMergeAllowed
// and rebaseMergeAllowed. The rules are the rulesets' pull_request
// allowed_merge_methods, and a required linear history (protection or
// ruleset), which leaves merge commits out. Both are kept for
// [Config.ProtectionTTL]. A 405 naming the method ("Merge commits are not
// allowed on this repository.", and "Squash merges" and "Rebase merges"
// likewise: the settings or rules changed since) has them read again and
// the merge tried once more, without that method; a second refusal is
// final.
//
// After a merge into a base, GitHub works out anew the mergeability of
// every open pull request into it, for seconds, and refuses their merges
// meanwhile with 405 "Pull Request is not mergeable", though a reading a
// moment later may find them mergeable. That 405 is a
// [*lifecycle.TemporaryError] with Reason "mergeability_unknown", retried
// by the ship runner within its retry budget, unless the pull request
// read again has a reason of its own not to merge (closed, a draft,
// conflicting, behind, blocked by its base's rules): a
// [*lifecycle.RefusedError] naming it. The other refusals, of a review, a
// required check or unresolved conversations, are a
// [*lifecycle.RefusedError] with GitHub's own message.
//
// # Merging through the merge queue
//
// Into a base whose rulesets require GitHub's merge queue (the rule
// merge_queue, read with the base's rules, or GitHub's 405 "Changes must
// be made through the merge queue"), Merge adds the pull request to the
// queue with the GraphQL mutation enqueuePullRequest, at the expected
// head (expectedHeadOid: GitHub refuses another), unless it is queued
// already, and follows its entry until GitHub merges it (the merge
// commit; AlreadyMerged when it was merged before the call) or removes it:
// a [*lifecycle.RefusedError] with GitHub's reason
// (RemovedFromMergeQueueEvent.reason) and the failed checks of its merge
// group, or [lifecycle.ErrHeadMismatch] when its head moved. While it
// waits and the call's deadline comes, Merge returns a
// [*lifecycle.TemporaryError] whose Reason is lifecycle.WaitMergeQueue,
// saying the entry's position and state and, while its merge group's
// checks run, a summary of them ("merge group checks: 2 running, 1
// passed"); the ship runner shows it and calls Merge again, which follows
// the same entry: a pull request is never queued twice by the Adapter.
// One GraphQL query (one rate-limit point) reads a base's whole queue
// with the checks of its merge groups (the branches
// gh-readonly-queue/<base>/pr-<number>-<head>), at most once per
// [Config.MergeQueuePollInterval], shared by every Merge following an
// entry of that queue: following 100 entries for an hour costs about 220
// points, enqueueing them included.
//
// # Errors, rate limits and conditional requests
//
// A 404 is [lifecycle.ErrNotFound]. The Adapter keeps account of GitHub's
// rate limits, the REST API's ("core") and GraphQL's, from every answer's
// X-RateLimit-* headers and GraphQL's rateLimit ([Adapter.RateLimit]).
// Sweeps may use [Config.SweepShare] (80 %) of each; everything else
// (writes, merges, readings callers wait for) all of it. A request whose
// share is spent is not sent: it fails with a [*lifecycle.TemporaryError]
// that is RateLimited until the reset. GitHub's own rate limits (403 or
// 429 with X-RateLimit-Remaining: 0, or with Retry-After, or saying
// "secondary rate limit"; GraphQL's RATE_LIMIT errors) are RateLimited
// too, with the wait GitHub asked for, and 5xx answers are temporary,
// which the ship runner honours. go-github is kept from refusing requests
// by itself, so the Adapter's Clock and GitHub decide waits.
//
// Every REST GET is conditional: the ETag and body of the last answer of
// each URL are kept (2,048 URLs at most) and sent back as If-None-Match,
// and GitHub's 304, which its rate limit does not charge, stands for that
// answer; a 304 is as fresh as a full answer. GitHub's ETags are per
// token, so answers are kept per URL and per Authorization (a digest of
// it; the token itself is not kept): an App's installation token, renewed
// every hour, starts afresh. With Config.Client the Adapter sees no
// Authorization (the client's own transport adds it below) and keeps
// answers per URL. The Adapter does not retry by
// itself and never logs a token or a secret. [Config.APIURL] is used as
// given.
//
// # Webhooks
//
// [Adapter.WebhookHandler] verifies X-Hub-Signature-256 and applies the
// events it uses before answering, within [Config.WebhookApplyTimeout]. Add a webhook in the repository's settings
// with content type application/json, the secret of
// [Config.WebhookSecret], and the events: pull requests, pull request
// reviews, check runs, check suites, statuses and deployment statuses.
// Each event the Adapter takes makes the Service read the pull requests
// it names in full; ready_for_review and converted_to_draft so change a
// task's draft at once.
//
// # Telemetry
//
// The Adapter records OpenTelemetry metrics and spans through the API
// only, with [Config.MeterProvider] and [Config.TracerProvider] (the
// global ones by default), under the instrumentation scope
// "github.com/tasklifecycle/lifecycle/adapter/github". Every HTTP call to
// GitHub (REST, GraphQL and an App's token exchanges) is a client span
// "{METHOD} {operation}", a child of the span of the call's context, and
// goes to GitHub with that span's W3C traceparent; it is counted in
// lifecycle.host.requests and timed in http.client.request.duration. The
// operation (lifecycle.host.operation) is GitHub's operationId of the
// endpoint with a dot for its slash ("pulls.get", "pulls.merge",
// "checks.list-for-ref", "apps.create-installation-access-token"),
// "graphql" for the GraphQL endpoint and "other" for any path the
// Adapter does not call; never the path itself. The rate limits GitHub
// reports are the gauges lifecycle.host.rate_limit.remaining and
// lifecycle.host.rate_limit.reset per lifecycle.host.resource ("core",
// "graphql"), and [Adapter.WebhookHandler] counts each delivery in
// lifecycle.host.webhooks by lifecycle.outcome: accepted (applied, 200),
// duplicate (accepted, of a delivery ID or body this Adapter accepted
// before), ignored (an event, action or repository the lifecycle does not
// follow: 204), invalid_signature (X-Hub-Signature-256 missing, malformed
// or wrong, or no secret configured: 401), invalid (not POST, too large,
// not JSON or a form, a body that did not arrive in time: 405, 413, 415,
// 400, 408) and failed (the body budget spent, 503, or the sink failing,
// 503). With a noop TracerProvider, or the global one before it is set,
// and instruments no reader takes, a call costs no allocation more.
//
// # Deployments
//
// [Adapter.Deploy] creates a deployment of the merge commit that the
// team's deploy system (a GitHub Actions workflow on the deployment event,
// say) carries out, and waits until it posts a terminal deployment
// status.
//
// # The lifecycle's merge queue
//
// The Adapter is a [lifecycle.QueueHost]: it carries the lifecycle's own
// merge queue with GitHub's git database and merges APIs, and needs
// contents write permission. [Adapter.BuildCandidate] points a queue
// branch (such as lifecycle-queue/main/12) at the candidate's parent
// (POST /repos/{owner}/{repo}/git/refs, or PATCH with force when it
// exists) and merges each queued head into it with POST
// /repos/{owner}/{repo}/merges, a merge commit per head titled "Title
// (#12)"; a 409 there is a [*lifecycle.CandidateConflictError] naming
// the head. The repository's CI tests the queue branch as any other push
// ([Adapter.Checks] reads a candidate's checks as a head's).
// [Adapter.AdvanceBranch] lands a passed candidate by a fast-forward of
// the base (PATCH with force false), so the landed tree is the tested
// one; GitHub then marks the pull requests whose heads the base now
// contains merged. A refused fast-forward is told apart by reading the
// base: already at the candidate (success), moved by something else
// ([lifecycle.ErrBranchMoved]), or refused for another reason, such as
// the base's rules requiring pull requests (a [*lifecycle.RefusedError]
// with GitHub's message: the token must be allowed to push to the base).
// [Adapter.NativeQueue] is true when the base's rulesets require GitHub's
// own merge queue (a merge_queue rule), read with the base's policy.
package github
