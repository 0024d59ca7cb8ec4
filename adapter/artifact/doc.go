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
//	.lifecycle/3b/ENG-42/submission.json   the latest submission of the task, on its branch:
//	.lifecycle/3b/ENG-42/submission.md     summary, notes, self-reported checks, IDs, title
//	refs/lifecycle/pulls                   the pull request records: one commit per change,
//	                                       whose tree holds <number/100>/<number>.json
//	refs/heads/lifecycle-queue/main/12     a merge queue candidate (the branch the queue names)
//	refs/lifecycle/advance/main            an advance of main whose pull requests are not
//	                                       recorded yet (see Merge queue)
//
// The directory of a task's records is in a shard of .lifecycle named
// after the first two hexadecimal digits of the SHA-256 of its name ("3b"
// for ENG-42; `ls .lifecycle/*/ENG-42` finds it), so that .lifecycle has
// at most 256 entries and a submission rewrites small trees however many
// tasks the repository holds. Records that an earlier version of this
// package wrote in .lifecycle/ENG-42/ stay there.
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
// # Merge queue
//
// The Adapter is a [lifecycle.QueueHost], so the lifecycle's merge queue
// can land changes on its repositories. [Adapter.BuildCandidate] merges
// the queued heads onto a parent with the same three-way tree merge as
// Merge, a merge commit per head (trailers Lifecycle-Queue-Pull and
// Lifecycle-Queue-Base), on the queue branch; a head that conflicts gives
// a [*lifecycle.CandidateConflictError]. Its commits are dated as the
// later of their parents, so the same request makes the same commit.
// [Adapter.AdvanceBranch] moves the base to a tested candidate, only by
// fast-forward and only from the commit the queue expects (else
// [lifecycle.ErrBranchMoved]); the open pull requests into the base whose
// heads the candidate contains are then recorded as merged with the
// candidate as their merge commit, as GitHub marks the pull requests of a
// pushed branch merged, and Merge of one answers AlreadyMerged. The base
// moves before the records, with the advance noted on
// refs/lifecycle/advance/<base> until they are saved: the next Adapter to
// open the repository, or the next advance of or Merge into that base,
// finishes an advance a process stopped midway.
//
// Candidates are tested by [Config.QueueCheck] (a function) or
// [Config.QueueCommand] (a command run in a temporary directory holding
// the candidate's files), reported by [Adapter.Checks] as one check,
// "queue-check" or "queue-command", once per candidate commit; with
// neither, candidates have no checks and land as soon as they are built.
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
// submissions; it is not a durable store of record.
//
// Each operation writes its new objects as one small pack (a .pack and its
// .idx in objects/pack, written into temporary files and renamed into
// place, index first, before any ref names them); it writes no loose
// object. A program that reads a repository with go-git while an Adapter
// writes to it must therefore reload go-git's list of packs
// (filesystem.ObjectStorage.Reindex, or open the repository again) to see
// the new objects, as after `git gc`; the git CLI reads the list every
// time.
//
// # Cost as history grows
//
// A submission or a merge reads and writes only what it changes, not
// what grows with the history (BENCHMARKS.md, BenchmarkHistory):
//
//   - Objects are packed. Each operation writes its objects as one small
//     pack (see above); creating a file per object was most of an
//     operation's cost, and grew, in the kernel, with the objects that had
//     passed through the 256 object directories. Once an Adapter has
//     written [Config.PackAfter] objects (256 by default) to a repository,
//     a goroutine packs any loose objects (of repositories an older
//     version or git wrote) into one new pack and removes the loose files,
//     then merges the smallest packs while they are not a geometric
//     progression of ratio 2 (each pack at least twice as big as all
//     smaller ones together), as `git repack --geometric=2` does: a
//     repository holds about log2(objects) packs and the few small ones
//     written since, and each object is rewritten only that many times.
//     The Adapter reads packs itself, each kept open with its index in
//     memory from one listing of the packs to the next, so that a new
//     listing (after a packer changed the packs) reads only the indexes
//     of new packs; go-git's storage, which reads them all again, is left
//     the loose objects and the deltas of packs made by git. The objects
//     an Adapter wrote stay in memory until it next lists the packs. Packs are written without deltas
//     (merged packs copy their entries as they are), so packing costs
//     little CPU; `git gc` makes them smaller, and the Adapter carries on
//     after it. No operation waits for a packer: it takes neither the
//     repository's lock nor its file lock, only lifecycle-pack.lock,
//     which keeps two packers off one repository. A new pack's index and
//     then the pack are renamed into objects/pack before anything they
//     hold is removed (loose objects after their pack, old packs after the
//     pack merging them), so a process killed while packing loses nothing;
//     the next packer removes what it left. The packs a merged pack
//     replaced are removed holding lifecycle-packs.lock, which Adapters
//     hold while they list the packs and read the new indexes (a pack
//     gone between the two is an error for go-git), and while the
//     Adapter's operations on the repository wait (a few file removals).
//     Each packer run first creates empty spare files, up to 64, in
//     lifecycle-spare in the git directory (outside objects/, which git
//     and the Adapters list); a writer takes two for a pack's files,
//     claiming each by renaming it, and creates files only when none is
//     left: creating a file was most of a write's cost, and grew after
//     many files were removed nearby (ext4 without a journal skips the
//     inodes freed in the last half minute). Merged-away packs are still
//     removed, never reused: a reader (another Adapter, git, which maps
//     packs) may still have one open. [Adapter.Close] waits for the
//     packers; an Adapter that opens a repository with many loose objects
//     (estimated, as `git gc --auto` does, from one of the 256 object
//     directories) or many small packs packs them at once.
//
//   - Merge bases are found by painting the commits down from both heads,
//     newest first, as git does, stopping once every commit still queued
//     is an ancestor of a common one: it reads the commits made since the
//     pull request forked from its base, not all the ancestors of the base
//     branch, as go-git's Commit.MergeBase does.
//
//   - A merge that a process made but did not record (see above) is looked
//     for only among the base branch commits made since the Adapter last
//     looked (up to 1,000 commits the first time), and the ones it finds
//     are kept until recorded.
//
//   - Pull request records are cached and updated in place, with an index
//     of the open ones by branch; they are read again from the repository
//     only when another Adapter wrote them. Their tree is sharded by
//     hundreds, so a change rewrites at most 100 records and the root.
//
//   - Task records are sharded (see above) and trees are encoded and
//     merged in linear time, so a submission or a merge rewrites a few
//     trees of a few hundred entries at most, not a directory with an
//     entry per task.
//
// What still grows: the [Deployer] writes out every file of the merged
// tree, the task records included, so a deployment costs in proportion to
// the tasks merged (files), not to the commits.
package artifact
