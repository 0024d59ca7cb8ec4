package main

import (
	"errors"
	"fmt"
	"syscall"
)

// mountSmallDisk mounts a tmpfs of size bytes on dir, which must exist. It
// fails with an error matching errMountRefused when the process may not
// mount.
func mountSmallDisk(dir string, size int64) error {
	err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, fmt.Sprintf("size=%d,mode=0700", size))
	if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) {
		return fmt.Errorf("mount a tmpfs on %s: %w (%w)", dir, errMountRefused, err)
	}
	if err != nil {
		return fmt.Errorf("mount a tmpfs on %s: %w", dir, err)
	}
	return nil
}

// unmountSmallDisk unmounts dir; when a process still holds a file there,
// it detaches the mount, which goes once the files are closed.
func unmountSmallDisk(dir string) error {
	err := syscall.Unmount(dir, 0)
	if errors.Is(err, syscall.EBUSY) {
		err = syscall.Unmount(dir, syscall.MNT_DETACH)
	}
	return err
}
