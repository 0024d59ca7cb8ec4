//go:build !race

package hostcalltest

// AllocSlack is how far apart two measures of the allocations of the same
// calls may be: without the race detector, not at all.
const AllocSlack = 0
