//go:build race

package hostcalltest

// AllocSlack is how far apart two measures of the allocations of the same
// calls may be: under the race detector, sync.Pool drops a quarter of
// what it is given at random, and the calls that find it empty allocate.
const AllocSlack = 0.5
