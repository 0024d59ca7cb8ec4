//go:build !unix

package main

import "time"

// raiseFileLimit does nothing where there is no rlimit.
func raiseFileLimit() {}

// cpuTime returns 0 where getrusage is missing.
func cpuTime() time.Duration { return 0 }

// rss returns 0 where /proc/self/status is missing.
func rss() int64 { return 0 }
