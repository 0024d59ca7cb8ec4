//go:build !race

package main

// raceEnabled says that the race detector, which multiplies a process's
// memory, is on.
const raceEnabled = false
