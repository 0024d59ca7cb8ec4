// Package github implements [lifecycle.ProviderAdapter] on GitHub, with
// github.com/google/go-github/v60: pull requests of one repository, their
// CI ([lifecycle.CIProvider]), GitHub's review decision
// ([lifecycle.ReviewDecider]), deployments ([lifecycle.Deployer],
// [lifecycle.DeploymentObserver]) and the repository's webhook
// ([lifecycle.WebhookIntake]). One [Adapter] serves one repository; bind it
// to a project with [lifecycle.AdapterBinding].
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
// # CI and reviews
//
// CI is the latest check run of each name (filter=latest, every page;
// the run created last wins) and the commit statuses of the head.
// Required checks and review rules come from the base branch's protection
// when the credentials may read it (admin rights), and from its rulesets
// (readable by anyone who can read the repository; rules of every type
// are read, those the adapter does not use skipped). When the protection
// cannot be read (403, 404), every check counts and
// [Config.DefaultRequiredApprovals] approvals are needed; an unprotected
// branch (GitHub's "Branch not protected") requires none. Both are cached
// for [Config.ProtectionTTL]; a read that fails for a while (a rate limit,
// a server error) keeps the policy read before, and with none fails the
// reading rather than loosen it.
//
// # Errors and rate limits
//
// A 404 is [lifecycle.ErrNotFound]. Rate limits (403 or 429 with
// X-RateLimit-Remaining: 0, or with Retry-After, or saying "secondary rate
// limit") and 5xx answers are [*lifecycle.TemporaryError]s carrying the
// wait GitHub asked for, which the ship runner honours. go-github is kept
// from refusing requests by itself after an answer that used the limit up,
// so the Adapter's Clock and GitHub decide waits. The Adapter does not
// retry by itself and never logs a token or a secret. [Config.APIURL] is
// used as given.
//
// # Webhooks
//
// [Adapter.WebhookHandler] verifies X-Hub-Signature-256 and applies the
// events it uses before answering, within [Config.WebhookApplyTimeout]. Add a webhook in the repository's settings
// with content type application/json, the secret of
// [Config.WebhookSecret], and the events: pull requests, pull request
// reviews, check runs, check suites, statuses and deployment statuses.
//
// # Deployments
//
// [Adapter.Deploy] creates a deployment of the merge commit that the
// team's deploy system (a GitHub Actions workflow on the deployment event,
// say) carries out, and waits until it posts a terminal deployment
// status.
package github
