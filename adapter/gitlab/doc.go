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
//     A draft is GitLab's "Draft: " title prefix. Reviewer logins are
//     resolved to user IDs; an unknown login is a
//     [*lifecycle.ValidationError] on pullRequest.reviewers. GitLab's
//     validation errors of the create
//     (400 {"message":{"source_branch":["does not exist"]}}) are a
//     [*lifecycle.ValidationError] too: source_branch on pullRequest.head
//     (the branch is not pushed yet), target_branch on pullRequest.base.
//   - CI ([lifecycle.CIProvider]): the commit statuses of the merge
//     request's head pipeline, when that pipeline is of the head commit: a
//     branch or merge request pipeline at the head, or a merged-results
//     pipeline (Premium; also a merge train's) at a merge commit of the
//     head; otherwise CI is pending. A reading is two requests (the merge
//     request, one list of statuses), and one more the first time a
//     merged-results pipeline's merge commit is seen.
//   - Reviews ([lifecycle.ReviewDecider]): the merge request's approvals
//     and its reviewers' states; a reviewer's "Request changes" makes the
//     decision changes_requested. A project that resets approvals on push
//     sets [lifecycle.PullRequest.DismissesStaleReviews].
//   - Merge: GitLab's accept merge request call with sha set to the
//     expected head, sent once (the ship runner owns retries). A 409 is
//     [lifecycle.ErrHeadMismatch]. A merge request GitLab cannot merge
//     now (405) is a [*lifecycle.TemporaryError] while it is locked
//     (GitLab is merging it) or its detailed_merge_status passes by itself
//     (checking, unchecked, preparing, approvals_syncing,
//     ci_still_running), and otherwise a [*lifecycle.RefusedError] in
//     GitLab's words, with its detailed_merge_status. One merged at the
//     expected head already is reported AlreadyMerged, never merged
//     again; so is one found merged after a merge call that got no answer
//     before its deadline (still open or locked then: temporary).
//
// client-go's own retries are off for every request: each request is sent
// once. Rate limits (429, with Retry-After in seconds or as a date, or
// RateLimit-Reset) and 5xx answers are [*lifecycle.TemporaryError]s
// carrying the wait GitLab asks for, measured on [Config.Clock]; the
// caller (the ship runner, the reconciler) retries them.
//
// [Deployer] waits for the deployment of a merge commit in an environment
// and follows the one GitLab has: the deployment a GitLab CI deploy job
// (environment: in the target branch's pipeline) makes of the merge
// commit, or, in an environment no job deploys to, one it records
// through the Deployments API for a deploy system that sets its status
// there. See [Deployer] for what each setup needs.
//
// [Adapter.WebhookHandler] takes the project's webhooks (merge requests,
// pipelines, jobs, deployments) as [lifecycle.ProviderEvent]s. GitLab
// does not deliver a failed delivery again and disables a hook that keeps
// failing, so a delivery the sink took is never answered with an error;
// the reconciler reads GitLab again anyway.
package gitlab
