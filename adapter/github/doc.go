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
// ([lifecycle.ReadSweep]) first probes, 200 pull requests per query, the
// fields that cost no connection (state, draft, head, base, mergeable and
// mergeStateStatus, reviewDecision, updatedAt, the head's rollup state):
// one rate-limit point per query, and a pull request whose probe matches
// the Version of its last reading is answered Unchanged. The others, and
// every reading a caller or a merge waits for, are read in full, 50 per
// query (each has two connections: one point per query): the head's check
// runs and statuses with isRequired, and the latest opinionated reviews.
// 1,000 quiet pull requests cost 5 queries and 5 points per sweep; 10,000
// swept every minute, 3,000 points an hour.
//
// # The host's rules
//
// GitHub's reviewDecision is the decision (APPROVED, CHANGES_REQUESTED,
// REVIEW_REQUIRED: approved, changes_requested, pending), and honours code
// owners and the approval of the last push. Where GitHub gives none (the
// base requires no review, or the per-task [Adapter.ReviewDecision]), the
// adapter decides from the reviews of people with write access only
// (author association OWNER, MEMBER, COLLABORATOR), against the required
// approvals of the base's policy, honouring dismissed stale approvals; an
// outsider's review counts for nothing and is not returned.
//
// CI is the latest check run of each name and the commit statuses of the
// head. Required checks and review rules come from the base branch's
// protection when the credentials may read it (admin rights), and from its
// rulesets (readable by anyone who can read the repository; rules of every
// type are read, those the adapter does not use skipped); GraphQL's
// isRequired adds those it marks. When the required checks are known,
// only they count, and one without a result makes CI pending. When they
// are unknown (the protection cannot be read, 403 or 404, or names no
// checks), every check counts, and CI passes only when every check suite
// of the head has completed too: a suite queued or in progress (a CI App
// before its first check run) keeps CI running. The suites are read, by
// REST, only then, and only when no check already keeps CI from passing.
// An unreadable protection requires [Config.DefaultRequiredApprovals]
// approvals; an unprotected branch (GitHub's "Branch not protected")
// requires none. The policy is cached for [Config.ProtectionTTL]; a read
// that fails for a while (a rate limit, a server error) keeps the policy
// read before, and with none fails the reading rather than loosen it.
//
// A pull request's Mergeable follows GitHub's mergeable and
// mergeStateStatus (REST: mergeable, null while computed, and
// mergeable_state): conflicting (CONFLICTING, DIRTY), behind (BEHIND: the
// base requires branches up to date), unknown while GitHub computes it,
// which it does anew after its base moves, mergeable otherwise; a draft is
// read as one. A merge GitHub refuses with 405 "Pull Request is not
// mergeable" while the mergeability is unknown (right after the previous
// merge into the same base) is a [*lifecycle.TemporaryError]; for a
// conflict, a review or a policy (review required, code owners, required
// checks, conversations, merge queue) it is a [*lifecycle.RefusedError]
// with GitHub's own message.
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
// answer; a 304 is as fresh as a full answer. The Adapter does not retry by
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
package github
