//go:build !linux

package main

import "fmt"

// mountSmallDisk fails: the harness mounts a tmpfs on Linux only.
func mountSmallDisk(dir string, size int64) error {
	return fmt.Errorf("mount a tmpfs on %s: only on Linux: %w", dir, errMountRefused)
}

func unmountSmallDisk(dir string) error { return nil }
