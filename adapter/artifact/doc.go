// Package artifact implements [lifecycle.ProviderAdapter] on local git
// repositories, with github.com/go-git/go-git/v5: each submission is a real
// commit on the task's branch, each pull request a record kept in the
// repository, each merge a real merge commit. It needs no code host and no
// credentials, which makes it the adapter of local demos and of the
// "artifact" submission mode. The same [Adapter] is the
// [lifecycle.CIProvider] of that mode, and [Deployer] deploys its merged
// commits into directories.
//
// # Repositories
//
// [Config.Dir] holds one repository per project, in the subdirectory named
// after the project in lower case, with characters other than letters,
// digits, '.', '_' and '-' replaced by '-' ("Web App" → "web-app"); tasks
// without a project share [Config.DefaultRepo]. The repository name is the
// Repo of its pull requests; their Owner is [Config.Owner]. A repository is
// created on first use, atomically (initialised aside, then renamed into
// place), with an initial commit on [Config.BaseBranch].
//
// Repositories are ordinary non-bare git repositories whose working tree is
// never checked out: the adapter writes objects and refs only, so
// `git -C <Dir>/<repo> log --all --graph` shows the whole history while
// `git status` there shows the files as deleted. Reading them with git
// (log, show, clone) is always safe; do not write to them with other tools
// while an Adapter uses them.
//
// Inside a repository:
//
//	refs/heads/main                        the base branch; merges land here
//	refs/heads/lifecycle/eng-42            a task's branch (Config.BranchPrefix + identifier)
//	.lifecycle/ENG-42/submission.json      the latest submission of the task, on its branch:
//	.lifecycle/ENG-42/submission.md        summary, notes, self-reported checks, IDs, title
//	refs/lifecycle/pulls                   the pull request records: one commit per change,
//	                                       whose tree holds <number/100>/<number>.json
//
// Every submission is a new commit on the task's branch (made from the base
// branch tip on first use) whose full SHA is the HeadSHA returned; its
// message carries the trailers Lifecycle-Task and Lifecycle-Submission. A
// request repeating the SubmissionID of the branch's last commit commits
// nothing, so a retried submission does not add a commit.
//
// Pull requests are numbered 1, 2, ... per repository. Their URL is the
// repository's file URL with the fragment "pull/<number>", for example
// file:///srv/lifecycle/repos/web#pull/3. Their records (head, base, state,
// draft, reviewers, merge commit) are stored on refs/lifecycle/pulls, so
// they survive restarts and travel with the repository; `git log -p
// refs/lifecycle/pulls` is their history.
//
// # Merging
//
// [Adapter.Merge] merges only at the expected head commit, else it fails
// with an error matching [lifecycle.ErrHeadMismatch] and changes nothing. It
// writes a merge commit with two parents (base tip, head) whose tree is a
// three-way merge of trees: what the pull request changed since the merge
// base is applied to the base tree. Submissions change only their task's
// directory, so merges do not conflict; should both branches have changed
// a path differently, Merge fails with an error naming the path and changes
// nothing. The base branch then moves to the merge commit and the record
// becomes merged. Merging a merged pull request again, at the same head,
// returns the same merge commit with AlreadyMerged set.
//
// # Concurrency and durability
//
// An Adapter is safe for concurrent use. It serialises all work on one
// repository (a lock per repository, honouring contexts), so concurrent
// submissions on a task make one pull request and a linear history with
// every commit. Writers also take a file lock (flock(2) on Unix) on
// <repo>/.git/lifecycle.lock, so two Adapters on the same Dir, in one
// process or several, do not lose each other's updates. Refs are written as git writes them: into
// "<ref>.lock", then renamed over the ref, after the objects they point to,
// so a reader sees the old value or the new one, whole.
//
// A process that stops at any point leaves the repository consistent: a
// branch may have a commit whose pull request record was not saved (the
// next submission saves it), and a base branch may have a merge commit
// whose record was not saved, which the next Adapter to open the
// repository, or the next Merge of that pull request, recognises and
// records, so the merge is never repeated. Nothing is fsynced, neither
// objects nor refs: a crash of the process loses nothing, a crash of the
// machine may lose the last writes. That suits local demos and artifact
// submissions; it is not a durable store of record. For speed, too, loose
// objects are written without compression (zlib stored blocks, which git
// reads like any other); `git gc` compresses them into a pack, and the
// Adapter carries on after it.
package artifact
