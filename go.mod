module github.com/tasklifecycle/lifecycle

go 1.24.0

require (
	github.com/google/go-cmp v0.7.0
	github.com/mattn/go-sqlite3 v1.14.53
)
